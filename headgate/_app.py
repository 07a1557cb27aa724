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
import dataclasses
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

import pykka
from typing_extensions import Unpack

from headgate._async_api import AsyncOperations, AsyncPool
from headgate._clock import Clock, StoreClock
from headgate._commands import (
    BulkOutcome,
    Commands,
    NewJob,
    Put,
    Settings,
    definitions_of,
    require_allowed,
)
from headgate._domain.activity import KEEP_MS, SHOWN_MS, ActivityPoint
from headgate._domain.admission import (
    MAX_QUEUE_LENGTH,
    kind_problem,
    require_kind,
    require_name,
    require_payload,
)
from headgate._domain.cursors import MAX_PAGE
from headgate._domain.definition_history import parse_instant
from headgate._domain.events import JobState
from headgate._domain.ids import fingerprint_of_text, manual_job_id
from headgate._domain.job_rules import DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT_MS, unredacted
from headgate._domain.lifecycle import BULK_MAX, JobAction
from headgate._domain.limits import concurrency_limit, rate_class_problem, rate_limit
from headgate._domain.names import identifier_problem, require
from headgate._domain.options import (
    CHOSEN_AT_ENQUEUE,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    ENQUEUE_KEYWORDS,
    SCHEDULE_KEYWORDS,
    EnqueueArgs,
    JobOptionArgs,
    JobOptions,
    ScheduleArgs,
    ScheduleDefinition,
    definition_from,
    job_options,
    refuse_unknown,
)
from headgate._domain.retry import Retry
from headgate._domain.schedule_health import AlertKind
from headgate._domain.schedule_load import Ceilings
from headgate._domain.scheduler_watch import SchedulerWatch, grace_ms
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._domain.tick_timing import TickTiming
from headgate._eager import EagerRunner
from headgate._errors import (
    NotFound,
    SchemaBehind,
    SchemaIncomplete,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    ValidationError,
    error_type_of,
)
from headgate._forksafe import renew_in_forked_children
from headgate._history import CHANGES_SHOWN, History, JobAsOf, ScheduleAsOf, ScheduleChanges
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._metrics import Collector, CollectorRegistry, HeadgateMetrics
from headgate._model import (
    QUARANTINE_SAMPLED,
    RUNNING_SHOWN,
    BulkResult,
    ConcurrencyLimitStatus,
    DeclaredHandler,
    DrainSummary,
    EnqueueEvent,
    EnqueueEventsPage,
    Job,
    JobAttempt,
    JobLimits,
    JobsPage,
    LeaseStatus,
    LimitInForce,
    PutScheduleResult,
    PutSchedulesResult,
    QuarantineEntry,
    QuarantinePage,
    QueueStatus,
    RateLimitStatus,
    Readiness,
    RunNowResult,
    Schedule,
    ScheduleHealth,
    SchedulerHealth,
    ScheduleRunsPage,
    SchedulesPage,
    UnservedWork,
    UpcomingRun,
    WorkerStatus,
    limit_status,
    limit_statuses,
    rate_status,
    rate_statuses,
)
from headgate._projections import ConcurrencyLimitRow, PausedQueueRow, RateLimitRow
from headgate._projections.job_attempts import SHOWN_PER_JOB
from headgate._redact import masked
from headgate._results import ResultWatch
from headgate._routing import DeclaredRoutes, UndeclaredKinds, require_undeclared_rule
from headgate._run_reads import RunReads
from headgate._runtime.activity import roll_up_closed_minutes
from headgate._runtime.actors import RunPending, SchedulerActor, WakeSignal
from headgate._runtime.config import SCHEDULER_LEASE, RuntimeConfig, WorkerConfig
from headgate._runtime.handlers import (
    Executor,
    Handler,
    HandlerRegistry,
    handler_spec,
    require_executor,
)
from headgate._runtime.hooks import EnqueueHook
from headgate._runtime.schedule_alerts import ScheduleAlert, ScheduleAlerts
from headgate._runtime.task_calls import TaskCall, TaskSignature, handler_of
from headgate._runtime.tick_batch import TickProcessor
from headgate._runtime.worker_pool import WorkerPool, drain
from headgate._store.opening import open_existing_store, open_store
from headgate._store.port import STATE_COUNT_CAP, Claimant, CompactionReport, JobFilter, Store
from headgate._tasks import Task, TaskDecorator
from headgate._unserved import ServingWatch

H = TypeVar("H", bound=Handler)
DEFAULT_URL = "sqlite:///headgate.db"
STOP_TIMEOUT_S = 30.0
EXIT_STOP_TIMEOUT_S = 5.0
"""At interpreter exit, how long stopping every runtime may wait for blocked writes."""
log = get_logger("headgate")
_NOT_READY_BECAUSE: dict[type[StoreError], str] = {
    StoreClosed: "store_closed",
    SchemaBehind: "schema_behind",
    SchemaTooNew: "schema_too_new",
    SchemaIncomplete: "schema_incomplete",
}
"""Readiness reasons by error; any other store error: `store_unreachable`."""

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


def open_existing(url: str, *, read_only: bool, config: RuntimeConfig | None = None) -> Headgate:
    """A Headgate on the store at `url`, which must exist (StoreNotFound): for the
    operator commands. `read_only` creates and migrates nothing."""
    return Headgate(open_existing_store(url, StoreClock(), read_only=read_only), config=config)


