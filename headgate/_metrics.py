"""Headgate's metrics, in Prometheus' terms, through prometheus_client.

Two kinds of figures, under one collector (`HeadgateMetrics.collector`):

* what this process did, counted as it happens: the runtime calls the
  `Recorder` interface (`headgate._runtime.recorder`), which this module
  implements with counters and histograms (ticks, tick lateness, pickup
  latency, run duration, attempts, rescues, quarantines);
* what the store holds, read when scraped: the due backlog, the scheduler
  lease, jobs by queue and state, the oldest pending job per queue and the
  quarantined fingerprints, each one aggregate over an index (`Reads`). A
  store that cannot be read leaves them out and says `headgate_store_up 0`:
  the scrape still answers with this process's counters.

Each Headgate owns one of these, with a registry of its own (never
prometheus_client's global one, so several Headgate objects in one process
never collide); a host registers `collector` in its own registry instead.
This is the only module that imports prometheus_client. Label values are
queues, kinds, states, outcomes, reasons and (up to
`RuntimeConfig.schedule_series_max`) schedule ids only, never a job's id, a
payload or an error's text.

The series are bounded whatever clients do (a queue is made by naming it): of
each store family, the SERIES_SHOWN busiest queues, (queue, kind) pairs,
limits and rate classes have series of their own, and the rest are summed
under the label value `_other` (an oldest pending age: the oldest of them); of
this process's figures, the first SERIES_SHOWN (queue, kind) pairs it records,
the later ones under (`_other`, `_other`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics import Counter, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from headgate._clock import Clock
from headgate._domain.events import JobState
from headgate._domain.limits import scope_of
from headgate._domain.schedule_health import HealthState
from headgate._domain.scheduler_watch import MIN_GRACE_MS, SchedulerState, SchedulerWatch
from headgate._domain.shown import OTHER, SERIES_SHOWN, busiest
from headgate._errors import StoreError
from headgate._logs import get_logger
from headgate._model import MAX_PARTITIONS_SHOWN, ScheduleHealth, limit_statuses, rate_statuses
from headgate._runtime.config import SCHEDULER_LEASE
from headgate._runtime.recorder import Recorder
from headgate._store.port import Leases, LimitsState, Reads

__all__ = ["CONTENT_TYPE", "Collector", "CollectorRegistry", "HeadgateMetrics", "exposition"]

log = get_logger("headgate")

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
LATENESS_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
)  # fmt: skip
"""Seconds: a tick on time commits within milliseconds of its instant; a store
outage or a backfill makes it minutes or hours late."""
PICKUP_BUCKETS: Final = LATENESS_BUCKETS
RUN_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
)  # fmt: skip
"""Seconds, up to the default timeout (30 minutes) and beyond."""
_JOB_STATES: Final = tuple(state.value for state in JobState)


class _Figures:
    """This process's counters and histograms (replaced whole after a fork)."""

    def __init__(self) -> None:
        self.ticks = Counter(
            "headgate_ticks",
            "Automatic tick attempts this process's scheduler recorded, by outcome and reason.",
            ("outcome", "reason"),
            registry=None,
        )
        self.lateness = Histogram(
            "headgate_tick_lateness_seconds",
            "How long after its tick an enqueued tick's job was committed.",
            registry=None,
            buckets=LATENESS_BUCKETS,
        )
        self.pickup = Histogram(
            "headgate_job_pickup_latency_seconds",
            "From a job's run_at (when it became due) to its handler's start, per attempt.",
            ("queue", "kind"),
            registry=None,
            buckets=PICKUP_BUCKETS,
        )
        self.run = Histogram(
            "headgate_job_run_duration_seconds",
            "How long handlers ran, per attempt whose end was recorded (releases excluded).",
            ("queue", "kind"),
            registry=None,
            buckets=RUN_BUCKETS,
        )
        self.attempts = Counter(
            "headgate_job_attempts",
            "Attempts this process's workers ended, by outcome: succeeded, failed, "
            "timed_out, released (given back at shutdown), refused (not recorded: the "
            "job was no longer this worker's).",
            ("queue", "kind", "outcome"),
            registry=None,
        )
        self.rescues = Counter(
            "headgate_job_rescues",
            "Jobs this process's rescuer took back from dead workers (quarantined ones included).",
            ("queue", "kind"),
            registry=None,
        )
        self.expired = Counter(
            "headgate_jobs_expired",
            "Jobs this process's workers recorded expired: not started by their start "
            "deadline (start_within_ms), so never run.",
            ("queue", "kind"),
            registry=None,
        )
        self.quarantines = Counter(
            "headgate_job_quarantines",
            "Jobs this process's rescuer quarantined (they crashed their workers too often).",
            ("queue", "kind"),
            registry=None,
        )

    def all(self) -> tuple[Counter | Histogram, ...]:
        return (
            self.ticks,
            self.lateness,
            self.pickup,
            self.run,
            self.attempts,
            self.rescues,
            self.quarantines,
            self.expired,
        )


