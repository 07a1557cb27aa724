"""Headgate: the embedded runtime a host service creates, starts and stops.

    hg = Headgate("sqlite:///headgate.db")
    hg.put_schedule("nightly", spec="0 9 * * *", kind="report.build")
    hg.start()  # returns at once; the runtime runs on background threads

Every process of a service may do this against the same store (forked web
workers included): the `scheduler` lease makes exactly one of them fire ticks.
A child forked from a process holding a Headgate, started or not, gets it
stopped and with fresh connections (a fork waits for a write in flight).
After stop() the object still reads and writes the store and can start again;
close() releases the database connections. The runtime's threads never hold
the interpreter open: a process that exits without stop() (a failed startup,
a forgotten shutdown hook) stops its runtimes on the way out, and a process
whose only job is scheduling keeps its main thread busy (`headgate serve`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence

import pykka

from headgate._clock import Clock, StoreClock
from headgate._commands import Commands, ScheduleDefinition, validate_definition
from headgate._domain.admission import require_kind, require_payload
from headgate._domain.ids import fingerprint_of_text
from headgate._errors import NotFound, StoreUnavailable
from headgate._forksafe import renew_in_forked_children
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._model import (
    EnqueueEvent,
    EnqueueEventsPage,
    Job,
    LeaseStatus,
    RunNowResult,
    Schedule,
    SchedulesPage,
)
from headgate._runtime.actors import RunPending, SchedulerActor, Wake
from headgate._runtime.config import SCHEDULER_LEASE, RuntimeConfig
from headgate._runtime.hooks import EnqueueHook
from headgate._runtime.tick_batch import TickProcessor
from headgate._store.port import Claimant, CompactionReport, Store
from headgate._store.sql.store import open_store

DEFAULT_URL = "sqlite:///headgate.db"
STOP_TIMEOUT_S = 30.0
EXIT_STOP_TIMEOUT_S = 5.0
"""At interpreter exit, how long stopping every runtime may wait for blocked writes."""
log = get_logger("headgate")

_RUNNING: set[Headgate] = set()
"""Runtimes started in this process and not stopped since (held strongly: a
runtime the host dropped every reference to still fires ticks, and must stop)."""


@atexit.register
def _stop_runtimes_at_exit() -> None:
    """Stop what the host left running, releasing the lease at once.

    The actors run on daemon threads, so the interpreter never waits for them
    (a host whose startup failed after start() used to hang on exit, still
    firing ticks); exit handlers run while they still live, so this stops
    them cleanly first. A stop that cannot finish in time leaves the lease to
    expire, as a crash does.
    """
    deadline = time.monotonic() + EXIT_STOP_TIMEOUT_S
    for hg in list(_RUNNING):
        with contextlib.suppress(Exception):
            hg.stop(timeout=max(deadline - time.monotonic(), 0.1))


class Headgate:
    def __init__(
        self,
        url: str | Store = DEFAULT_URL,
        *,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
        hooks: Sequence[EnqueueHook] = (),
    ) -> None:
        """`url`: `sqlite:///path.db` or `postgresql://...`; or an open store
        (`headgate._store.port.Store`, with its own clock), as tests do to
        inject faults. By default, time is the store's: hosts sharing
        PostgreSQL agree on it."""
        if isinstance(url, Store):
            if clock is not None and clock is not url.clock:
                raise ValueError("clock: a store given to Headgate brings its own clock")
            self._store = url
        else:
            self._store = open_store(url, clock if clock is not None else StoreClock())
        self.clock: Clock = self._store.clock
        self.config = config if config is not None else RuntimeConfig()
        self._reads = self._store.reads
        self._commands = Commands(self._store, self.config.limits)
        self._leases = self._store.leases
        self._hooks = list(hooks)
        self._scheduler: pykka.ActorRef[SchedulerActor] | None = None
        self._processor: TickProcessor | None = None
        self._lifecycle = threading.Lock()
        renew_in_forked_children(self)

    # lifecycle -----------------------------------------------------------

    def __enter__(self) -> Headgate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def start(self) -> Headgate:
        """Start the actor runtime: the scheduler duty (if this process wins the lease)
        and the schedule actors."""
        with self._lifecycle:
            if self._scheduler is not None:
                return self
            claimant = Claimant(
                holder=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
                host=socket.gethostname(),
                pid=os.getpid(),
            )
            processor = TickProcessor(
                self._store.log,
                self.clock,
                self._hooks,
                self.config.limits,
                max_ticks=self.config.max_ticks_per_batch,
            )
            self._scheduler = SchedulerActor.start(
                self._store, self.clock, self.config, processor, claimant
            )
            self._processor = processor
            _RUNNING.add(self)
            log.info("runtime started", holder=claimant.holder)
        return self

    def after_fork_in_child(self) -> None:
        """A forked child has none of the parent's actor threads: it is not running
        (start() starts its own actors, which then compete for the lease)."""
        self._scheduler = None
        self._processor = None
        self._lifecycle = threading.Lock()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the actors and release the lease; the store stays usable.

        A batch waiting for its instant is abandoned at once (it stays due).
        Raises StoreUnavailable if a write still blocks the actors after
        `timeout` (another process holding SQLite's lock, say); they stop as
        soon as it returns.
        """
        with self._lifecycle:
            scheduler, self._scheduler = self._scheduler, None
            processor, self._processor = self._processor, None
            _RUNNING.discard(self)
            if scheduler is None:
                return
            if processor is not None:
                processor.cancel()  # now, not when the actor gets to its stop message
            try:
                scheduler.stop(block=True, timeout=timeout)
            except pykka.Timeout:
                raise StoreUnavailable(
                    f"the runtime did not stop within {timeout:g} s: a store write is still "
                    "blocked (is the database locked by another process?); its actors stop "
                    "as soon as that write returns"
                ) from None
            log.info("runtime stopped")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self._store.close()

    def add_hook(self, hook: EnqueueHook) -> None:
        """Hooks apply from the next start()."""
        self._hooks.append(hook)

    def run_pending(self, timeout: float = 30.0) -> bool:
        """Fire everything due now and wait; False if this process is not the scheduler."""
        scheduler = self._scheduler
        if scheduler is None:
            return False
        request = RunPending(threading.Event())
        scheduler.tell(request)
        if not request.done.wait(timeout):
            raise TimeoutError(f"due schedules were not all fired within {timeout} s")
        return bool(request.fired and request.fired[0])

    # schedules -----------------------------------------------------------

    def put_schedule(
        self,
        schedule_id: str,
        *,
        spec: str,
        kind: str,
        payload: JsonValue = None,
        queue: str = "default",
        on_missed: str = "skip",
        backfill_limit: int = 1,
        paused: bool = False,
    ) -> Schedule:
        """Create or update a schedule (an upsert); invalid input raises and writes nothing."""
        definition = validate_definition(
            schedule_id,
            spec=spec,
            kind=kind,
            payload=payload,
            queue=queue,
            on_missed=on_missed,
            backfill_limit=backfill_limit,
            paused=paused,
            limits=self.config.limits,
        )
        schedule, _ = self._upsert_schedule(definition)
        return schedule

    def _upsert_schedule(self, definition: ScheduleDefinition) -> tuple[Schedule, bool]:
        """put_schedule for a validated definition, also saying whether it created
        the schedule (the HTTP API answers 201)."""
        row, created = self._commands.put_schedule(definition)
        self._poke()
        return Schedule.from_row(row), created

    def get_schedule(self, schedule_id: str) -> Schedule:
        row = self._reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return Schedule.from_row(row)

    def list_schedules(self, limit: int = 200, cursor: str | None = None) -> SchedulesPage:
        page = self._reads.schedules_page(limit, cursor)
        return SchedulesPage([Schedule.from_row(row) for row in page.items], page.next_cursor)

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; its enqueue history stays readable."""
        self._commands.delete_schedule(schedule_id)

    def run_now(self, schedule_id: str, idempotency_key: str) -> RunNowResult:
        """Enqueue now: one extra job; the same key always returns the same job."""
        return self._commands.run_now(schedule_id, idempotency_key)

    def enqueue_events(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> EnqueueEventsPage:
        """The schedule's automatic enqueue attempts, newest first (the newest 100)."""
        page = self._reads.enqueue_history(schedule_id, limit, cursor)
        return EnqueueEventsPage(
            [EnqueueEvent.from_row(row) for row in page.items], page.next_cursor
        )

    # jobs ----------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: JsonValue = None,
        *,
        queue: str = "default",
        unique_key: str | None = None,
        periodic_origin: object = None,
    ) -> Job:
        row = self._commands.enqueue(
            kind, payload, queue=queue, unique_key=unique_key, periodic_origin=periodic_origin
        )
        return Job.from_row(row)

    def get_job(self, job_id: str) -> Job:
        row = self._reads.job(job_id)
        if row is None:
            raise NotFound(f"no job {job_id!r}")
        return Job.from_row(row)

    def finish_job(self, job_id: str, state: str = "completed") -> Job:
        return Job.from_row(self._commands.finish_job(job_id, state))

    # operations ----------------------------------------------------------

    @staticmethod
    def fingerprint(kind: str, payload: JsonValue = None) -> str:
        """The quarantine fingerprint of a job's kind and payload."""
        return fingerprint_of_text(require_kind(kind), require_payload(payload, sys.maxsize))

    def quarantine(self, fingerprint_value: str, note: str = "") -> None:
        self._commands.quarantine(fingerprint_value, note)

    def release(self, fingerprint_value: str) -> None:
        self._commands.release(fingerprint_value)

    def lease_status(self) -> LeaseStatus | None:
        """Who holds the scheduler duty now, or None when nobody does."""
        lease = self._leases.status(SCHEDULER_LEASE)
        if lease is None or lease.expires_at_ms <= self.clock.now_ms():
            return None
        return LeaseStatus(lease.holder, lease.host, lease.pid, lease.term, lease.expires_at_ms)

    def compact(self) -> CompactionReport:
        """Compact the log now (the lease holder does it once a minute anyway)."""
        return self._store.compact()

    def _poke(self) -> None:
        scheduler = self._scheduler
        if scheduler is not None:
            scheduler.tell(Wake())
