"""Hooks told when a schedule starts failing and when it recovers
(`hg.schedules.on_failure`, `on_recovery`): a Python callable or
a webhook URL, called once per change of state, never per failed attempt.

The process that records a run's end (its worker) asks, off the job path on a
thread of its own, whether that end changed the schedule's state for each
hook (`schedule_health.alert_on_settle`, from the schedule's newest runs), and
calls the hooks it did. A hook's failure, a slow webhook or a full queue never
holds a job or a tick back: what a callable raises is logged, a webhook gets
`WEBHOOK_TIMEOUT_S` and one try. The hooks of a schedule are called in the
processes that registered them, where its runs end: register them wherever
workers run (the module that declares the handlers). A process that dies
between recording the end and calling the hook does not call it (at most
once per change).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Final
from urllib.parse import urlsplit

from headgate._clock import Clock
from headgate._domain.events import JobAttemptFailed, JobSucceeded
from headgate._domain.schedule_health import (
    RECENT_RUNS,
    AlertKind,
    alert_on_settle,
    failures_in_a_row,
)
from headgate._errors import StoreError, ValidationError
from headgate._logs import get_logger
from headgate._runtime.hook_threads import BudgetedCalls, HookQueue
from headgate._runtime.job_units import Claim
from headgate._store.port import Reads

log = get_logger("headgate.alerts")

WEBHOOK_TIMEOUT_S: Final = 5.0
CALL_BUDGET_S: Final = 10.0
"""How long a callable hook may run before it is abandoned (logged)."""
QUEUE_CAPACITY: Final = 1_000


@dataclass(frozen=True)
class ScheduleAlert:
    """What an `hg.schedules.on_failure` or `on_recovery` hook is told (a
    webhook gets it as JSON). It holds no payload and no error message: the job
    page (`job_id`) has those."""

    kind: str
    """"failure" (its runs failed `consecutive_failures` times in a row) or "recovery"."""
    schedule_id: str
    job_id: str
    """The run whose end made the change."""
    consecutive_failures: int
    """Failures in a row up to this run (for a recovery: before it)."""
    error_type: str | None
    """The failed run's error type (a failure only)."""
    at_ms: int


AlertTarget = Callable[[ScheduleAlert], object] | str


@dataclass(frozen=True)
class _Hook:
    kind: AlertKind
    schedule_id: str | None
    """None: every schedule."""
    target: AlertTarget
    after_failures: int


def checked_target(target: object) -> AlertTarget:
    """A callable, or an http(s) URL to POST the alert to."""
    if callable(target):
        return target
    if isinstance(target, str):
        parts = urlsplit(target)
        if parts.scheme in ("http", "https") and parts.hostname:
            return target
    raise ValidationError("target", "must be a callable or an http(s) URL")


def _where(url: str) -> str:
    """A webhook's host, for a log line: its path and query may hold a token."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}"


class ScheduleAlerts:
    def __init__(self, reads: Reads, clock: Clock) -> None:
        self._reads = reads
        self._clock = clock
        self._hooks: list[_Hook] = []
        self._queue: HookQueue[tuple[Claim, str | None]] = HookQueue(
            self._judge, QUEUE_CAPACITY, "headgate-schedule-alerts"
        )
        self._calls = BudgetedCalls("headgate-schedule-alert")

    def add(
        self,
        kind: AlertKind,
        target: object,
        schedule_id: str | None,
        after_failures: int,
    ) -> None:
        if isinstance(after_failures, bool) or not isinstance(after_failures, int):
            raise ValidationError("after_failures", f"must be an integer, got {after_failures!r}")
        if not 1 <= after_failures <= RECENT_RUNS - 1:
            raise ValidationError(
                "after_failures", f"must be between 1 and {RECENT_RUNS - 1}, got {after_failures}"
            )
        self._hooks.append(_Hook(kind, schedule_id, checked_target(target), after_failures))

    def run_settled(self, claimed: Claim, end: object) -> None:
        """An attempt's end (its event) was recorded: if it settled a schedule's run
        that has hooks here (it succeeded, or failed for good; a retry, a snooze
        or a release does not), judge it on the alerts' thread."""
        schedule_id = claimed.schedule_id
        if schedule_id is None or not self._hooks:
            return
        if isinstance(end, JobSucceeded):
            error_type = None
        elif isinstance(end, JobAttemptFailed) and end.retry_at_ms is None:
            error_type = end.error_type
        else:
            return
        if self._for(schedule_id):
            self._queue.submit((claimed, error_type))

    def settle(self, timeout_s: float) -> bool:
        """Wait until every end submitted so far is judged (tests, `drain`)."""
        return self._queue.wait_idle(timeout_s)

    def close(self) -> None:
        self._queue.stop()
        self._calls.close()

    def _for(self, schedule_id: str) -> list[_Hook]:
        return [hook for hook in self._hooks if hook.schedule_id in (None, schedule_id)]

    def _judge(self, item: tuple[Claim, str | None]) -> None:
        claimed, error_type = item
        schedule_id = claimed.schedule_id
        assert schedule_id is not None
        try:
            runs = self._reads.recent_runs([schedule_id], RECENT_RUNS).get(schedule_id, [])
        except StoreError as error:
            log.warning(
                "schedule alerts: the runs could not be read; no hook is called",
                schedule_id=schedule_id,
                job_id=claimed.job_id,
                error=type(error).__name__,
            )
            return
        settled = [(read.run.job_id, read.facts().outcome) for read in runs]
        for hook in self._for(schedule_id):
            kind = alert_on_settle(settled, claimed.job_id, hook.after_failures)
            if kind is not hook.kind:
                continue
            outcomes = [outcome for _, outcome in settled]
            if kind is AlertKind.RECOVERY:  # the failures its success ended
                outcomes = outcomes[outcomes.index("succeeded") + 1 :]
            streak = failures_in_a_row(outcomes)
            alert = ScheduleAlert(
                kind=kind.value,
                schedule_id=schedule_id,
                job_id=claimed.job_id,
                consecutive_failures=streak,
                error_type=error_type if kind is AlertKind.FAILURE else None,
                at_ms=self._clock.now_ms(),
            )
            self._deliver(hook.target, alert)

    def _deliver(self, target: AlertTarget, alert: ScheduleAlert) -> None:
        fields = {"schedule_id": alert.schedule_id, "job_id": alert.job_id, "alert": alert.kind}
        if isinstance(target, str):
            _post(target, alert, fields)
            return
        called = self._calls.call(lambda: target(alert), CALL_BUDGET_S, fields)
        if called.error is not None:
            log.warning(
                "a schedule alert hook raised", error_type=type(called.error).__name__, **fields
            )
        elif not called.finished:
            log.warning(
                "a schedule alert hook did not return within its budget",
                budget_s=CALL_BUDGET_S,
                **fields,
            )
        else:
            log.info("schedule alert hook called", **fields)


def _post(url: str, alert: ScheduleAlert, fields: dict[str, str]) -> None:
    body = json.dumps(asdict(alert)).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
            status = response.status
    except (urllib.error.URLError, OSError, ValueError) as error:
        log.warning(
            "a schedule alert webhook failed",
            to=_where(url),
            error_type=type(error).__name__,
            **fields,
        )
        return
    log.info("schedule alert webhook called", to=_where(url), status=status, **fields)