class HeadgateMetrics(Recorder):
    """The runtime's recorder and the scrape's collector, for one Headgate.

    `holder` says which scheduler-lease holder this process is (None while
    its scheduler is not running), for `headgate_scheduler_lease_held`.
    """

    def __init__(
        self,
        reads: Reads,
        leases: Leases,
        clock: Clock,
        holder: Callable[[], str | None],
        *,
        unserved: Callable[[], Mapping[tuple[str, str], int]] = dict,
        grace_ms: int = MIN_GRACE_MS,
        schedule_health: Callable[[], Iterable[ScheduleHealth]] = tuple,
    ) -> None:
        """`grace_ms`: how long a schedule may be due before the scheduler counts as
        missing (`scheduler_watch.grace_ms`); `schedule_health`: the schedules
        with series of their own, judged now (`RuntimeConfig.schedule_series_max`)."""
        self._grace_ms = grace_ms
        self._schedule_health = schedule_health
        self._reads = reads
        self._unserved = unserved
        self._leases = leases
        self._clock = clock
        self._holder = holder
        self._figures = _Figures()
        self._store_was_up = True
        self._lock = threading.Lock()
        self._labelled: set[tuple[str, str]] = set()
        self.collector: Collector = _Collector(self)
        """Register this in a host's own registry to expose Headgate's metrics there."""
        self.registry = CollectorRegistry()
        """Headgate's own registry, holding `collector` alone (what GET /metrics serves)."""
        self.registry.register(self.collector)

    def after_fork(self) -> None:
        """A forked child counts from zero: what the parent counted is the parent's."""
        self._figures = _Figures()
        self._labelled = set()

    # the Recorder ------------------------------------------------------------

    def _labels(self, queue: str, kind: str) -> tuple[str, str]:
        """(queue, kind) as labelled: the first SERIES_SHOWN pairs as they are,
        later ones as (OTHER, OTHER), so no client makes series without end."""
        pair = (queue, kind)
        with self._lock:
            if pair in self._labelled:
                return pair
            if len(self._labelled) < SERIES_SHOWN:
                self._labelled.add(pair)
                return pair
        return (OTHER, OTHER)

    def tick_recorded(self, outcome: str, reason: str, lateness_ms: int | None) -> None:
        figures = self._figures
        figures.ticks.labels(outcome, reason).inc()
        if lateness_ms is not None:
            figures.lateness.observe(lateness_ms / 1000)

    def handler_started(self, queue: str, kind: str, pickup_ms: int) -> None:
        self._figures.pickup.labels(*self._labels(queue, kind)).observe(pickup_ms / 1000)

    def attempt_ended(self, queue: str, kind: str, outcome: str, duration_ms: int | None) -> None:
        figures = self._figures
        labels = self._labels(queue, kind)
        figures.attempts.labels(*labels, outcome).inc()
        if duration_ms is not None:
            figures.run.labels(*labels).observe(duration_ms / 1000)

    def job_expired(self, queue: str, kind: str) -> None:
        self._figures.expired.labels(*self._labels(queue, kind)).inc()

    def job_rescued(self, queue: str, kind: str, *, quarantined: bool) -> None:
        figures = self._figures
        labels = self._labels(queue, kind)
        figures.rescues.labels(*labels).inc()
        if quarantined:
            figures.quarantines.labels(*labels).inc()

    # the scrape --------------------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        for metric in self._figures.all():
            yield from metric.describe()
        yield from _StoreFamilies().all()

    def collect(self) -> Iterable[Metric]:
        for metric in self._figures.all():
            yield from metric.collect()
        yield from self._store_families()

    def _store_families(self) -> tuple[GaugeMetricFamily, ...]:
        families = _StoreFamilies()
        now = self._clock.now_ms()
        try:
            due = self._reads.due_count(now)
            counts = self._reads.job_counts()
            oldest = self._reads.oldest_pending()
            quarantined = self._reads.quarantined_count()
            undeclared = self._reads.undeclared_count()
            paused = self._reads.paused_queues()
            limits = self._reads.limits_state(now)
            lease = self._leases.status(SCHEDULER_LEASE)
            oldest_due = self._reads.earliest_due_at()
            unserved = self._unserved()
            judged = list(self._schedule_health())
        except StoreError as error:
            with self._lock:
                was_up, self._store_was_up = self._store_was_up, False
            if was_up:
                log.warning(
                    "metrics: the store could not be read; its figures are left out",
                    error=type(error).__name__,
                )
            families.up.add_metric([], 0)
            return (families.up,)
        with self._lock:
            self._store_was_up = True
        families.up.add_metric([], 1)
        families.due.add_metric([], due)
        live = lease is not None and lease.expires_at_ms > now
        held = live and lease is not None and lease.holder == self._holder()
        families.lease_term.add_metric([], lease.term if lease is not None else 0)
        families.lease_active.add_metric([], int(live))
        families.lease_held.add_metric([], int(held))
        watch = SchedulerWatch(live, oldest_due, now, self._grace_ms)
        families.scheduler_behind.add_metric([], watch.behind_ms / 1000)
        families.scheduler_missing.add_metric([], int(watch.state is SchedulerState.NO_SCHEDULER))
        _add_queues(families, counts, oldest, paused, now)
        families.quarantined.add_metric([], quarantined)
        families.undeclared.add_metric([], undeclared)
        _add_limits(families, limits)
        pairs = busiest(sorted(unserved.items()), SERIES_SHOWN, lambda pair: pair[1])
        for (queue, kind), count in pairs.items:
            families.unserved.add_metric([queue, kind], count)
        if pairs.more:
            left_out = sum(unserved.values()) - sum(count for _, count in pairs.items)
            families.unserved.add_metric([OTHER, OTHER], left_out)
        _add_schedules(families, judged)
        return families.all()


