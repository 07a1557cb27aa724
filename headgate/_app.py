"""Headgate: the embedded runtime a host service creates, starts and stops.

    hg = Headgate("sqlite:///headgate.db")
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
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
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import pykka
from typing_extensions import Unpack

from headgate._async_api import is_async_host, on_host
from headgate._clock import Clock, StoreClock
from headgate._commands import require_allowed
from headgate._core import JOB_COUNT_CAP, Core
from headgate._declarations import declare_handlers, declare_schedules
from headgate._deprecated import Deprecated
from headgate._domain.admission import require_name
from headgate._domain.job_rules import unredacted
from headgate._domain.option_keywords import (
    ENQUEUE_KEYWORDS,
    EnqueueArgs,
    JobOptionArgs,
    ScheduleArgs,
    definition_from,
    job_options,
)
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._domain.retry import Retry
from headgate._errors import StoreUnavailable, ValidationError
from headgate._facade.jobs import Jobs
from headgate._facade.limits import Limits
from headgate._facade.metrics import Metrics
from headgate._facade.old_names import OldNames
from headgate._facade.quarantine import Quarantine
from headgate._facade.queues import Queues
from headgate._facade.rates import Rates
from headgate._facade.runtime import Runtime
from headgate._facade.schedules import Schedules
from headgate._forksafe import renew_in_forked_children
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._model import DrainSummary, Job
from headgate._operator import Operator
from headgate._redact import masked
from headgate._routing import UndeclaredKinds
from headgate._runtime.actors import RunPending, SchedulerActor, WakeSignal
from headgate._runtime.config import RuntimeConfig, WorkerConfig
from headgate._runtime.draining import drain
from headgate._runtime.handlers import Executor, Handler, handler_spec, require_executor
from headgate._runtime.hooks import EnqueueHook
from headgate._runtime.runtime_duties import keeper_for
from headgate._runtime.task_calls import TaskCall, TaskSignature, handler_of
from headgate._runtime.tick_batch import TickProcessor
from headgate._runtime.worker_pool import WorkerPool
from headgate._store.opening import open_existing_store, open_store
from headgate._store.port import LeaseHolder, Store
from headgate._tasks import Task, TaskDecorator

__all__ = ["JOB_COUNT_CAP", "Headgate", "open_existing"]

H = TypeVar("H", bound=Handler)
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


def open_existing(url: str, *, read_only: bool, config: RuntimeConfig | None = None) -> Headgate:
    """A Headgate on the store at `url`, which must exist (StoreNotFound): for the
    operator commands. `read_only` creates and migrates nothing."""
    return Headgate(open_existing_store(url, StoreClock(), read_only=read_only), config=config)


class Headgate(OldNames):
    """The runtime a host embeds: what it calls every day is on the object
    (start and stop, handlers, enqueue, drain), the rest grouped by noun in
    its namespaces: `schedules`, `jobs`, `queues`, `limits`, `rates`,
    `quarantine`, `metrics` and `runtime` (each with coroutine twins, `a` before
    the name: `await hg.jobs.aget(job_id)`)."""

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
            store = url
        else:
            store = open_store(url, clock if clock is not None else StoreClock())
        self._core = core = Core(
            store,
            config if config is not None else RuntimeConfig(),
            redact=redact_errors if redact_errors is not None else unredacted,
            undeclared_kinds=undeclared_kinds,
            eager=eager,
        )
        self.clock: Clock = core.clock
        self.config = core.config
        self._hooks = list(hooks)
        self._declared: dict[str, ScheduleDefinition] = {}
        """Schedules declared in code (`periodic`): upserted at start."""
        self._operator = Operator(core)
        self.schedules = Schedules(core)
        """Schedules defined, read, paused, run now; their runs, health and history."""
        self.jobs = Jobs(core)
        """Jobs read, listed, counted, retried and cancelled (one or in bulk)."""
        self.queues = Queues(core)
        """Queues paused, resumed and listed with their depth."""
        self.limits = Limits(core)
        """Concurrency limits over a queue, kind and partition key."""
        self.rates = Rates(core)
        """Rate limits over a rate class."""
        self.quarantine = Quarantine(core)
        """Fingerprints no job is admitted under."""
        self.metrics = Metrics(core)
        """Prometheus's registry and collector, and the per-minute activity."""
        self.runtime = Runtime(core)
        """The fleet on the store: workers, the scheduler lease, readiness, compaction now."""
        renew_in_forked_children(core)

    def __repr__(self) -> str:
        """Names the store (a store given by a test included), its password masked."""
        return f"<Headgate on {masked(repr(self._core.store))}>"

    @property
    def eager(self) -> bool:
        """Each enqueued job runs at once, in the caller (see `headgate.testing.eager`)."""
        return self._core.eager

    @eager.setter
    def eager(self, value: bool) -> None:
        self._core.eager = value

    # lifecycle -----------------------------------------------------------

    def __enter__(self) -> Headgate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """Whether start() started this runtime's actors and no stop() came since."""
        return self._core.scheduler is not None or self._core.pool is not None

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
        with self._core.lifecycle:
            if self.running:
                return self
            self._core.give_back_asked.clear()
            if self._declared:
                declare_schedules(self._core, self._declared)
            if self._core.handlers:
                declare_handlers(self._core)
            if scheduler:
                self._start_scheduler()
            config = self._worker_config(workers)
            if config is not None:
                self._core.pool = WorkerPool(
                    self._core.store,
                    self.clock,
                    self._core.handlers,
                    config,
                    recorder=self._core.metrics,
                    redact=self._core.redact,
                    scheduler_check=self._core.scheduler_state,
                    settled=self._core.alerts.run_settled,
                )
                self._core.pool.start()
            if scheduler or self._core.pool is not None:
                self._core.keeper = keeper_for(
                    self._core.store,
                    self.clock,
                    self.config,
                    self._core.pool,
                    recorder=self._core.metrics,
                )
                self._core.keeper.start()
            _RUNNING.add(self)
        return self

    def _worker_config(self, workers: WorkerConfig | bool | None) -> WorkerConfig | None:
        if workers is False or (workers is None and not self._core.handlers):
            return None
        if isinstance(workers, WorkerConfig):
            if not self._core.handlers:
                raise ValueError("workers: no handlers are registered (use @hg.handler)")
            return workers
        return WorkerConfig()

    def _start_scheduler(self) -> None:
        holder = LeaseHolder(
            holder=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
            host=socket.gethostname(),
            pid=os.getpid(),
        )
        processor = TickProcessor(
            self._core.store.log,
            self.clock,
            self._hooks,
            self.config.limits,
            max_ticks=self.config.max_ticks_per_batch,
            on_enqueued=self._core.tick_jobs_enqueued,
            on_jobs_taken=self._core.tell_workers_jobs_taken,
            recorder=self._core.metrics,
            hook_timeout_ms=self.config.hook_timeout_ms,
        )
        self._core.wake_signal = WakeSignal()  # none waits in the new actor's inbox
        self._core.scheduler = SchedulerActor.start(
            self._core.store, self.clock, self.config, processor, holder
        )
        self._core.processor = processor
        self._core.holder = holder.holder
        log.info("runtime started", holder=holder.holder)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the actors and release the lease; the store stays usable.

        A batch waiting for its instant is abandoned at once (it stays due).
        Raises StoreUnavailable if a write still blocks the actors after
        `timeout` (another process holding SQLite's lock, say); they stop as
        soon as it returns.
        """
        with self._core.lifecycle:
            scheduler, self._core.scheduler = self._core.scheduler, None
            processor, self._core.processor = self._core.processor, None
            pool, self._core.pool = self._core.pool, None
            keeper, self._core.keeper = self._core.keeper, None
            self._core.holder = None
            _RUNNING.discard(self)
            if keeper is not None:
                keeper.stop(timeout)  # a compaction cut short; the maintenance lease released
            if pool is not None:
                self._core.stopping_pool = pool
                if self._core.give_back_asked.is_set():
                    pool.give_back_now()
                try:
                    pool.stop()
                finally:
                    self._core.stopping_pool = None
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
        """Stop, then release the store's connections."""
        core = self._core
        try:
            core.async_pool.close()
            self.stop()
            core.alerts.close()
            core.results.close()
        finally:
            core.store.close()

    def add_hook(self, hook: EnqueueHook) -> None:
        """Hooks apply from the next start()."""
        self._hooks.append(hook)

    def fire_due_ticks(self, timeout: float = 30.0) -> bool:
        """Fire everything due now and wait, for the after-enqueue hooks too (each within
        its budget); False if this process is not the scheduler."""
        scheduler = self._core.scheduler
        if scheduler is None:
            return False
        request = RunPending(threading.Event())
        scheduler.tell(request)
        deadline = time.monotonic() + timeout
        if not request.done.wait(timeout):
            raise TimeoutError(f"due schedules were not all fired within {timeout} s")
        processor = self._core.processor
        if processor is not None:  # and their after-enqueue hooks have run, or given up on
            processor.settle(max(deadline - time.monotonic(), 0))
        return bool(request.fired and request.fired[0])

    run_pending = Deprecated(fire_due_ticks, via=lambda hg: hg, instead="hg.fire_due_ticks")

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
            self._core.handlers.add(spec)
            self._core.task_signatures[spec.kind] = call.signature
            return Task(self._core, spec.kind, function, call)

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
            self._core.handlers.add(handler_spec(kind, function, options, retry, executor))
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
        (`hg.schedules.clear_overrides`). A schedule the code stops declaring is reported
        at the next start (and paused, with `RuntimeConfig.on_undeclared`)."""
        require_name("id", schedule_id)
        job_kind = schedule_id if kind is None else kind
        definition = definition_from(spec=spec, kind=job_kind, **options)
        require_allowed(definition, self._core.settings)
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
        self._core.check_kind(kind, payload)
        return self._core.enqueue_job(kind, payload, job_options_given, periodic_origin, connection)

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
        new_jobs = [self._core.new_job(index, item, chosen) for index, item in enumerate(jobs)]
        return self._core.enqueue_new_jobs(new_jobs, connection)

    async def aenqueue(
        self,
        kind: str,
        payload: JsonValue = None,
        *,
        periodic_origin: object = None,
        connection: object = None,
        **options: Unpack[EnqueueArgs],
    ) -> Job:
        """`enqueue`, awaited; `connection` may be an AsyncConnection or AsyncSession."""
        if is_async_host(connection):
            return await on_host(
                connection,
                lambda sync: self.enqueue(
                    kind, payload, periodic_origin=periodic_origin, connection=sync, **options
                ),
            )
        return await self._core.async_pool.run(
            lambda: self.enqueue(
                kind, payload, periodic_origin=periodic_origin, connection=connection, **options
            )
        )

    async def aenqueue_many(
        self, jobs: Iterable[Mapping[str, object]], *, connection: object = None
    ) -> list[Job]:
        """`enqueue_many`, awaited; `connection` as for `aenqueue`."""
        items = list(jobs)
        if is_async_host(connection):
            return await on_host(connection, lambda sync: self.enqueue_many(items, connection=sync))
        return await self._core.async_pool.run(
            lambda: self.enqueue_many(items, connection=connection)
        )

    def drain(self, timeout: float = 30.0, *, queues: Sequence[str] | None = None) -> DrainSummary:
        """Run every due job of the registered kinds now, in this thread, until none
        is left (or `timeout` seconds pass), and say what ran. For tests and
        scripts: with a FakeClock, advance it past a retry's backoff and drain
        again to run the retry."""
        if not self._core.handlers:
            raise ValueError("drain: no handlers are registered (use @hg.handler)")
        served = (
            list(queues)
            if queues is not None
            else sorted({*self._core.handlers.by_queue(), "default"})
        )
        deadline = time.monotonic() + timeout
        summary = drain(
            self._core.store,
            self.clock,
            self._core.handlers,
            served,
            timeout,
            recorder=self._core.metrics,
            redact=self._core.redact,
            settled=self._core.alerts.run_settled,
        )
        self._core.alerts.settle(max(deadline - time.monotonic(), 0))
        return summary
