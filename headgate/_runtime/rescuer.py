"""Jobs of dead workers made claimable again: by lease after their heartbeat
expired, or at once by a worker of their own machine that knows they died.

By TTL: a duty of the maintenance lease (`maintenance.ExpiredRescue`, run by
the `duties.DutyKeeper` of one process at a time). Every rescue interval it
reads the workers whose heartbeat has expired and, in one write fenced by the
lease's term, records what
`job_rules.rescue` decides for each running job of theirs: abandoned (crash
count + 1, claimable again), or quarantined with its fingerprint; then it
forgets those workers. A worker that is alive, however long its job runs,
keeps renewing its heartbeat and is never rescued from; one frozen past its
expiry comes back to find its jobs moved on, and its appends are refused.
A rescue that quarantines a job's fingerprint holds that fingerprint's
pending jobs with it (quarantined too), in the same write: enqueues of it are
refused from then on, and what was enqueued before would only crash more
workers.

Locally (`maintenance.LocalRescue`): every worker process, lease or not, at
its start (before its first claim) and every rescue interval, reads the
heartbeat rows of its own boot and namespaces, expired or not, and rescues at
once those whose process is certainly dead (`local_processes`: no process has
the pid, or another one does). A supervisor's restarted worker thus counts its
predecessor's crash before it claims anything: a crash loop is quarantined
after `crash_limit` deaths however long the TTL, and the dead worker's healthy
jobs run again within a turn. This needs no lease: the write is serialised and
reads the jobs still running on the dead worker inside it, and each job's
rescue is appended at the version read there, so two rescuers of one dead
worker (two restarted workers, or one and the lease holder) count its crash
once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from headgate._clock import Clock
from headgate._domain.events import JobQuarantined
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.job_rules import CrashedJob, rescue
from headgate._domain.streams import job_stream, quarantine_stream
from headgate._errors import StoreError
from headgate._logs import get_logger
from headgate._projections import JobRow
from headgate._projections.jobs import run_schedule_id
from headgate._runtime import job_units
from headgate._runtime.config import WorkerConfig
from headgate._runtime.local_processes import LocalProcesses
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._store.port import (
    ANY_VERSION,
    Fence,
    LeaseHolder,
    Store,
    StreamAppend,
    Unit,
    WorkerRow,
    WriteTransaction,
)

log = get_logger("headgate.workers")
HOLD_LIMIT: Final = 1_000
"""Pending jobs quarantined with their fingerprint in one rescue write, at most."""
LOGGED_IDS: Final = 20


class Rescuer:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        holder: LeaseHolder,
        config: WorkerConfig,
        *,
        recorder: Recorder = NO_METRICS,
        processes: LocalProcesses | None = None,
    ):
        self._store = store
        self._processes = processes if processes is not None else LocalProcesses()
        self._recorder = recorder
        self._clock = clock
        self._holder = holder
        self._config = config
        self.rescued = 0
        """Jobs taken back from dead workers by this process, in all."""
        self.quarantined = 0
        self._crashed_children: list[_Taken] = []

    def rescue_local(self) -> int:
        """Rescue, unfenced, the workers of this machine whose process is certainly
        dead, expired or not (not this process's own); returns the jobs taken."""
        here = self._processes.here
        if here is None:
            return 0
        try:
            rows = self._store.workers.in_namespaces(here.boot_id, here.namespaces)
            dead = self._processes.dead_among(
                row for row in rows if row.worker_id != self._holder.holder
            )
            if not dead:
                return 0
            with self._store.log.write() as transaction:
                taken = self._take_back(transaction, dead)
        except StoreError:
            log.warning("local rescue failed; it runs again at the next interval", exc_info=True)
            return 0
        return self._report(
            taken, "worker's process is gone from this machine; its jobs were rescued"
        )

    def rescue_expired(self, fence: Fence) -> int:
        """Rescue, in one write fenced by `fence`, the workers whose heartbeat
        expired; returns the jobs taken. Raises LeaseLost when the term is gone.

        Never this process's own workers: they are alive (this runs), their
        dispatcher renews their heartbeat on a thread of its own, and their
        jobs are running; their row may look expired only while that thread
        is between two beats (a stall, a fake clock moved on)."""
        with self._store.log.write(fence) as transaction:
            expired = transaction.expired_workers(transaction.now_ms)
            dead = [row for row in expired if row.worker_id != self._holder.holder]
            if not dead:
                return 0
            taken = self._take_back(transaction, dead)
        return self._report(taken, "worker stopped heartbeating; its jobs were rescued")

    def _take_back(self, transaction: WriteTransaction, dead: Sequence[WorkerRow]) -> _Taken:
        """Record the rescue of the dead workers' running jobs, and forget them, in
        this transaction: each job at the version read here, so a job another
        rescuer took back first is not running here, or refused. A worker's
        jobs share the blame for its death."""
        jobs = transaction.running_on([worker.worker_id for worker in dead])
        by_worker: dict[str, list[JobRow]] = defaultdict(list)
        for row in jobs:
            assert row.worker_id is not None
            by_worker[row.worker_id].append(row)
        taken = self._record_crashes(transaction, [by_worker[w] for w in sorted(by_worker)])
        taken.workers = dead
        transaction.forget_workers(dead)
        return taken

    def take_back_crashed(self, transaction: WriteTransaction, rows: Sequence[JobRow]) -> int:
        """Record, in this transaction, a crash of each of these running jobs of this
        worker, whose child process died running it (each alone to blame); after
        the commit, `report_crashes` logs and counts them. Returns those recorded."""
        taken = self._record_crashes(transaction, [[row] for row in rows])
        self._crashed_children.append(taken)
        return len(taken.jobs)

    def report_crashes(self) -> None:
        """Log and count the child crashes recorded since the last call (committed)."""
        done, self._crashed_children = self._crashed_children, []
        for taken in done:
            self._report(taken, "")

    def forget_crashes(self) -> None:
        """The write recording them failed: nothing of them is reported."""
        self._crashed_children.clear()

    def _record_crashes(
        self, transaction: WriteTransaction, groups: Sequence[Sequence[JobRow]]
    ) -> _Taken:
        """Record a crash of each running job, each group's jobs sharing the blame
        of one death, at the version read in this transaction. A running job's
        row was last changed by its claim, so the crash is recorded in attempt
        attempts + 1, which began at the row's updated_at_ms."""
        by_id = {row.job_id: row for group in groups for row in group}
        crashed_groups = [
            [
                CrashedJob(
                    row.job_id,
                    row.worker_id or "",
                    fingerprint_of_text(row.kind, row.payload),
                    row.crash_count,
                    row.version,
                    attempt=row.attempts + 1,
                    claimed_at_ms=row.updated_at_ms,
                    schedule_id=run_schedule_id(row),
                )
                for row in group
            ]
            for group in groups
        ]
        fingerprints = {job.fingerprint for group in crashed_groups for job in group}
        blame = transaction.crash_blame(fingerprints)
        quarantined = transaction.quarantined(fingerprints)
        units: list[Unit] = []
        owners: list[JobRow] = []
        for group in crashed_groups:
            for job, job_events, fingerprint_events in rescue(
                group, blame, self._config.crash_limit, quarantined
            ):
                owners.append(by_id[job.job_id])
                units.append(
                    [
                        StreamAppend(job_stream(job.job_id), job.version, job_events),
                        StreamAppend(
                            quarantine_stream(job.fingerprint), ANY_VERSION, fingerprint_events
                        ),
                    ]
                )
        results = transaction.append_units(units)
        taken = _Taken(())
        held: dict[str, JobRow] = {}
        for unit, owner, result in zip(units, owners, results, strict=True):
            if isinstance(result, list):
                quarantined_now = any(isinstance(e, JobQuarantined) for e in unit[0].events)
                taken.jobs.append((owner, quarantined_now))
                if quarantined_now:
                    held.setdefault(fingerprint_of_text(owner.kind, owner.payload), owner)
        taken.held = self._hold_pending(transaction, held)
        return taken

    def _hold_pending(
        self, transaction: WriteTransaction, held: dict[str, JobRow]
    ) -> dict[str, list[str]]:
        """Quarantine the jobs still waiting to run of the fingerprints this rescue
        quarantined a job of: each would crash another worker when claimed (a
        crash loop's backlog, a schedule's ticks enqueued meanwhile). Read after
        the rescue's appends, so its own jobs given back are among them; at most
        HOLD_LIMIT a write (a later crash takes the next ones). Returns the job
        ids held, per fingerprint."""
        left = HOLD_LIMIT
        units: list[Unit] = []
        for fingerprint, example in sorted(held.items()):
            for row in transaction.pending_like(example.kind, example.payload, left):
                event = JobQuarantined(
                    row.job_id, fingerprint, row.crash_count, schedule_id=run_schedule_id(row)
                )
                units.append([StreamAppend(job_stream(row.job_id), row.version, (event,))])
                left -= 1
            if left <= 0:
                break
        results = transaction.append_units(units)
        done: dict[str, list[str]] = defaultdict(list)
        for unit, result in zip(units, results, strict=True):
            held_job = unit[0].events[0]
            if isinstance(result, list) and isinstance(held_job, JobQuarantined):
                done[held_job.fingerprint].append(held_job.job_id)
        return dict(done)

    def _report(self, taken: _Taken, message: str) -> int:
        """Count and log a rescue once its write has committed."""
        self.rescued += len(taken.jobs)
        for row, held in taken.jobs:
            self.quarantined += int(held)
            self._recorder.job_rescued(row.queue, row.kind, quarantined=held)
            if held:
                log.error(
                    "job quarantined: its workers died running it too often",
                    job_id=row.job_id,
                    kind=row.kind,
                    queue=row.queue,
                    crash_count=row.crash_count + 1,
                    **job_units.row_origin_fields(row),
                )
        for worker in taken.workers:
            log.warning(
                message,
                worker_id=worker.worker_id,
                host=worker.host,
                pid=worker.pid,
                job_ids=[row.job_id for row, _ in taken.jobs if row.worker_id == worker.worker_id],
            )
        for fingerprint, job_ids in taken.held.items():
            log.warning(
                "jobs of a fingerprint quarantined for crashes are held with it, not run",
                fingerprint=fingerprint,
                jobs=len(job_ids),
                job_ids=job_ids[:LOGGED_IDS],
            )
        return len(taken.jobs)


@dataclass
class _Taken:
    """What one rescue write took back: its workers, and per job whether it was
    quarantined."""

    workers: Sequence[WorkerRow]
    jobs: list[tuple[JobRow, bool]] = field(default_factory=list)
    held: dict[str, list[str]] = field(default_factory=dict)
    """Pending jobs quarantined with their fingerprint, by fingerprint."""
