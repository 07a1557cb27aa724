"""The worker registry: one heartbeat row per worker process start."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells a worker's process apart from every other process of its machine
    while that machine runs, beyond its pid (which is reused) and host name
    (which repeats): see `headgate._runtime.local_processes`."""

    boot_id: str
    """The kernel's boot id: random at each boot of each machine."""
    namespaces: str
    """The pid and time namespaces its pid and start time were read in
    (`pid:[4026531836] time:[4026531834]`)."""
    start_ticks: int
    """When it started, in clock ticks since boot (/proc/PID/stat, field 22)."""


@dataclass(frozen=True)
class WorkerBeat:
    """A worker process's heartbeat: who it is, what it serves, what it holds."""

    worker_id: str
    host: str
    pid: int
    queues: Mapping[str, int]
    """queue -> capacity."""
    started_at_ms: int
    running: int
    overdue: int
    """Handlers still running past their timeout (their threads cannot be killed)."""
    process: ProcessIdentity | None = None
    """None where the process cannot be told apart for certain (not Linux)."""
    kinds: tuple[str, ...] | None = None
    """The kinds it runs (its handlers'), on every queue it serves."""


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int
    queues: Mapping[str, int]
    started_at_ms: int
    heartbeat_at_ms: int
    expires_at_ms: int
    running: int
    overdue: int
    process: ProcessIdentity | None = None
    """None for a worker that could not tell (or an earlier build's row)."""
    kinds: tuple[str, ...] | None = None
    """The kinds it runs, sorted; None in an earlier build's row (not known)."""

    @classmethod
    def beaten(cls, beat: WorkerBeat, now_ms: int, ttl_ms: int) -> WorkerRow:
        """The row a beat at `now_ms` makes: alive until `now_ms + ttl_ms`."""
        return cls(
            worker_id=beat.worker_id,
            host=beat.host,
            pid=beat.pid,
            queues=dict(beat.queues),
            started_at_ms=beat.started_at_ms,
            heartbeat_at_ms=now_ms,
            expires_at_ms=now_ms + ttl_ms,
            running=beat.running,
            overdue=beat.overdue,
            process=beat.process,
            kinds=None if beat.kinds is None else tuple(sorted(beat.kinds)),
        )


class Workers(ABC):
    """The worker registry: operational state (not events), one row per worker
    process start, each alive until its heartbeat expires in store time.

    An implementation must serialise beats with the event log's writes, so a
    rescue (`WorkerRescue`) that read a row as expired sees any beat made since
    by the time it commits.
    """

    @abstractmethod
    def beat(self, beat: WorkerBeat, ttl_ms: int) -> WorkerRow:
        """Record that the worker is alive until store time now + ttl_ms (creating
        its row, or renewing it)."""

    @abstractmethod
    def stop(self, worker_id: str) -> None:
        """Remove a worker's row when it stops gracefully (its jobs are released)."""

    @abstractmethod
    def live(self, now_ms: int) -> list[WorkerRow]:
        """Workers whose heartbeat has not expired by now_ms, oldest first."""

    @abstractmethod
    def in_namespaces(self, boot_id: str, namespaces: str) -> list[WorkerRow]:
        """Workers, expired or not, whose process identity names this boot id and
        these namespaces (so a process under them can look their pids up),
        oldest first; rows without an identity are never among them."""


class WorkerRescue(ABC):
    """The worker registry's part of a write transaction: the rescuer's reads of
    the dead, and forgetting them in the write that takes their jobs back."""

    @abstractmethod
    def expired_workers(self, now_ms: int) -> list[WorkerRow]:
        """Workers whose heartbeat has expired by now_ms."""

    @abstractmethod
    def forget_workers(self, workers: Collection[WorkerRow]) -> None:
        """Remove these heartbeat rows, as they were read (their jobs have been taken
        back). A worker that has beaten since keeps its row: it is alive after all
        (on PostgreSQL its renewal may commit inside this very transaction), and
        its row is what gets the jobs it claims next rescued should it die."""