def _add_schedules(families: _StoreFamilies, judged: Iterable[ScheduleHealth]) -> None:
    for health in judged:
        labels = [health.schedule_id]
        if health.last_success_ms is not None:
            families.schedule_success.add_metric(labels, health.last_success_ms / 1000)
        families.schedule_failures.add_metric(labels, health.consecutive_failures)
        for state in HealthState:
            families.schedule_health.add_metric(
                [health.schedule_id, state.value], int(state.value == health.state)
            )


def _add_queues(
    families: _StoreFamilies,
    counts: Mapping[tuple[str, str], int],
    oldest: Mapping[str, int],
    paused: Collection[str],
    now: int,
) -> None:
    """The paused queues and the busiest others, SERIES_SHOWN in all; the rest
    summed under OTHER (its age: the oldest of theirs; paused: how many are)."""
    every = sorted({queue for queue, _ in counts} | set(oldest) | set(paused))

    def weight(queue: str) -> float:
        busy = counts.get((queue, "pending"), 0) + counts.get((queue, "running"), 0)
        return (float("inf") if queue in paused else 0.0) + busy

    shown = busiest(every, SERIES_SHOWN, weight)
    for queue in shown.items:
        families.queue_paused.add_metric([queue], int(queue in paused))
        for state in _JOB_STATES:
            families.jobs.add_metric([queue, state], counts.get((queue, state), 0))
        families.oldest_pending.add_metric([queue], _age_s(oldest.get(queue), now))
    if not shown.more:
        return
    rest = set(every) - set(shown.items)
    families.queue_paused.add_metric([OTHER], len(rest & set(paused)))
    for state in _JOB_STATES:
        total = sum(count for (queue, of), count in counts.items() if of == state and queue in rest)
        families.jobs.add_metric([OTHER, state], total)
    ages = [_age_s(oldest[queue], now) for queue in rest if queue in oldest]
    families.oldest_pending.add_metric([OTHER], max(ages, default=0.0))


