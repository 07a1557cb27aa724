"""What every face of one Headgate shares: its store and the parts over it, the
handles of its running actors, and the enqueue path.

`Headgate` (the object a host holds), its namespaces (`hg.schedules`,
`hg.jobs`, ...: `headgate/_facade/`), the operator service its own surfaces
share (`_operator`) and its tasks (`_tasks`) each hold the one `Core` the
Headgate made, so none of them reaches into another: a call that writes asks
the core to wake the actors that care (`poke_scheduler`, `poke_workers`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast

import pykka

from headgate._async_api import AsyncPool
from headgate._clock import Clock
from headgate._commands import Commands, NewJob, Settings
from headgate._domain.admission import require_kind
from headgate._domain.cursors import MAX_PAGE
from headgate._domain.events import JobState
from headgate._domain.ids import manual_job_id
from headgate._domain.option_keywords import ENQUEUE_KEYWORDS, job_options
from headgate._domain.options import (
    CHOSEN_AT_ENQUEUE,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    JobOptions,
    refuse_unknown,
)
from headgate._domain.schedule_load import Ceilings
from headgate._domain.scheduler_watch import SchedulerWatch, grace_ms
from headgate._eager import EagerRunner
from headgate._errors import NotFound, ValidationError
from headgate._json import JsonValue
from headgate._metrics import HeadgateMetrics
from headgate._model import Job, LeaseStatus, Schedule, ScheduleHealth, SchedulerHealth
from headgate._projections.job_attempts import SHOWN_PER_JOB
from headgate._results import ResultWatch
from headgate._routing import DeclaredRoutes, UndeclaredKinds, require_undeclared_rule
from headgate._run_reads import RunReads
from headgate._runtime.activity import roll_up_closed_minutes
from headgate._runtime.actors import SchedulerActor, WakeSignal
from headgate._runtime.config import SCHEDULER_LEASE, RuntimeConfig
from headgate._runtime.duties import DutyKeeper
from headgate._runtime.handlers import HandlerRegistry
from headgate._runtime.schedule_alerts import ScheduleAlerts
from headgate._runtime.task_calls import TaskSignature
from headgate._runtime.tick_batch import TickProcessor
from headgate._runtime.worker_pool import WorkerPool
from headgate._store.port import STATE_COUNT_CAP, JobFilter, Store
from headgate._unserved import ServingWatch

JOB_COUNT_CAP: Final = STATE_COUNT_CAP
"""`hg.jobs.count` counts each state up to this many."""


class Core:
    """One Headgate's store, the parts over it and its runtime's handles."""

    def __init__(
        self,
        store: Store,
        config: RuntimeConfig,
        *,
        redact: Callable[[str], str],
        undeclared_kinds: UndeclaredKinds,
        eager: bool,
    ) -> None:
        self.store = store
        self.clock: Clock = store.clock
        self.config = config
        self.redact = redact
        self.reads = store.reads
        self.grace_ms = grace_ms(config.lease_ttl_ms)
        self.runs = RunReads(self.reads, self.clock, self.grace_ms)
        self.alerts = ScheduleAlerts(self.reads, self.clock)
        self.async_pool = AsyncPool()
        self.serving = ServingWatch(store.workers, self.clock)
        self.routes = DeclaredRoutes(store.handlers, self.clock)
        self.undeclared: UndeclaredKinds = require_undeclared_rule(undeclared_kinds)
        self.results = ResultWatch(store)
        self.eager = eager
        """Each enqueued job runs at once, in the caller (see `_eager`)."""
        self.settings = Settings(
            config.limits,
            config.min_interval_ms,
            Ceilings(config.max_schedules, config.max_ticks_per_s),
        )
        self.commands = Commands(store, self.settings)
        self.handlers = HandlerRegistry()
        self.task_signatures: dict[str, TaskSignature] = {}
        """The signatures of the handlers registered as tasks, by kind."""
        self.scheduler: pykka.ActorRef[SchedulerActor] | None = None
        self.wake_signal = WakeSignal()
        self.processor: TickProcessor | None = None
        self.pool: WorkerPool | None = None
        self.keeper: DutyKeeper | None = None
        """Runs the background duties while the runtime runs (`_runtime/duties.py`)."""
        self.stopping_pool: WorkerPool | None = None
        """The pool whose stop waits for its running handlers, while it does."""
        self.give_back_asked = threading.Event()
        self.lifecycle = threading.RLock()
        """Held by start and stop; re-entrant, as a signal handler that calls close()
        may run on the thread whose close() it interrupted."""
        self.holder: str | None = None
        """This process's scheduler-lease holder while its scheduler runs."""
        self.metrics = HeadgateMetrics(
            self.reads,
            store.leases,
            self.clock,
            holder=lambda: self.holder,
            unserved=lambda: self.serving.current().unserved(self.reads.pending_work()),
            grace_ms=self.grace_ms,
            schedule_health=self.health_with_series,
        )
        self.eager_runner = EagerRunner(
            store,
            self.clock,
            self.handlers,
            recorder=self.metrics,
            redact=redact,
            settled=self.alerts.run_settled,
        )

    def after_fork_in_child(self) -> None:
        """A forked child has none of the parent's actor threads: it is not running
        (start() starts its own actors, which then compete for the lease)."""
        self.scheduler = None
        self.processor = None
        self.pool = None
        self.keeper = None
        self.holder = None
        self.lifecycle = threading.RLock()
        self.metrics.after_fork()
        self.results = ResultWatch(self.store)  # the parent's listener stayed there

    # test seams (`headgate.testing`) ------------------------------------

    def finish_job(self, job_id: str, state: str = "completed") -> Job:
        """Mark a pending job finished, as a host consuming jobs outside Headgate would."""
        return Job.from_row(self.commands.finish_job(job_id, state))

    def roll_up_activity(self) -> list[int]:
        """Roll up the minutes closed since the last roll-up now (the lease holder
        does it once a minute anyway). The minutes rolled up, oldest first."""
        return roll_up_closed_minutes(self.store, self.clock.now_ms())

    # waking the actors ---------------------------------------------------

    def poke_scheduler(self) -> None:
        # The signal before the actor: a restart in between replaces both, and an
        # old signal sent to the new actor is harmless (the reverse left the new
        # signal marked pending for a dead actor).
        signal = self.wake_signal
        scheduler = self.scheduler
        if scheduler is not None:
            signal.send(scheduler)

    def poke_workers(self, *, due_now: bool = False) -> None:
        pool = self.pool
        if pool is not None:
            pool.poke(due_now=due_now)

    def tick_jobs_enqueued(self) -> None:
        self.poke_workers(due_now=True)

    def tell_workers_jobs_taken(self) -> None:
        pool = self.pool
        if pool is not None:
            pool.check_now()

    # enqueue -------------------------------------------------------------

    def check_kind(self, kind: object, payload: JsonValue) -> None:
        """An enqueue by kind: a task's payload fits its signature; a kind with no
        handler here is one the store's declarations know (by the rule chosen)."""
        if not isinstance(kind, str):
            return
        signature = self.task_signatures.get(kind)
        if signature is not None:
            signature.check_payload(payload)
            return
        if self.handlers.get(kind) is not None:
            return
        if self.undeclared != "allow":
            self.routes.check_declared(kind, refuse=self.undeclared == "refuse")

    def enqueue_job(
        self,
        kind: str,
        payload: JsonValue,
        options: JobOptions,
        periodic_origin: object = None,
        connection: object = None,
        *,
        job_id: str | None = None,
    ) -> Job:
        """enqueue with its options as a JobOptions made beforehand; `job_id`, a
        UUID made beforehand (`_domain.ids.new_job_id`), names the job before it
        is written (for an integration that enqueues at its host's commit, and
        must say the id first)."""
        options = self.chosen_at_enqueue(kind, options)
        row = self.commands.enqueue(
            kind, payload, options, periodic_origin, within=connection, job_id=job_id
        )
        if connection is None:  # a host's commit wakes the workers itself
            due_now = row.run_at_ms <= self.clock.now_ms()
            pool = self.pool
            if self.eager:
                if due_now:
                    self.eager_runner.run([row.queue], self.handlers.kinds)
                    return self.get_job(row.job_id)
            elif pool is not None:
                if due_now:
                    pool.enqueued_here(row.job_id, row.queue, row.kind)
                else:
                    pool.poke()
        if self.handlers.get(row.kind) is None:
            self.serving.warn_if_unserved(row.queue, row.kind, row.job_id)
        return Job.from_row(row)

    def enqueue_new_jobs(self, new_jobs: Sequence[NewJob], connection: object = None) -> list[Job]:
        """enqueue_many of jobs checked beforehand (a task's: `Task.enqueue_many`)."""
        try:
            rows = self.commands.enqueue_many(new_jobs, within=connection)
        finally:
            if connection is None and not self.eager:
                self.poke_workers(due_now=True)
        if connection is None and self.eager:
            self.eager_runner.run(sorted({row.queue for row in rows}), self.handlers.kinds)
            return [self.get_job(row.job_id) for row in rows]
        firsts = {(row.queue, row.kind): row.job_id for row in reversed(rows)}
        for (queue, kind), job_id in firsts.items():
            if self.handlers.get(kind) is None:
                self.serving.warn_if_unserved(queue, kind, job_id)
        return [Job.from_row(row) for row in rows]

    def new_job(
        self, index: int, item: object, chosen: dict[object, JobOptions], *, check: bool = True
    ) -> NewJob:
        """One item of enqueue_many checked, its options chosen (shared by items
        alike in `chosen`); a ValidationError names it by index and field."""
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
                self.check_kind(kind, payload)
            try:
                key: object = (kind, frozenset(fields.items()))
                options = chosen.get(key)
            except TypeError:  # a value that cannot be a key: checked below, alone
                key, options = None, None
            if options is None:
                options = self.chosen_at_enqueue(kind, JobOptions(**job_options(fields)))
                if key is not None:
                    chosen[key] = options
        except ValidationError as error:
            raise ValidationError(f"{where}.{error.field}", error.rule) from None
        return NewJob(kind, cast("JsonValue", payload), options)

    def chosen_at_enqueue(self, kind: object, options: JobOptions) -> JobOptions:
        """Claims read these options from the row, so they are chosen now: the
        handler's if registered here; else those its handler's declaration in
        the store gives (`headgate._domain.routing`: never which workers are
        alive), else Headgate's defaults."""
        if all(getattr(options, name) is not None for name in CHOSEN_AT_ENQUEUE):
            return options
        spec = self.handlers.get(kind) if isinstance(kind, str) else None
        if spec is not None:
            defaults = spec.options
        elif isinstance(kind, str):
            defaults = self.routes.defaults_for(kind, options.queue)
        else:
            defaults = JobOptions.restored(queue=DEFAULT_QUEUE, priority=DEFAULT_PRIORITY)
        chosen = {name: getattr(defaults, name) for name in CHOSEN_AT_ENQUEUE}
        return options.under(JobOptions.restored(**chosen))

    # reads every face needs ----------------------------------------------

    def get_job(self, job_id: str) -> Job:
        """A job, with its newest attempts (newest first) and, if it is due and
        pending, what holds it back (`waiting_for`)."""
        row = self.reads.job(job_id)
        if row is None:
            raise NotFound(f"no job {job_id!r}")
        job = Job.from_row(row, self.reads.job_attempts(job_id, SHOWN_PER_JOB))
        waiting = self.waiting_for(job)
        return dataclasses.replace(job, waiting_for=waiting) if waiting else job

    def waiting_for(self, job: Job) -> tuple[str, ...]:
        """Why a due pending job has not started, in words (`hg.jobs.waiting_for`)."""
        now = self.clock.now_ms()
        if job.state != JobState.PENDING.value or job.run_at_ms > now:
            return ()
        reasons: list[str] = []
        if job.queue in self.reads.paused_queues():
            reasons.append(f"queue {job.queue} is paused")
        slots = self.reads.limits_state(now).slots()
        reasons += slots.blocking(job.queue, job.kind, job.partition_key, job.rate_class)
        if self.handlers.get(job.kind) is None:  # else this process runs it (drain, start)
            unserved = self.serving.current(fresh=True).reason(job.queue, job.kind)
            if unserved is not None:
                reasons.append(unserved)
        return tuple(reasons)

    def lease_status(self) -> LeaseStatus | None:
        """Who holds the scheduler duty now, or None when nobody does."""
        lease = self.store.leases.status(SCHEDULER_LEASE)
        if lease is None or lease.expires_at_ms <= self.clock.now_ms():
            return None
        return LeaseStatus(lease.holder, lease.host, lease.pid, lease.term, lease.expires_at_ms)

    def scheduler_health(self) -> SchedulerHealth:
        """Whether anybody fires the ticks (`hg.runtime.scheduler_health`)."""
        holder = self.lease_status()
        watch = SchedulerWatch(
            lease_live=holder is not None,
            oldest_due_ms=self.reads.earliest_due_at(),
            now_ms=self.clock.now_ms(),
            grace_ms=self.grace_ms,
        )
        return SchedulerHealth(
            watch.state.value,
            watch.says(),
            holder,
            watch.oldest_due_ms if watch.behind_ms else None,
            watch.behind_ms,
            watch.grace_ms,
        )

    def scheduler_state(self) -> tuple[str, str]:
        health = self.scheduler_health()
        return health.state, health.message

    def health_with_series(self) -> list[ScheduleHealth]:
        """The schedules with metric series of their own, the first
        `schedule_series_max` by id, judged now, a page at a time."""
        left, cursor = self.config.schedule_series_max, None
        judged: list[ScheduleHealth] = []
        while left > 0:
            page = self.reads.schedules_page(min(left, MAX_PAGE), cursor, None, None)
            schedules = [Schedule.from_row(row) for row in page.items]
            judged.extend(self.runs.health_of(schedules).values())
            left -= len(schedules)
            cursor = page.next_cursor
            if cursor is None:
                break
        return judged


def job_filter(
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