class Headgate(AsyncOperations):
    def __init__(
        self,
        url: str | Store = DEFAULT_URL,
        *,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
        hooks: Sequence[EnqueueHook] = (),
        redact_errors: Callable[[str], str] | None = None,
        eager: bool = False,
        undeclared_kinds: UndeclaredKinds = "warn",
    ) -> None:
        """`url`: `sqlite:///path.db`, `postgresql://...` or `memory://` (a store in
        this process's memory, for tests: nothing of it outlives the process,
        and no other process can open it); or an open store
        (`headgate._store.port.Store`, with its own clock), as tests do to
        inject faults. By default, time is the store's: hosts sharing
        PostgreSQL agree on it.

        `redact_errors`: called with each failed attempt's error text and
        traceback before they are stored or logged, and returns what to keep
        (a traceback holds what a handler's code put in exception messages: a
        payload's field, a token in a URL). Headgate stores them as given
        otherwise; `WorkerConfig(store_error_messages=False)` keeps no texts.

        `eager`: run each job at once in the caller of enqueue, before it returns
        (for tests and scripts: see `headgate.testing.eager`).

        `undeclared_kinds`: what an enqueue by kind (`enqueue("email.send", ...)`)
        does with a kind that no handler declares, here or in the store, while
        the store holds declarations: "warn" (a warning, once per kind, naming the
        closest declared kind), "refuse" (ValidationError) or "allow"."""
        if isinstance(url, Store):
            if clock is not None and clock is not url.clock:
                raise ValueError("clock: a store given to Headgate brings its own clock")
            self._store = url
        else:
            self._store = open_store(url, clock if clock is not None else StoreClock())
        self.clock: Clock = self._store.clock
        self.config = config if config is not None else RuntimeConfig()
        self._redact_errors: Callable[[str], str] = (
            redact_errors if redact_errors is not None else unredacted
        )
        self._reads = self._store.reads
        self._runs = RunReads(self._reads, self.clock, grace_ms(self.config.lease_ttl_ms))
        self._alerts = ScheduleAlerts(self._reads, self.clock)
        self._async = AsyncPool()
        self._serving = ServingWatch(self._store.workers, self.clock)
        self._routes = DeclaredRoutes(self._store.handlers, self.clock)
        self._undeclared: UndeclaredKinds = require_undeclared_rule(undeclared_kinds)
        self._results = ResultWatch(self._store)
        self.eager = eager
        """Each enqueued job runs at once, in the caller (see `_eager`)."""
        self._settings = Settings(
            self.config.limits,
            self.config.min_interval_ms,
            Ceilings(self.config.max_schedules, self.config.max_ticks_per_s),
        )
        self._commands = Commands(self._store, self._settings)
        self._leases = self._store.leases
        self._hooks = list(hooks)
        self._handlers = HandlerRegistry()
        self._task_signatures: dict[str, TaskSignature] = {}
        """The signatures of the handlers registered as tasks, by kind."""
        self._declared: dict[str, ScheduleDefinition] = {}
        """Schedules declared in code (`periodic`): upserted at start."""
        self._scheduler: pykka.ActorRef[SchedulerActor] | None = None
        self._wake_signal = WakeSignal()
        self._processor: TickProcessor | None = None
        self._pool: WorkerPool | None = None
        self._stopping_pool: WorkerPool | None = None
        """The pool whose stop waits for its running handlers, while it does."""
        self._give_back_asked = threading.Event()
        self._lifecycle = threading.RLock()
        """Held by start and stop; re-entrant, as a signal handler that calls close()
        may run on the thread whose close() it interrupted."""
        self._holder: str | None = None
        """This process's scheduler-lease claimant while its scheduler runs."""
        self._metrics = HeadgateMetrics(
            self._reads,
            self._leases,
            self.clock,
            holder=lambda: self._holder,
            unserved=lambda: self._serving.current().unserved(self._reads.pending_work()),
            grace_ms=grace_ms(self.config.lease_ttl_ms),
            schedule_health=self._health_with_series,
        )
        self._eager = EagerRunner(
            self._store,
            self.clock,
            self._handlers,
            recorder=self._metrics,
            redact=self._redact_errors,
            settled=self._alerts.run_settled,
        )
        renew_in_forked_children(self)

    def __repr__(self) -> str:
        """Names the store (a store given by a test included), its password masked."""
        return f"<Headgate on {masked(repr(self._store))}>"

    # lifecycle -----------------------------------------------------------

    def __enter__(self) -> Headgate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._scheduler is not None or self._pool is not None

    def start(
        self, workers: WorkerConfig | bool | None = None, *, scheduler: bool = True
    ) -> Headgate:
        """Start the runtime: the scheduler duty (if this process wins its lease) and
        the workers that run the registered handlers. Returns at once.

        `workers`: a WorkerConfig; None runs workers when handlers are registered
        (on their queues, a small capacity each); False runs none. `scheduler`:
        False runs workers only (`headgate worker`). Schedules declared with
        `periodic` are upserted first (an unchanged spec keeps its phase).
        """
        with self._lifecycle:
            if self.running:
                return self
            self._give_back_asked.clear()
            if self._declared:
                self._declare()
            if self._handlers:
                self._declare_handlers()
            if scheduler:
                self._start_scheduler()
            config = self._worker_config(workers)
            if config is not None:
                self._pool = WorkerPool(
                    self._store,
                    self.clock,
                    self._handlers,
                    config,
                    recorder=self._metrics,
                    redact=self._redact_errors,
                    scheduler_check=self._scheduler_state,
                    settled=self._alerts.run_settled,
                )
                self._pool.start()
            _RUNNING.add(self)
        return self

    def _declare(self) -> None:
        """Upsert the schedules this code declares (keeping operators' overrides),
        then report those of its group it no longer declares."""
        group = self.config.declarations_group
        self._put_all(
            [Put(schedule_id, d, declared_by=group) for schedule_id, d in self._declared.items()]
        )
        pause = self.config.on_undeclared == "pause"
        for schedule_id in self._commands.undeclare(group, self._declared.keys(), pause):
            log.warning(
                "schedule no longer declared in code",
                schedule_id=schedule_id,
                declarations_group=group,
                paused=pause,
            )

    def _declare_handlers(self) -> None:
        """Record this code's handlers in the store, with the defaults each gives a
        job, so that a process without them routes their jobs as they would."""
        group = self.config.declarations_group
        host = f"{socket.gethostname()}:{os.getpid()}"
        for row in self._store.handlers.declare(group, host, self._handlers.declarations()):
            log.info(
                "handler declared",
                kind=row.declaration.kind,
                queue=row.declaration.queue,
                declarations_group=group,
            )

    def declared_handlers(self) -> list[DeclaredHandler]:
        """The handlers every declarations group's code has declared (each records
        its own when a runtime with handlers starts), by kind then group: what
        enqueue routes a kind by where no handler of it is registered."""
        return [DeclaredHandler.from_row(row) for row in self._store.handlers.declared()]

    def _worker_config(self, workers: WorkerConfig | bool | None) -> WorkerConfig | None:
        if workers is False or (workers is None and not self._handlers):
            return None
        if isinstance(workers, WorkerConfig):
            if not self._handlers:
                raise ValueError("workers: no handlers are registered (use @hg.handler)")
            return workers
        return WorkerConfig()

    def _start_scheduler(self) -> None:
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
            on_enqueued=self._tick_jobs_enqueued,
            on_jobs_taken=self._tell_workers_jobs_taken,
            recorder=self._metrics,
            hook_timeout_ms=self.config.hook_timeout_ms,
        )
        self._wake_signal = WakeSignal()  # none waits in the new actor's inbox
        self._scheduler = SchedulerActor.start(
            self._store, self.clock, self.config, processor, claimant
        )
        self._processor = processor
        self._holder = claimant.holder
        log.info("runtime started", holder=claimant.holder)

    def after_fork_in_child(self) -> None:
        """A forked child has none of the parent's actor threads: it is not running
        (start() starts its own actors, which then compete for the lease)."""
        self._scheduler = None
        self._processor = None
        self._pool = None
        self._holder = None
        self._lifecycle = threading.RLock()
        self._metrics.after_fork()
        self._results = ResultWatch(self._store)  # the parent's listener stayed there

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
            pool, self._pool = self._pool, None
            self._holder = None
            _RUNNING.discard(self)
            if pool is not None:
                self._stopping_pool = pool
                if self._give_back_asked.is_set():
                    pool.give_back_now()
                try:
                    pool.stop()
                finally:
                    self._stopping_pool = None
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

    def give_back_running_jobs_now(self) -> None:
        """Cut short a stop that waits for running handlers (what a second Ctrl-C
        does): their jobs are given back at once, unfinished and uncounted, for
        another worker to run. Safe from a signal handler; nothing if no stop
        waits, or until one starts."""
        self._give_back_asked.set()
        pool = self._stopping_pool
        if pool is not None:
            pool.give_back_now()

    def close(self) -> None:
        try:
            self._async.close()
            self.stop()
            self._alerts.close()
            self._results.close()
        finally:
            self._store.close()

    def add_hook(self, hook: EnqueueHook) -> None:
        """Hooks apply from the next start()."""
        self._hooks.append(hook)

    def on_schedule_failure(
        self,
        target: Callable[[ScheduleAlert], object] | str,
        *,
        schedule: str | None = None,
        after_failures: int = 1,
    ) -> None:
        """Call `target` (a callable, or an http(s) URL to POST the alert to as
        JSON) once when `schedule`'s runs (every schedule's, for None) have
        failed `after_failures` times in a row; not again until it has
        recovered. Called in this process, off the job path, when one of its
        workers records the run's end (`_runtime/schedule_alerts.py`)::

            hg.on_schedule_failure(page_oncall, schedule="nightly-report", after_failures=2)
        """
        self._alerts.add(AlertKind.FAILURE, target, schedule, after_failures)

    def on_schedule_recovery(
        self,
        target: Callable[[ScheduleAlert], object] | str,
        *,
        schedule: str | None = None,
        after_failures: int = 1,
    ) -> None:
        """Call `target` once when a run of `schedule` succeeds after at least
        `after_failures` failures in a row (the pair of `on_schedule_failure`)."""
        self._alerts.add(AlertKind.RECOVERY, target, schedule, after_failures)

    def run_pending(self, timeout: float = 30.0) -> bool:
        """Fire everything due now and wait, for the after-enqueue hooks too (each within
        its budget); False if this process is not the scheduler."""
        scheduler = self._scheduler
        if scheduler is None:
            return False
        request = RunPending(threading.Event())
        scheduler.tell(request)
        deadline = time.monotonic() + timeout
        if not request.done.wait(timeout):
            raise TimeoutError(f"due schedules were not all fired within {timeout} s")
        processor = self._processor
        if processor is not None:  # and their after-enqueue hooks have run, or given up on
            processor.settle(max(deadline - time.monotonic(), 0))
        return bool(request.fired and request.fired[0])

    # schedules -----------------------------------------------------------

    def put_schedule(
        self, schedule_id: str, *, spec: str, kind: str, **options: Unpack[ScheduleArgs]
    ) -> Schedule:
        """Create or replace a schedule (an upsert: every field not given takes its
        default, as the API's PUT does; `update_schedule` changes some and keeps
        the rest). Invalid input raises ValidationError and writes nothing.

        `spec` says when it ticks, `kind` (and `payload`) what each tick
        enqueues; `on_missed` and `backfill_limit` what it does with ticks
        missed while nobody fired them; no tick fires before `start_at_ms` or
        after `end_at_ms` (epoch ms); each tick is enqueued a stable delay in
        [0, jitter_ms) after it (at most an hour); `paused` stops its ticks,
        keeping its phase; `queue`, `max_attempts` and `timeout_ms` (or
        `timeout_s`) are its jobs' options (None: the handler's). Each field is
        described in `ScheduleDefinition`. An unchanged spec keeps its phase.
        On a schedule declared in code (`periodic`), what differs from the
        declaration is an override, which survives deploys until cleared
        (`clear_overrides`)."""
        definition = definition_from(spec=spec, kind=kind, **options)
        return self.put_definition(schedule_id, definition).schedule

    def put_definition(self, schedule_id: str, definition: ScheduleDefinition) -> PutScheduleResult:
        """put_schedule with a ScheduleDefinition made beforehand, saying whether it
        created the schedule, updated it or found it so already."""
        require_name("id", schedule_id)
        row, outcome = self._commands.put_schedule(Put(schedule_id, definition))
        self._poke()
        return PutScheduleResult(Schedule.from_row(row), outcome)

    def update_schedule(
        self,
        schedule_id: str,
        *,
        spec: str | None = None,
        kind: str | None = None,
        **changes: Unpack[ScheduleArgs],
    ) -> Schedule:
        """Change some fields of a schedule, keeping the others (PATCH in the API):
        a field left out is unchanged, one given as None is cleared (`end_at_ms=None`).
        NotFound for a schedule that does not exist; only the changed fields are
        checked, so a schedule stored under older rules can still be re-timed."""
        given: dict[str, object] = dict(job_options(changes, SCHEDULE_KEYWORDS))
        if spec is not None:
            given["spec"] = spec
        if kind is not None:
            given["kind"] = kind
        return self.update_schedule_fields(schedule_id, given)

    def update_schedule_fields(self, schedule_id: str, changes: Mapping[str, object]) -> Schedule:
        """update_schedule with the changes as a mapping of flat field names
        (`SCHEDULE_FIELDS`), as the API's PATCH body gives them."""
        row = self._commands.update_schedule(schedule_id, changes)
        self._poke()
        return Schedule.from_row(row)

    def clear_overrides(self, schedule_id: str) -> Schedule:
        """Make a schedule declared in code (`periodic`) what its code declares
        again, dropping every operator change (a pause included); a
        ValidationError for a schedule only operators define."""
        row = self._commands.clear_overrides(schedule_id)
        self._poke()
        return Schedule.from_row(row)

    def put_schedules(self, schedules: Iterable[Mapping[str, object]]) -> PutSchedulesResult:
        """Create or replace many schedules at once: put_schedule for each item, in
        bulk (thousands a second).

        Each item is a mapping of put_schedule's keyword names plus `schedule_id`:
        `{"schedule_id": "t7-nightly", "spec": "0 9 * * *", "kind": "report.build",
        "payload": {"tenant": 7}}`. Every item is validated before anything is
        written: the first bad one raises ValidationError naming it by index and
        field (`schedules[3].spec: ...`), and so does an id given twice. Then
        they are written 500 per transaction, each one all or nothing (so the
        scheduler's ticks never wait for the whole call), with put_schedule's
        rules: an unchanged spec keeps its phase, an identical item writes
        nothing, a changed spec re-anchors after now. A store error partway
        leaves the chunks before it written (a note on the error says how many);
        repeating the call is safe.
        """
        items = [
            {**item, **job_options(item)} if isinstance(item, Mapping) else item
            for item in schedules
        ]
        definitions = definitions_of(items, self._settings)
        return self._put_all([Put(schedule_id, d) for schedule_id, d in definitions])

    def _put_all(self, puts: Sequence[Put]) -> PutSchedulesResult:
        try:
            outcomes = self._commands.put_schedules(puts)
        finally:
            self._poke()  # a chunk may have been written before an error
        return PutSchedulesResult(
            {put.schedule_id: outcome for put, outcome in zip(puts, outcomes, strict=True)}
        )

    def get_schedule(self, schedule_id: str) -> Schedule:
        row = self._reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return Schedule.from_row(row)

    def deleted_schedule(self, schedule_id: str) -> Schedule | None:
        """A deleted schedule as it was last defined (its enqueue history stays
        readable), or None when no schedule of that id was deleted."""
        row = self._reads.schedule(schedule_id)
        return Schedule.from_row(row) if row is not None and row.deleted else None

    def upcoming(self, schedule_id: str, count: int = 5) -> list[UpcomingRun]:
        """The next `count` (1-100) ticks the schedule fires if nothing changes,
        oldest first, from its durable next_run_ms: each with the instant it is
        enqueued at (its jitter included), none past its end; none while it is
        paused or finished. A next_run_ms already past (the scheduler is behind
        or stopped) comes first: the missed-run policy decides what of it fires."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 100:
            raise ValidationError("count", f"must be an integer from 1 to 100, got {count!r}")
        row = self._reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        if row.paused or row.finished:
            return []
        try:
            spec = parse_spec(row.spec)
        except InvalidSpec:  # stored by an earlier version that read it differently
            return []
        timing = TickTiming(row.schedule_id, spec, row.start_at_ms, row.end_at_ms, row.jitter_ms)
        runs = timing.upcoming(row.next_run_ms, row.due_at_ms, count)
        return [UpcomingRun(tick, instant) for tick, instant in runs]

    def list_schedules(
        self,
        limit: int = 200,
        cursor: str | None = None,
        *,
        search: str | None = None,
        health: str | None = None,
    ) -> SchedulesPage:
        """Schedules ordered by id (code point by code point); with `search`, those
        whose id starts with it; with `health` (ok, failing, late, missing or
        paused: see `ScheduleHealth`), those in that state now. Pass next_cursor
        back for the next page."""
        wanted = self._runs.filter(health)
        page = self._reads.schedules_page(limit, cursor, search, wanted)
        return SchedulesPage([Schedule.from_row(row) for row in page.items], page.next_cursor)

    def count_schedules(self, *, search: str | None = None, health: str | None = None) -> int:
        """How many schedules `list_schedules` pages through with this `search` and
        `health`."""
        return self._reads.schedule_count(search, self._runs.filter(health))

    def schedule_runs(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> ScheduleRunsPage:
        """What became of the schedule's runs (its ticks' jobs and its Enqueue
        now's, `manual`), newest first, the newest 100; they outlive the schedule
        (compaction keeps each schedule's newest 100 runs' jobs)."""
        return self._runs.runs(schedule_id, limit, cursor)

    def schedule_health(self, schedule_id: str) -> ScheduleHealth:
        """How the schedule is doing now, from its newest 100 runs: its state (ok,
        failing, late, missing, paused), last success and failure, consecutive
        failures, run durations and its last run. NotFound for no such schedule."""
        return self._runs.health(schedule_id)

    def schedules_health(self, schedules: Sequence[Schedule]) -> dict[str, ScheduleHealth]:
        """The health of each of these schedules (a page of `list_schedules`), by
        id, from one read of their runs."""
        return self._runs.health_of(schedules)

    def _health_with_series(self) -> list[ScheduleHealth]:
        """The schedules with metric series of their own, the first
        `schedule_series_max` by id, judged now, a page at a time."""
        left, cursor = self.config.schedule_series_max, None
        judged: list[ScheduleHealth] = []
        while left > 0:
            page = self.list_schedules(min(left, MAX_PAGE), cursor)
            judged.extend(self.schedules_health(page.schedules).values())
            left -= len(page.schedules)
            cursor = page.next_cursor
            if cursor is None:
                break
        return judged

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop a schedule's ticks, keeping its phase; pausing a paused one is a no-op."""
        return self.update_schedule_fields(schedule_id, {"paused": True})

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Let a paused schedule tick again. The ticks it missed meanwhile follow its
        missed-run policy, as after downtime: skip and run_once enqueue the latest
        due tick, backfill up to its limit. Resuming a running one is a no-op."""
        return self.update_schedule_fields(schedule_id, {"paused": False})

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; its enqueue history stays readable."""
        self._commands.delete_schedule(schedule_id)

    def run_now(self, schedule_id: str, idempotency_key: str) -> RunNowResult:
        """Enqueue now: one extra job; the same key always returns the same job."""
        return self._commands.run_now(schedule_id, idempotency_key)

    def schedule_as_of(self, schedule_id: str, as_of: int | str) -> ScheduleAsOf:
        """The schedule as it stood at `as_of` (epoch ms or ISO-8601), folded from
        its events up to then: its definition, timing, and who made the change in
        force. Says so (`state`) when it did not exist yet or the instant is
        before the oldest event compaction kept; NotFound when the log keeps none."""
        instant = parse_instant("as_of", as_of)
        return History(self._store.log).schedule_as_of(schedule_id, instant)

    def schedule_changes(
        self,
        schedule_id: str,
        *,
        since: int | str | None = None,
        until: int | str | None = None,
        limit: int = CHANGES_SHOWN,
    ) -> ScheduleChanges:
        """The schedule's definition changes after `since` up to `until` (epoch ms
        or ISO-8601; default: from the start, to now), oldest first, each with
        who made it and what differs from the one before (a payload by its keys,
        never its values); the newest `limit` (1-100)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise ValidationError("limit", f"must be an integer from 1 to 100, got {limit!r}")
        since_ms = 0 if since is None else parse_instant("since", since)
        until_ms = self.clock.now_ms() if until is None else parse_instant("until", until)
        return History(self._store.log).schedule_changes(schedule_id, since_ms, until_ms, limit)

    def enqueue_events(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> EnqueueEventsPage:
        """The schedule's automatic enqueue attempts, newest first (the newest 100)."""
        page = self._reads.enqueue_history(schedule_id, limit, cursor)
        return EnqueueEventsPage(
            [EnqueueEvent.from_row(row) for row in page.items], page.next_cursor
        )

    # handlers and jobs ---------------------------------------------------

    def handler(
        self,
        kind: str,
        *,
        retry: Retry | None = None,
        executor: Executor = "thread",
        **defaults: Unpack[JobOptionArgs],
    ) -> Callable[[H], H]:
        """Register the decorated function (sync or async, taking a JobContext) to run
        jobs of `kind`. Its return value (plain JSON) is the job's result; what it
        raises fails the attempt, retried with backoff up to `max_attempts`
        (default 25); an attempt running past `timeout_ms` (or `timeout_s`;
        default 30 min) fails too. `retry` (a `headgate.Retry`) says which
        exceptions are retried and after how long. `queue` (default "default")
        is where its jobs wait unless they say otherwise. These are its jobs'
        defaults: a job's or a schedule's own options win. Register before start().

        `executor="process"` runs a sync handler in a child process: killed at its
        deadline, held to `WorkerConfig.child_memory_limit_mb`, on a core of its
        own. It must be a function at the top level of a module (its child
        imports it by name)."""
        options = JobOptions(**job_options(defaults, ENQUEUE_KEYWORDS))
        return self._register(kind, options, retry, executor)

    def task(
        self,
        kind: str,
        *,
        retry: Retry | None = None,
        executor: Executor = "thread",
        **defaults: Unpack[JobOptionArgs],
    ) -> TaskDecorator:
        """Register the decorated function (sync or async) as the task of `kind`: its
        signature is its jobs' arguments, and what it returns their result
        (values beyond JSON encoded as `headgate._domain.arguments` says). A
        parameter annotated `JobContext` (put it first, where mypy leaves it out
        of `enqueue`'s arguments) is given the job's context when it runs.
        Returns a `Task`: call it as the function, or `.enqueue(...)` a job,
        checked against the signature at the call. `retry`, `executor` and the
        job options are as for `handler`."""
        options = JobOptions(**job_options(defaults, ENQUEUE_KEYWORDS))
        handler_spec(kind, lambda _: None, options, retry)  # bad options fail here, at once
        require_executor(executor)

        def register(function: Callable[..., object]) -> Task[Any, Any, Any]:
            if not callable(function):
                raise ValidationError("handler", f"must be callable, got {type(function).__name__}")
            call = TaskCall(function, TaskSignature.of(function))
            spec = handler_spec(kind, handler_of(call), options, retry, executor, source=function)
            self._handlers.add(spec)
            self._task_signatures[spec.kind] = call.signature
            return Task(self, spec.kind, function, call)

        return TaskDecorator(register)

    def _register(
        self,
        kind: str,
        options: JobOptions,
        retry: Retry | None = None,
        executor: Executor = "thread",
    ) -> Callable[[H], H]:
        handler_spec(kind, lambda _: None, options, retry)  # bad options fail here, at once
        require_executor(executor)

        def register(function: H) -> H:
            self._handlers.add(handler_spec(kind, function, options, retry, executor))
            return function

        return register

    def periodic(
        self,
        schedule_id: str,
        *,
        spec: str,
        kind: str | None = None,
        retry: Retry | None = None,
        executor: Executor = "thread",
        **options: Unpack[ScheduleArgs],
    ) -> Callable[[H], H]:
        """A handler and its schedule, declared together in code: the decorated
        function handles jobs of `kind` (default: the schedule's id), with the
        schedule's job options (`queue`, `max_attempts`, `timeout_ms`, ...) as its
        defaults, `retry` as its retry policy and `executor` where it runs (as
        for `handler`), and start() upserts the
        schedule (an unchanged spec keeps its phase, as put_schedule does; the
        other fields as for put_schedule).

        The code owns the definition; what an operator changes on it (a pause,
        a new spec) is an override that survives restarts until cleared
        (`clear_overrides`). A schedule the code stops declaring is reported
        at the next start (and paused, with `RuntimeConfig.on_undeclared`)."""
        require_name("id", schedule_id)
        job_kind = schedule_id if kind is None else kind
        definition = definition_from(spec=spec, kind=job_kind, **options)
        require_allowed(definition, self._settings)
        job = definition.job
        register = self._register(job_kind, job, retry, executor)

        def declare(function: H) -> H:
            register(function)
            self._declared[schedule_id] = definition
            return function

        return declare

    def enqueue(
        self,
        kind: str,
        payload: JsonValue = None,
        *,
        periodic_origin: object = None,
        connection: object = None,
        **options: Unpack[EnqueueArgs],
    ) -> Job:
        """Enqueue a job of `kind` with its options (`JobOptions`): to run at
        `run_at_ms` (None: now) on `queue` (None: its handler's, else "default"),
        with its own `max_attempts` and `timeout_ms` or `timeout_s` (None: its
        handler's). A `unique_key` held by an unfinished job raises
        DuplicateJob; a quarantined kind and payload, or a full queue,
        AdmissionRejected.

        `periodic_origin` (schedule_id, tick_ms) credits the job to a tick, keeping
        one job per tick: ValidationError unless the schedule exists and the
        scheduler has passed the tick (tick_ms before its next_run_ms: a tick to
        come is the scheduler's to make), TickHasJob (a DuplicateJob naming it) if
        the tick has its job already; otherwise the job takes the tick's own id
        and unique key (and a different `unique_key` is a ValidationError).

        `connection`, a SQLAlchemy Connection or Session in a transaction on the
        store's own database, makes the job part of the host's transaction: it
        exists once the host commits, and never if the host rolls back (see
        "Enqueue in your transaction" in the README for the rules).

        A kind registered here as a task (`task`) has its payload checked against
        the task's signature; another kind is checked against the handlers the
        store knows of (`Headgate(undeclared_kinds=...)`)."""
        job_options_given = JobOptions(**job_options(options, ENQUEUE_KEYWORDS))
        return self.enqueue_job(kind, payload, job_options_given, periodic_origin, connection)

    def _check_kind(self, kind: object, payload: JsonValue) -> None:
        """An enqueue by kind: a task's payload fits its signature; a kind with no
        handler here is one the store's declarations know (by the rule chosen)."""
        if not isinstance(kind, str):
            return
        signature = self._task_signatures.get(kind)
        if signature is not None:
            signature.check_payload(payload)
            return
        if self._handlers.get(kind) is not None:
            return
        if self._undeclared != "allow":
            self._routes.check_declared(kind, refuse=self._undeclared == "refuse")

    def enqueue_job(
        self,
        kind: str,
        payload: JsonValue,
        options: JobOptions,
        periodic_origin: object = None,
        connection: object = None,
        *,
        job_id: str | None = None,
        by_kind: bool = True,
    ) -> Job:
        """enqueue with its options as a JobOptions made beforehand; `job_id`, a
        UUID made beforehand (`_domain.ids.new_job_id`), names the job before it is written (for an
        integration that enqueues at its host's commit, and must say the id first).
        `by_kind` (every surface's enqueue: the API's, the CLI's): the kind and
        payload are checked as enqueue checks them; a task's own call passes False,
        its arguments bound to its signature already."""
        if by_kind:
            self._check_kind(kind, payload)
        options = self._chosen_at_enqueue(kind, options)
        row = self._commands.enqueue(
            kind, payload, options, periodic_origin, within=connection, job_id=job_id
        )
        if connection is None:  # a host's commit wakes the workers itself
            due_now = row.run_at_ms <= self.clock.now_ms()
            pool = self._pool
            if self.eager:
                if due_now:
                    self._eager.run([row.queue], self._handlers.kinds)
                    return self.get_job(row.job_id)
            elif pool is not None:
                if due_now:
                    pool.enqueued_here(row.job_id, row.queue, row.kind)
                else:
                    pool.poke()
        if self._handlers.get(row.kind) is None:
            self._serving.warn_if_unserved(row.queue, row.kind, row.job_id)
        return Job.from_row(row)

    def check_job(self, kind: str, payload: JsonValue, options: JobOptions) -> None:
        """What enqueue_job checks before it writes (the payload, the queue its
        kind goes to), raising its ValidationError, with nothing written: for an
        integration that enqueues later, at its host's commit."""
        self._check_kind(kind, payload)
        self._chosen_at_enqueue(kind, options)
        self._commands.check_payload(payload)

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, object]], *, connection: object = None
    ) -> list[Job]:
        """Enqueue many jobs at once, in bulk: each item a mapping of `kind`,
        `payload` and enqueue's options (`{"kind": "import.row", "payload":
        {"row": 7}, "priority": 5}`). Every item is checked before anything is
        written: the first bad one raises ValidationError naming it by index and
        field (`jobs[3].priority: ...`), and so does a unique key given twice.
        Then they are written 500 per transaction, each all or nothing, through
        the admission gate as enqueue's are: a job it refuses raises enqueue's
        error (DuplicateJob, AdmissionRejected) with a note naming the job, and
        the chunks before stay written (a note says how many). With
        `connection` (as for enqueue) every job joins the host's transaction.
        Returns the jobs, in order."""
        chosen: dict[object, JobOptions] = {}  # items mostly share their kind and options
        new_jobs = [self._new_job(index, item, chosen) for index, item in enumerate(jobs)]
        return self.enqueue_new_jobs(new_jobs, connection)

    def enqueue_new_jobs(self, new_jobs: Sequence[NewJob], connection: object = None) -> list[Job]:
        """enqueue_many of jobs checked beforehand (a task's: `Task.enqueue_many`)."""
        try:
            rows = self._commands.enqueue_many(new_jobs, within=connection)
        finally:
            if connection is None and not self.eager:
                self._poke_workers(due_now=True)
        if connection is None and self.eager:
            self._eager.run(sorted({row.queue for row in rows}), self._handlers.kinds)
            return [self.get_job(row.job_id) for row in rows]
        firsts = {(row.queue, row.kind): row.job_id for row in reversed(rows)}
        for (queue, kind), job_id in firsts.items():
            if self._handlers.get(kind) is None:
                self._serving.warn_if_unserved(queue, kind, job_id)
        return [Job.from_row(row) for row in rows]

    def _new_job(
        self, index: int, item: object, chosen: dict[object, JobOptions], *, check: bool = True
    ) -> NewJob:
        where = f"jobs[{index}]"
        if not isinstance(item, Mapping):
            raise ValidationError(where, f"must be a mapping, got {type(item).__name__}")
        try:
            fields = dict(item)
            if "kind" not in fields:
                raise ValidationError("kind", "is required")
            kind = require_kind(fields.pop("kind"))
            payload = fields.pop("payload", None)
            refuse_unknown(fields, ENQUEUE_KEYWORDS)
            if check:
                self._check_kind(kind, payload)
            try:
                key: object = (kind, frozenset(fields.items()))
                options = chosen.get(key)
            except TypeError:  # a value that cannot be a key: checked below, alone
                key, options = None, None
            if options is None:
                options = self._chosen_at_enqueue(kind, JobOptions(**job_options(fields)))
                if key is not None:
                    chosen[key] = options
        except ValidationError as error:
            raise ValidationError(f"{where}.{error.field}", error.rule) from None
        return NewJob(kind, cast("JsonValue", payload), options)

    def _chosen_at_enqueue(self, kind: object, options: JobOptions) -> JobOptions:
        """Claims read these options from the row, so they are chosen now: the
        handler's if registered here; else those its handler's declaration in
        the store gives (`headgate._domain.routing`: never which workers are
        alive), else Headgate's defaults."""
        if all(getattr(options, name) is not None for name in CHOSEN_AT_ENQUEUE):
            return options
        spec = self._handlers.get(kind) if isinstance(kind, str) else None
        if spec is not None:
            defaults = spec.options
        elif isinstance(kind, str):
            defaults = self._routes.defaults_for(kind, options.queue)
        else:
            defaults = JobOptions.restored(queue=DEFAULT_QUEUE, priority=DEFAULT_PRIORITY)
        chosen = {name: getattr(defaults, name) for name in CHOSEN_AT_ENQUEUE}
        return options.under(JobOptions.restored(**chosen))

    def get_job(self, job_id: str) -> Job:
        """A job, with its newest attempts (newest first) and, if it is due and
        pending, what holds it back (`waiting_for`)."""
        row = self._reads.job(job_id)
        if row is None:
            raise NotFound(f"no job {job_id!r}")
        job = Job.from_row(row, self._reads.job_attempts(job_id, SHOWN_PER_JOB))
        waiting = self.waiting_for(job)
        return dataclasses.replace(job, waiting_for=waiting) if waiting else job

    def job_as_of(self, job_id: str, as_of: int | str) -> JobAsOf:
        """The job as its events left it at `as_of` (epoch ms or ISO-8601): its
        state, attempts and errors then. NotFound when the log keeps none of
        its events (compaction removes a finished job whole)."""
        instant = parse_instant("as_of", as_of)
        return History(self._store.log).job_as_of(job_id, instant)

    def job_limits(self, job: Job) -> JobLimits:
        """The attempt limit and timeout `job` runs under, and where each comes
        from: its own, else its kind's handler's (if registered here), else
        Headgate's default, which a handler registered only in another process
        may override."""
        spec = self._handlers.get(job.kind)
        return JobLimits(
            LimitInForce.of(
                job.max_attempts, spec.max_attempts if spec else None, DEFAULT_MAX_ATTEMPTS
            ),
            LimitInForce.of(job.timeout_ms, spec.timeout_ms if spec else None, DEFAULT_TIMEOUT_MS),
        )

    def list_jobs(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobsPage:
        """Jobs, newest first, filtered; pass next_cursor back for the next page.
        `schedule_id`: the jobs that schedule made, its ticks' and its Enqueue
        now's (`Job.run_now_schedule_id` tells the manual ones). `search`: the
        job with this id, the jobs with this unique key, and, with `schedule_id`,
        the job its Enqueue now made with this idempotency key."""
        where = _job_filter(state, queue, kind, schedule_id, search)
        page = self._reads.jobs_page(where, limit, cursor)
        return JobsPage([Job.from_row(row) for row in page.items], page.next_cursor)

    def count_jobs(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        """Per state, the jobs `list_jobs` with these filters shows, each counted
        up to JOB_COUNT_CAP (a count of JOB_COUNT_CAP means that many or more:
        counting stops there so that a page showing them stays quick)."""
        where = _job_filter(None, queue, kind, schedule_id, search)
        return self._reads.state_counts(where, JOB_COUNT_CAP)

    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttempt]:
        """Each job's newest ended attempt (its duration and error), by job id,
        in one read; jobs that have none are left out."""
        rows = self._reads.latest_attempts(job_ids)
        return {job_id: JobAttempt.from_row(row) for job_id, row in rows.items()}

    def retry_jobs(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        """`retry_job` for the newest `limit` (at most BULK_MAX) jobs `list_jobs`
        shows with these filters; `state` is required and one retry allows. A job
        that changed state since it was read is skipped and counted, not an error."""
        where = _job_filter(state, queue, kind, schedule_id, search)
        outcome = self._commands.bulk_transition(where, JobAction.RETRY, limit)
        if outcome.changed:
            self._poke_workers()
        return _bulk_result("retry", outcome)

    def cancel_jobs(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        """`cancel_job` for the newest `limit` (at most BULK_MAX) pending or running
        jobs `list_jobs` shows with these filters; `state` is required. A job that
        changed state since it was read is skipped and counted, not an error."""
        where = _job_filter(state, queue, kind, schedule_id, search)
        outcome = self._commands.bulk_transition(where, JobAction.CANCEL, limit)
        if outcome.changed:
            self._tell_workers_jobs_taken()
        return _bulk_result("cancel", outcome)

    def manual_runs(self, schedule_id: str, limit: int = 20, cursor: str | None = None) -> JobsPage:
        """The jobs a schedule's Enqueue now made, newest first (also after the
        schedule is deleted), apart from its ticks' jobs."""
        where = JobFilter(run_now_schedule_id=schedule_id)
        page = self._reads.jobs_page(where, limit, cursor)
        return JobsPage([Job.from_row(row) for row in page.items], page.next_cursor)

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a pending or running job; JobStateConflict from any other state. A
        running one's handler is told (`job.cancelled`): at once in this process,
        and in another as soon as it hears of it (on PostgreSQL a notification, on
        SQLite its next look at the file, within about 50 ms)."""
        job = Job.from_row(self._commands.cancel_job(job_id))
        self._tell_workers_jobs_taken()
        return job

    def retry_job(self, job_id: str) -> Job:
        """Run a failed, cancelled or quarantined job again, now, with its attempt and
        crash counts reset; JobStateConflict from any other state."""
        job = Job.from_row(self._commands.retry_job(job_id))
        self._poke_workers()
        return job

    def finish_job(self, job_id: str, state: str = "completed") -> Job:
        """For a host that consumes jobs outside Headgate: mark a pending job finished."""
        return Job.from_row(self._commands.finish_job(job_id, state))

    def workers(self) -> list[WorkerStatus]:
        """The live worker processes sharing this store, each with the jobs it runs
        (of the first RUNNING_SHOWN running jobs)."""
        running: dict[str, list[str]] = {}
        for job in self.list_jobs(state="running", limit=RUNNING_SHOWN).jobs:
            if job.worker_id is not None:
                running.setdefault(job.worker_id, []).append(job.id)
        return [
            WorkerStatus(
                row.worker_id,
                row.host,
                row.pid,
                dict(row.queues),
                row.running,
                row.overdue,
                row.started_at_ms,
                row.heartbeat_at_ms,
                row.expires_at_ms,
                tuple(running.get(row.worker_id, ())),
                row.kinds,
            )
            for row in self._store.workers.live(self.clock.now_ms())
        ]

    def drain(self, timeout: float = 30.0, *, queues: Sequence[str] | None = None) -> DrainSummary:
        """Run every due job of the registered kinds now, in this thread, until none
        is left (or `timeout` seconds pass), and say what ran. For tests and
        scripts: with a FakeClock, advance it past a retry's backoff and drain
        again to run the retry."""
        if not self._handlers:
            raise ValueError("drain: no handlers are registered (use @hg.handler)")
        served = (
            list(queues) if queues is not None else sorted({*self._handlers.by_queue(), "default"})
        )
        deadline = time.monotonic() + timeout
        summary = drain(
            self._store,
            self.clock,
            self._handlers,
            served,
            timeout,
            recorder=self._metrics,
            redact=self._redact_errors,
            settled=self._alerts.run_settled,
        )
        self._alerts.settle(max(deadline - time.monotonic(), 0))
        return summary

    # operations ----------------------------------------------------------

    @staticmethod
    def fingerprint(kind: str, payload: JsonValue = None) -> str:
        """The quarantine fingerprint of a job's kind and payload (any kind a job
        may have, one stored by an earlier build included)."""
        require("kind", kind_problem(kind))
        return fingerprint_of_text(kind, require_payload(payload, sys.maxsize))

    def quarantine(self, fingerprint_value: str, note: str = "") -> None:
        self._commands.quarantine(fingerprint_value, note)

    def release(self, fingerprint_value: str) -> None:
        """Make a quarantined fingerprint admissible again; NotFound if it is not
        quarantined."""
        self._commands.release(fingerprint_value)

    def list_quarantine(self, limit: int = 50, cursor: str | None = None) -> QuarantinePage:
        """Quarantined fingerprints, newest first, each saying why and when, and the
        kind and id of its newest job held in quarantine, if any."""
        page = self._reads.quarantine_page(limit, cursor)
        held = self.list_jobs(state=JobState.QUARANTINED, limit=QUARANTINE_SAMPLED).jobs
        newest: dict[str, Job] = {}
        for job in held:
            newest.setdefault(job.fingerprint, job)
        entries = []
        for row in page.items:
            sample = newest.get(row.fingerprint)
            entry = QuarantineEntry.from_row(row)
            if sample is not None:
                entry = dataclasses.replace(entry, kind=sample.kind, sample_job_id=sample.id)
            entries.append(entry)
        return QuarantinePage(entries, page.next_cursor)

    def quarantine_entry(self, fingerprint_value: str) -> QuarantineEntry | None:
        """Why and since when a fingerprint is quarantined, or None if it is admissible."""
        row = self._reads.quarantine_entry(fingerprint_value)
        return None if row is None else QuarantineEntry.from_row(row)

    def pause_queue(self, queue: str, note: str = "") -> QueueStatus:
        """Stop every process claiming jobs from `queue` until `resume_queue`: its
        running jobs finish, enqueues are still taken, and its jobs wait. Pausing
        a paused queue keeps it paused (with this note)."""
        self._commands.pause_queue(queue, note)
        return self.queue_status(queue)

    def resume_queue(self, queue: str) -> QueueStatus:
        """Let workers claim from `queue` again (every process serving it is woken)."""
        self._commands.resume_queue(queue)
        self._poke_workers(due_now=True)
        return self.queue_status(queue)

    def queues(self) -> list[QueueStatus]:
        """Every queue that has jobs, is paused, or has a handler here, by name."""
        paused = self._reads.paused_queues()
        counts = self._reads.job_counts()
        names = {queue for queue, _ in counts} | set(paused) | set(self._handlers.by_queue())
        return [self._queue_status(name, paused, counts) for name in sorted(names)]

    def queue_status(self, queue: str) -> QueueStatus:
        """One queue's status (a queue nobody used yet: not paused, no jobs)."""
        require("queue", identifier_problem(queue, MAX_QUEUE_LENGTH))
        return self._queue_status(queue, self._reads.paused_queues(), self._reads.job_counts())

    @staticmethod
    def _queue_status(
        name: str, paused: Mapping[str, PausedQueueRow], counts: Mapping[tuple[str, str], int]
    ) -> QueueStatus:
        row = paused.get(name)
        return QueueStatus(
            name,
            row is not None,
            counts.get((name, JobState.PENDING.value), 0),
            counts.get((name, JobState.RUNNING.value), 0),
            None if row is None else row.paused_at_ms,
            "" if row is None else row.note,
        )

    def set_limit(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        partition_key: str | None = None,
        limit: int,
    ) -> ConcurrencyLimitStatus:
        """Hold the jobs of a scope to `limit` running at once across every process
        on the store (Oban's global_limit, River's global concurrency). Each of
        `queue`, `kind` and `partition_key` is None for any; `partition_key="*"`
        (headgate.EACH_PARTITION) gives every partition key its own limit ("at
        most 2 per tenant"). Setting a scope's limit again replaces it; 0 stops
        its jobs from starting. A job held back waits, pending, and spends no
        attempt; a rescued job's slot is free once it is taken back."""
        checked = concurrency_limit(queue, kind, partition_key, limit)
        self._commands.set_limit(checked)
        self._poke_workers(due_now=True)
        state = self._reads.limits_state(self.clock.now_ms())
        set_at_ms = next(
            (row.set_at_ms for row in state.limits if row.scope == checked.scope),
            self.clock.now_ms(),
        )
        row = ConcurrencyLimitRow(
            checked.scope,
            checked.queue,
            checked.kind,
            checked.partition_key,
            checked.limit,
            set_at_ms,
        )
        return limit_status(row, state.running)

    def clear_limit(
        self, *, queue: str | None = None, kind: str | None = None, partition_key: str | None = None
    ) -> bool:
        """Remove the limit on exactly this scope; whether there was one."""
        checked = concurrency_limit(queue, kind, partition_key, 0)
        cleared = self._commands.clear_limit(checked.queue, checked.kind, checked.partition_key)
        self._poke_workers(due_now=True)
        return cleared

    def limits(self) -> list[ConcurrencyLimitStatus]:
        """Every concurrency limit, by scope, with its jobs running now."""
        return limit_statuses(self._reads.limits_state(self.clock.now_ms()))

    def set_rate_limit(self, rate_class: str, *, limit: int, per_ms: int) -> RateLimitStatus:
        """At most `limit` jobs of `rate_class` start in any window of `per_ms`,
        across every process (a sliding window: "30 a minute" is limit=30,
        per_ms=60_000). A job whose class is used up waits, pending, spending no
        attempt. Setting a class again replaces its limit."""
        checked = rate_limit(rate_class, limit, per_ms)
        self._commands.set_rate_limit(checked)
        self._poke_workers(due_now=True)
        state = self._reads.limits_state(self.clock.now_ms())
        set_at_ms = next(
            (row.set_at_ms for row in state.rates if row.rate_class == checked.rate_class),
            self.clock.now_ms(),
        )
        row = RateLimitRow(checked.rate_class, checked.limit, checked.per_ms, set_at_ms)
        return rate_status(row, state.started.get(checked.rate_class, 0))

    def clear_rate_limit(self, rate_class: str) -> bool:
        """Remove a rate class's limit (its jobs start freely); whether it had one."""
        require("rate_class", rate_class_problem(rate_class))
        cleared = self._commands.clear_rate_limit(rate_class)
        self._poke_workers(due_now=True)
        return cleared

    def rate_limits(self) -> list[RateLimitStatus]:
        """Every rate limit, by class, with its starts within the window ending now."""
        return rate_statuses(self._reads.limits_state(self.clock.now_ms()))

    def waiting_for(self, job: Job) -> tuple[str, ...]:
        """Why a due pending job has not started, in words: its queue paused, a
        full concurrency limit, a used-up rate class, no live worker running its
        kind on its queue (unless a handler of its kind is registered in this
        process, which runs it: `drain`, `start`). Empty: nothing holds it back
        but free workers, or it is not pending and due."""
        now = self.clock.now_ms()
        if job.state != JobState.PENDING.value or job.run_at_ms > now:
            return ()
        reasons: list[str] = []
        if job.queue in self._reads.paused_queues():
            reasons.append(f"queue {job.queue} is paused")
        slots = self._reads.limits_state(now).slots()
        reasons += slots.blocking(job.queue, job.kind, job.partition_key, job.rate_class)
        if self._handlers.get(job.kind) is None:  # else this process runs it (drain, start)
            unserved = self._serving.current(fresh=True).reason(job.queue, job.kind)
            if unserved is not None:
                reasons.append(unserved)
        return tuple(reasons)

    def unserved(self) -> list[UnservedWork]:
        """Pending jobs no live worker can run, by (queue, kind): no worker serves
        the queue with a handler of the kind (each waits until one starts)."""
        serving = self._serving.current(fresh=True)
        return [
            UnservedWork(queue, kind, count, serving.reason(queue, kind) or "")
            for (queue, kind), count in serving.unserved(self._reads.pending_work()).items()
        ]

    def activity(self, since_ms: int | None = None) -> list[ActivityPoint]:
        """The per-minute activity roll-up from `since_ms` (None: the last three
        hours), oldest minute first: ticks by outcome, jobs started, succeeded,
        failed, snoozed and expired, tick lateness and pickup percentiles, queue
        depth and oldest pending age, what runs under each limit (see
        `headgate._domain.activity` for the series: a bounded number a minute,
        the deepest queues' and busiest limits' and `_other`). The lease holder
        rolls up each minute once it has closed; a day is kept, so a `since_ms`
        older reads from a day ago."""
        if since_ms is not None and (
            isinstance(since_ms, bool)
            or not isinstance(since_ms, int)
            or not 0 <= since_ms <= MAX_INSTANT_MS
        ):
            raise ValidationError(
                "since_ms", f"must be epoch ms, 0 to {MAX_INSTANT_MS}, got {since_ms!r}"
            )
        now = self.clock.now_ms()
        since = now - SHOWN_MS if since_ms is None else max(since_ms, now - KEEP_MS)
        return self._store.activity.points(since)

    def roll_up_activity(self) -> list[int]:
        """Roll up the minutes closed since the last roll-up now (the lease holder
        does it once a minute anyway): for scripts and tests. The minutes rolled
        up, oldest first."""
        return roll_up_closed_minutes(self._store, self.clock.now_ms())

    def revoke_session(self, session_id: str, expires_at_ms: int) -> None:
        """End a login session (`headgate.web`'s console logout) in every process on
        this store, restarted ones included, until `expires_at_ms`, when it would
        have expired anyway. `session_id`: the session's own id (1 to 64 of
        base64url's characters; else ValueError), not its secret value."""
        self._store.sessions.revoke(session_id, expires_at_ms)

    def session_revoked(self, session_id: str) -> bool:
        """Whether `revoke_session` ended this session (in any process) and it has
        not expired since: read from the store at each call."""
        return self._store.sessions.is_revoked(session_id)

    def lease_status(self) -> LeaseStatus | None:
        """Who holds the scheduler duty now, or None when nobody does."""
        lease = self._leases.status(SCHEDULER_LEASE)
        if lease is None or lease.expires_at_ms <= self.clock.now_ms():
            return None
        return LeaseStatus(lease.holder, lease.host, lease.pid, lease.term, lease.expires_at_ms)

    def _scheduler_state(self) -> tuple[str, str]:
        health = self.scheduler_health()
        return health.state, health.message

    def scheduler_health(self) -> SchedulerHealth:
        """Whether anybody fires the ticks: `no_scheduler` when schedules have been
        due past a takeover's time and no process holds the scheduler lease (a
        fleet of workers and no scheduler), `behind` when one does and they wait
        anyway, else `ok` (`_domain/scheduler_watch.py`). Two reads: the lease,
        and the oldest due schedule on the due index."""
        holder = self.lease_status()
        watch = SchedulerWatch(
            lease_live=holder is not None,
            oldest_due_ms=self._reads.earliest_due_at(),
            now_ms=self.clock.now_ms(),
            grace_ms=grace_ms(self.config.lease_ttl_ms),
        )
        return SchedulerHealth(
            watch.state.value,
            watch.says(),
            holder,
            watch.oldest_due_ms if watch.behind_ms else None,
            watch.behind_ms,
            watch.grace_ms,
        )

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This Headgate's own prometheus_client registry: what `GET /metrics` serves
        (`prometheus_client.generate_latest(hg.metrics_registry)`)."""
        return self._metrics.registry

    @property
    def metrics_collector(self) -> Collector:
        """Headgate's collector, to register in a host's own registry
        (`REGISTRY.register(hg.metrics_collector)`): this process's counters, and
        the store's figures read at each scrape."""
        return self._metrics.collector

    def readiness(self) -> Readiness:
        """Whether this Headgate can serve: reads the store's schema revision and
        each of its tables now, and says why not instead of raising (a probe's
        question: see GET /readyz)."""
        try:
            revision = self._store.schema_revision()
        except StoreError as error:
            reason = _NOT_READY_BECAUSE.get(type(error), "store_unreachable")
            return Readiness(False, reason, masked(str(error)), error_type=error_type_of(error))
        return Readiness(True, schema_revision=revision)

    def compact(self) -> CompactionReport:
        """Compact the log now (the lease holder does it once a minute anyway).

        An operator's action: it needs no lease and runs unfenced, in this
        process or any other, beside the holder's own runs (their transactions are
        serialised, and each deletes only what no stream needs). The holder's
        runs are a duty of its lease and carry its fence."""
        return self._store.compact()

    def _poke(self) -> None:
        # The signal before the actor: a restart in between replaces both, and an
        # old signal sent to the new actor is harmless (the reverse left the new
        # signal marked pending for a dead actor).
        signal = self._wake_signal
        scheduler = self._scheduler
        if scheduler is not None:
            signal.send(scheduler)

    def _poke_workers(self, *, due_now: bool = False) -> None:
        pool = self._pool
        if pool is not None:
            pool.poke(due_now=due_now)

    def _tick_jobs_enqueued(self) -> None:
        self._poke_workers(due_now=True)

    def _tell_workers_jobs_taken(self) -> None:
        pool = self._pool
        if pool is not None:
            pool.check_now()


JOB_COUNT_CAP: Final = STATE_COUNT_CAP
"""`Headgate.count_jobs` counts each state up to this many."""


def _job_filter(
    state: str | None,
    queue: str | None,
    kind: str | None,
    schedule_id: str | None,
    search: str | None,
) -> JobFilter:
    """The jobs list's filters as the store reads them: a state checked, an empty
    search none, and a search within a schedule also its Enqueue now's key."""
    if state is not None and state not in {s.value for s in JobState}:
        states = ", ".join(s.value for s in JobState)
        raise ValidationError("state", f"must be one of {states}, got {state!r}")
    searched = search or None
    search_ids: tuple[str, ...] = ()
    if searched is not None and schedule_id is not None:
        search_ids = (manual_job_id(schedule_id, searched),)
    return JobFilter(
        state=state,
        queue=queue,
        kind=kind,
        made_by_schedule=schedule_id,
        search=searched,
        search_ids=search_ids,
    )


def _bulk_result(action: str, outcome: BulkOutcome) -> BulkResult:
    return BulkResult(action, len(outcome.changed), outcome.skipped, outcome.more, outcome.changed)
