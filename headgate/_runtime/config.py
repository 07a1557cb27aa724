"""Runtime settings, with defaults a production deployment can start from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from headgate._domain.admission import AdmissionLimits
from headgate._domain.names import identifier_problem
from headgate._domain.schedule_load import MAX_SCHEDULES_LIMIT, MAX_TICKS_PER_S_LIMIT
from headgate._runtime.child_processes import ChildLimits
from headgate._runtime.snooze import DEFAULT_MAX_SNOOZES

SCHEDULER_LEASE: Final = "scheduler"
UNDECLARED_ACTIONS: Final = ("report", "pause")
MAX_MIN_INTERVAL_MS: Final = 60_000
"""A minimum interval guards against runaway specs; it is no rate policy, and a
cron spec's shortest gap is computed exactly only up to a minute."""
MAX_SHUTDOWN_TIMEOUT_S: Final = 86_400.0
"""A day: past it a stop never ends (and a thread's wait overflows the clock)."""


@dataclass(frozen=True)
class RuntimeConfig:
    lease_ttl_ms: int = 1_500
    """How long a holder's claim lasts without renewal; bounds failover time."""
    sweep_batch: int = 1_000
    """Due schedules read per sweep (one transaction); larger backlogs drain over
    successive sweeps."""
    shards: int = 2
    """Schedule actors; the thread count never grows with the number of schedules.

    Planning is Python and the store takes one writer at a time, so more shards
    only add contention for the interpreter lock.
    """
    max_ticks_per_batch: int = 1_000
    """Ticks one schedule actor plans per sweep; the rest wait for the next sweep."""
    prepare_ahead_ms: int = 500
    """How long before an instant its schedules are planned (hooks included) and
    written; the commit itself waits for the instant. 0 fires everything when due."""
    compaction_interval_ms: int = 60_000
    hook_timeout_ms: int = 1_000
    """Each enqueue hook call's time budget. Hooks run on helper threads, never on
    the thread that renews the lease: a `before_enqueue` still running at the
    budget fails that attempt (`failed`/`hook_error`, retried with backoff) and is
    abandoned (what it returns later is ignored); an `after_enqueue` runs off the
    tick path, on a thread of its own, and one over budget is abandoned so the
    next can run. A hook slower than half the budget is logged (`hook slow`).
    Keep `before_enqueue` fast: its time beyond `prepare_ahead_ms` makes the
    ticks written with it (its instant's batch) late."""
    limits: AdmissionLimits = field(default_factory=AdmissionLimits)
    min_interval_ms: int = 1_000
    """The least time a schedule may ask for between two ticks (`@every:1` makes
    a job every millisecond): a definition below it is refused, in code, the API
    and the CLI. 1 to 60000; tests lower it. Schedules stored before keep
    ticking as they are; putting one again is checked."""
    max_schedules: int = 10_000
    """The most live schedules the store may hold: a write that defines
    schedules past it is refused (ValidationError; the API's 422, the CLI's
    exit 2), in code, the API and the CLI. 1 to 10,000,000. Checked against
    the store as each write begins (`headgate._domain.schedule_load`)."""
    max_ticks_per_s: int = 200
    """The most ticks a second all live schedules may make together, each
    counted at its busiest hour (`@every:1000`: 1; `* * * * *`: 1/60; a daily
    cron: 1/3600): a write that defines schedules past it is refused as
    `max_schedules` is. 1 to 1,000,000. 200 is 12,000 jobs a minute."""
    schedule_series_max: int = 1_000
    """How many schedules have metric series of their own
    (`headgate_schedule_last_success_timestamp_seconds{schedule}`,
    `headgate_schedule_consecutive_failures{schedule}` and
    `headgate_schedule_health{schedule,state}`): the first this many by id;
    0 turns the per-schedule series off (for stores of many thousands, where
    each scrape would read every schedule's newest runs). 0 to 100,000."""
    declarations_group: str = "default"
    """The group this host's schedule declarations (`periodic`) belong to. A
    runtime that starts with declarations reports the group's schedules its
    code no longer declares. Services that share a store but declare different
    schedules each need a group of their own."""
    on_undeclared: str = "report"
    """What happens to a schedule whose declaration disappeared from its group's
    code: "report" (a warning, a metric, a console badge; it keeps ticking) or
    "pause" (reported, and paused). It is never deleted."""

    @property
    def renew_every_ms(self) -> int:
        """Renew at a quarter of the TTL: three renewals can fail before the lease lapses."""
        return max(self.lease_ttl_ms // 4, 1)

    @property
    def trust_margin_ms(self) -> int:
        """A holder stops sweeping this long before its lease expires."""
        return max(self.lease_ttl_ms // 5, 1)

    def __post_init__(self) -> None:
        if self.lease_ttl_ms < 100:
            raise ValueError("lease_ttl_ms must be at least 100")
        if not 1 <= self.sweep_batch <= 10_000:
            raise ValueError("sweep_batch must be between 1 and 10000")
        if self.max_ticks_per_batch < 1:
            raise ValueError("max_ticks_per_batch must be at least 1")
        if not 0 <= self.prepare_ahead_ms <= self.lease_ttl_ms // 2:
            raise ValueError("prepare_ahead_ms must be between 0 and half of lease_ttl_ms")
        if not 10 <= self.hook_timeout_ms <= 600_000:
            raise ValueError("hook_timeout_ms must be between 10 and 600000")
        if not 1 <= self.shards <= 64:
            raise ValueError("shards must be between 1 and 64")
        interval = self.min_interval_ms
        if isinstance(interval, bool) or not isinstance(interval, int):
            raise ValueError(f"min_interval_ms must be an integer, got {interval!r}")
        if not 1 <= interval <= MAX_MIN_INTERVAL_MS:
            raise ValueError(f"min_interval_ms must be between 1 and {MAX_MIN_INTERVAL_MS}")
        for name, highest in (
            ("max_schedules", MAX_SCHEDULES_LIMIT),
            ("max_ticks_per_s", MAX_TICKS_PER_S_LIMIT),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if not 1 <= value <= highest:
                raise ValueError(f"{name} must be between 1 and {highest}")
        series = self.schedule_series_max
        if isinstance(series, bool) or not isinstance(series, int):
            raise ValueError(f"schedule_series_max must be an integer, got {series!r}")
        if not 0 <= series <= MAX_SCHEDULE_SERIES:
            raise ValueError(f"schedule_series_max must be between 0 and {MAX_SCHEDULE_SERIES}")
        problem = identifier_problem(self.declarations_group, 128)
        if problem is not None:
            raise ValueError(f"declarations_group {problem}")
        if self.on_undeclared not in UNDECLARED_ACTIONS:
            raise ValueError(
                f"on_undeclared must be one of {', '.join(UNDECLARED_ACTIONS)}, "
                f"got {self.on_undeclared!r}"
            )


MAX_SCHEDULE_SERIES: Final = 100_000
DEFAULT_CAPACITY: Final = 4
"""Concurrent jobs per queue when the host names no capacity."""


@dataclass(frozen=True)
class WorkerConfig:
    """How this process runs jobs (`Headgate.start(workers=...)`).

    `queues` maps each queue to serve to its capacity (jobs at once); None
    serves the queues of the registered handlers, DEFAULT_CAPACITY each.
    """

    queues: Mapping[str, int] | None = None
    heartbeat_ttl_ms: int = 10_000
    """A worker that has not renewed its heartbeat this long is taken for dead and
    its running jobs are rescued (renewed every quarter of it)."""
    rescue_interval_ms: int = 5_000
    """How often dead workers are looked for: those whose heartbeat expired, by one
    process at a time (the maintenance lease, whose TTL is three of these), and
    those of its own machine known dead, by each worker process."""
    poll_interval_ms: int = 1_000
    """How often an idle worker looks for due jobs when nothing woke it: the
    backstop behind the wake-ups (an enqueue here, another process's by
    notification, the next instant a job of its own becomes claimable)."""
    listen: bool = True
    """Be woken by other processes' enqueues (PostgreSQL LISTEN/NOTIFY; on SQLite a
    thread watching the file's data version every 5 ms). False polls only: for
    connection poolers that cannot carry LISTEN (PgBouncer in transaction mode)."""
    shutdown_timeout_s: float = 30.0
    """On stop, how long running handlers may finish before their jobs are given
    back to run elsewhere."""
    crash_limit: int = 3
    """Crashes after which a job, or a fingerprint's blame, is quarantined."""
    store_error_messages: bool = True
    """False keeps exception texts out of the store (the type is kept, and the
    traceback's frames)."""
    log_successes: bool = False
    """Log each attempt that succeeded (or snoozed, or was given back) at INFO;
    by default at DEBUG, so a busy worker writes no line per job. A failed
    attempt is always logged (WARNING, ERROR when its job has failed for good)."""
    max_result_bytes: int = 64 * 1024
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    """Snoozes (`Snooze`) a job may take; the next one fails its attempt."""
    max_jobs_per_child: int | None = None
    """Attempts a child process of `executor="process"` handlers runs before it is
    replaced by a new one (a leaking handler's memory is given back); None: kept."""
    child_memory_limit_mb: int | None = None
    """Each such child's address space (RLIMIT_AS), in MiB: beyond it an allocation
    raises MemoryError in the handler, which fails its attempt. None: no limit."""

    def __post_init__(self) -> None:
        if self.queues is not None:
            for queue, capacity in self.queues.items():
                valid = isinstance(capacity, int) and not isinstance(capacity, bool)
                if not valid or not 1 <= capacity <= 1000:
                    raise ValueError(
                        f"queues[{queue!r}]: capacity must be 1-1000, got {capacity!r}"
                    )
        if self.heartbeat_ttl_ms < 400:
            raise ValueError("heartbeat_ttl_ms must be at least 400")
        if self.rescue_interval_ms < 100:
            raise ValueError("rescue_interval_ms must be at least 100")
        if self.poll_interval_ms < 10:
            raise ValueError("poll_interval_ms must be at least 10")
        if not 0 <= self.shutdown_timeout_s <= MAX_SHUTDOWN_TIMEOUT_S:  # nan fails too
            raise ValueError(
                f"shutdown_timeout_s must be 0-{MAX_SHUTDOWN_TIMEOUT_S:g} seconds, "
                f"got {self.shutdown_timeout_s!r}"
            )
        if isinstance(self.max_snoozes, bool) or not 0 <= self.max_snoozes <= 1_000_000:
            raise ValueError(f"max_snoozes must be 0-1000000, got {self.max_snoozes!r}")
        if self.crash_limit < 2:
            raise ValueError("crash_limit must be at least 2: one crash never quarantines")
        _require_none_or_between("max_jobs_per_child", self.max_jobs_per_child, 1, 10**9)
        _require_none_or_between(
            "child_memory_limit_mb", self.child_memory_limit_mb, MIN_CHILD_MEMORY_MB, 2**30
        )

    @property
    def child_limits(self) -> ChildLimits:
        return ChildLimits(
            self.max_jobs_per_child, self.child_memory_limit_mb, self.max_result_bytes
        )

    @property
    def heartbeat_every_ms(self) -> int:
        return max(self.heartbeat_ttl_ms // 4, 100)


MIN_CHILD_MEMORY_MB: Final = 64
"""Below this a child cannot import Python's standard library and a handler."""


def _require_none_or_between(name: str, value: object, low: int, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be None or {low}-{high}, got {value!r}")