def _age_s(run_at_ms: int | None, now: int) -> float:
    return 0.0 if run_at_ms is None else max(now - run_at_ms, 0) / 1000


def _add_limits(families: _StoreFamilies, limits: LimitsState) -> None:
    """The SERIES_SHOWN limits and rate classes with most running (started); the
    rest summed under OTHER."""
    statuses = busiest(limit_statuses(limits), SERIES_SHOWN, lambda limit: limit.running)
    for limit in statuses.items:
        scope = scope_of(limit.queue, limit.kind, limit.partition_key)
        families.limit.add_metric([scope], limit.limit)
        families.limit_running.add_metric([scope], limit.running)
        for key, running in limit.running_by_partition:
            families.partition_running.add_metric([scope, key], running)
    if statuses.more:
        rest = limit_statuses(limits)
        shown_total = (sum(x.limit for x in statuses.items), sum(x.running for x in statuses.items))
        families.limit.add_metric([OTHER], sum(x.limit for x in rest) - shown_total[0])
        families.limit_running.add_metric([OTHER], sum(x.running for x in rest) - shown_total[1])
    rates = busiest(rate_statuses(limits), SERIES_SHOWN, lambda rate: rate.started)
    for rate in rates.items:
        families.rate_started.add_metric([rate.rate_class], rate.started)
        families.rate_limit.add_metric([rate.rate_class], rate.limit)
    if rates.more:
        every = rate_statuses(limits)
        started = sum(x.started for x in every) - sum(x.started for x in rates.items)
        families.rate_started.add_metric([OTHER], started)
        families.rate_limit.add_metric(
            [OTHER], sum(x.limit for x in every) - sum(x.limit for x in rates.items)
        )


class _StoreFamilies:
    """The figures read from the store, as metric families (empty until filled)."""

    def __init__(self) -> None:
        self.up = GaugeMetricFamily(
            "headgate_store_up", "1 if the store answered this scrape's reads, else 0."
        )
        self.due = GaugeMetricFamily(
            "headgate_schedules_due",
            "Live, unpaused schedules due now and not yet fired (the scheduler's backlog).",
        )
        self.lease_term = GaugeMetricFamily(
            "headgate_scheduler_lease_term",
            "The scheduler lease's fencing term (it grows at every takeover; 0: never taken).",
        )
        self.lease_active = GaugeMetricFamily(
            "headgate_scheduler_lease_active",
            "1 if some process holds the scheduler lease unexpired, else 0.",
        )
        self.lease_held = GaugeMetricFamily(
            "headgate_scheduler_lease_held",
            "1 if this process holds the scheduler lease (it fires the ticks), else 0.",
        )
        self.jobs = GaugeMetricFamily(
            "headgate_jobs",
            "Jobs in the store by queue and state (finished ones until compaction removes them).",
            labels=("queue", "state"),
        )
        self.oldest_pending = GaugeMetricFamily(
            "headgate_oldest_pending_job_age_seconds",
            "Per queue, how long its longest-waiting due pending job has waited since its "
            "run_at (0: none is due).",
            labels=("queue",),
        )
        self.queue_paused = GaugeMetricFamily(
            "headgate_queue_paused",
            "1 if the queue is paused (no process claims its jobs), else 0.",
            labels=("queue",),
        )
        self.quarantined = GaugeMetricFamily(
            "headgate_quarantined_fingerprints",
            "Job fingerprints (kind and payload) quarantined now, until released.",
        )
        self.undeclared = GaugeMetricFamily(
            "headgate_schedules_undeclared",
            "Live schedules declared in code that their code no longer declares (reported "
            "at a runtime's start; paused too with on_undeclared='pause').",
        )

        self.limit = GaugeMetricFamily(
            "headgate_concurrency_limit",
            "A fleet-wide concurrency limit, by scope (per key under partition=*).",
            labels=("scope",),
        )
        self.limit_running = GaugeMetricFamily(
            "headgate_concurrency_limit_running",
            "Jobs of a concurrency limit's scope running now (under partition=*: every key's).",
            labels=("scope",),
        )
        self.partition_running = GaugeMetricFamily(
            "headgate_partition_running",
            "Under a per-partition limit, jobs running per partition key (its busiest "
            f"{MAX_PARTITIONS_SHOWN} keys).",
            labels=("scope", "partition_key"),
        )
        self.rate_limit = GaugeMetricFamily(
            "headgate_rate_limit",
            "A rate class's limit: at most this many starts in its window.",
            labels=("rate_class",),
        )
        self.unserved = GaugeMetricFamily(
            "headgate_jobs_unserved",
            "Pending jobs of a kind on a queue that no live worker runs (they wait for one).",
            labels=("queue", "kind"),
        )
        self.rate_started = GaugeMetricFamily(
            "headgate_rate_limit_started",
            "A rate class's starts within its window ending now.",
            labels=("rate_class",),
        )

        self.scheduler_behind = GaugeMetricFamily(
            "headgate_scheduler_behind_seconds",
            "How long the schedule due longest has waited to fire (0: none is due).",
        )
        self.schedule_success = GaugeMetricFamily(
            "headgate_schedule_last_success_timestamp_seconds",
            "When the schedule's newest successful run ended (absent: none among its newest "
            "100 runs). One series per schedule, up to RuntimeConfig.schedule_series_max.",
            labels=("schedule",),
        )
        self.schedule_failures = GaugeMetricFamily(
            "headgate_schedule_consecutive_failures",
            "The schedule's settled runs in a row, newest first, that failed.",
            labels=("schedule",),
        )
        self.schedule_health = GaugeMetricFamily(
            "headgate_schedule_health",
            "1 for the schedule's health state now (ok, failing, late, missing, paused).",
            labels=("schedule", "state"),
        )
        self.scheduler_missing = GaugeMetricFamily(
            "headgate_scheduler_missing",
            "1 if schedules have been due past a takeover's time and no process holds the "
            "scheduler lease (nobody fires the ticks), else 0.",
        )

    def all(self) -> tuple[GaugeMetricFamily, ...]:
        return (
            self.unserved,
            self.limit,
            self.limit_running,
            self.partition_running,
            self.rate_limit,
            self.rate_started,
            self.up,
            self.due,
            self.lease_term,
            self.lease_active,
            self.lease_held,
            self.jobs,
            self.oldest_pending,
            self.queue_paused,
            self.quarantined,
            self.undeclared,
            self.scheduler_behind,
            self.scheduler_missing,
            self.schedule_success,
            self.schedule_failures,
            self.schedule_health,
        )


class _Collector:
    """The collector a registry holds: describes without reading the store (a
    registry asks at registration), collects by reading it."""

    def __init__(self, metrics: HeadgateMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return self._metrics.describe()

    def collect(self) -> Iterable[Metric]:
        return self._metrics.collect()


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in Prometheus' text format (`CONTENT_TYPE`)."""
    return generate_latest(registry)
