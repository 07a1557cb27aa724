"""The runtime's background duties (`duties.Duty`), each a small object the
keeper runs: compaction, the activity roll-up and the rescue of workers whose
heartbeat expired under the maintenance lease; a worker's rescue of its own
machine's dead and its watch on whether anybody fires the ticks, in every
runtime that runs workers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from headgate._domain.activity import MINUTE_MS, minute_of
from headgate._errors import LeaseLost, StoreError
from headgate._logs import get_logger
from headgate._runtime.activity import GRACE_MS, roll_up_closed_minutes
from headgate._runtime.duties import Duty
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import Fence, Store

log = get_logger("headgate.scheduler")
workers_log = get_logger("headgate.workers")
activity_log = get_logger("headgate.activity")
SCHEDULER_CHECK_EVERY_MS: Final = 15_000
"""How often a worker looks whether anybody fires the ticks."""
SCHEDULER_SAID_EVERY_MS: Final = 600_000
"""How often it repeats that nobody does, while nobody does."""


class Compaction(Duty):
    """The log compacted once per `compaction_interval_ms`, in small transactions
    each carrying the fence: a keeper frozen past its lease writes nothing more
    once it wakes. Its first run is an interval after the lease is first held."""

    name = "compaction"
    fenced = True

    def __init__(self, store: Store, interval_ms: int) -> None:
        self._store = store
        self._interval_ms = interval_ms
        self._cancel = threading.Event()

    @property
    def interval_ms(self) -> int:
        return self._interval_ms

    def run(self, now_ms: int, fence: Fence | None) -> None:
        assert fence is not None
        try:
            report = self._store.compact(cancel=self._cancel, fence=fence)
        except LeaseLost:
            log.warning("lease lost; compaction stopped, nothing more written", term=fence.term)
            raise
        except StoreError:
            log.warning("compaction failed; it runs again at the next interval", exc_info=True)
            return
        log.info(
            "log compacted",
            streams=report.streams_examined,
            events_deleted=report.events_deleted,
            jobs_removed=report.jobs_removed,
        )

    def stop(self) -> None:
        self._cancel.set()


class ActivityRollUp(Duty):
    """The minutes that closed rolled up (`activity.roll_up_closed_minutes`), at
    once when the lease is first held, then a minute and its grace after the
    last minute began. Its writes are not fenced: a minute written twice (by a
    holder that lost the lease as it wrote, and its successor) is replaced
    whole, so it is counted once."""

    name = "activity roll-up"
    fenced = True

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def interval_ms(self) -> int:
        return MINUTE_MS

    def first_due_ms(self, now_ms: int) -> int:
        return now_ms

    def next_due_ms(self, ran_at_ms: int) -> int:
        return minute_of(ran_at_ms) + MINUTE_MS + GRACE_MS

    def run(self, now_ms: int, fence: Fence | None) -> None:
        try:
            minutes = roll_up_closed_minutes(self._store, now_ms)
        except StoreError:
            activity_log.warning(
                "activity roll-up failed; it runs again next minute", exc_info=True
            )
            return
        if minutes:
            activity_log.debug(
                "activity rolled up", minutes=len(minutes), last_minute_ms=minutes[-1]
            )


class _Rescue(Duty):
    """A rescue of dead workers' jobs, every `rescue_interval_ms`."""

    def __init__(self, rescuer: Rescuer, interval_ms: int) -> None:
        self._rescuer = rescuer
        self._interval_ms = interval_ms

    @property
    def interval_ms(self) -> int:
        return self._interval_ms


class ExpiredRescue(_Rescue):
    """The jobs of workers whose heartbeat expired taken back, in one write fenced
    by the term (`Rescuer.rescue_expired`), every `rescue_interval_ms`, and at
    once when the lease is first held."""

    name = "rescue"
    fenced = True

    def first_due_ms(self, now_ms: int) -> int:
        return now_ms

    def run(self, now_ms: int, fence: Fence | None) -> None:
        assert fence is not None
        try:
            self._rescuer.rescue_expired(fence)
        except LeaseLost:
            raise  # the keeper forgets the term
        except StoreError:
            workers_log.warning("rescue failed; it runs again at the next interval", exc_info=True)


class LocalRescue(_Rescue):
    """The jobs of this machine's workers whose process is certainly dead taken
    back, unfenced, by every runtime running workers: once as its workers start,
    before their first claim (`WorkerPool.start`), then every interval."""

    name = "local rescue"
    fenced = False

    def run(self, now_ms: int, fence: Fence | None) -> None:
        self._rescuer.rescue_local()


class SchedulerWatch(Duty):
    """A worker says so when ticks are due and nobody fires them (workers alone
    run no scheduler): at the change, again every SCHEDULER_SAID_EVERY_MS while
    it lasts, and when ticks fire again."""

    name = "scheduler watch"
    fenced = False

    def __init__(self, check: Callable[[], tuple[str, str]], worker_id: str) -> None:
        self._check = check
        self._worker_id = worker_id
        self._state = "ok"
        self._said_ms = 0

    @property
    def interval_ms(self) -> int:
        return SCHEDULER_CHECK_EVERY_MS

    def first_due_ms(self, now_ms: int) -> int:
        return now_ms

    def run(self, now_ms: int, fence: Fence | None) -> None:
        try:
            state, message = self._check()
        except StoreError:
            return
        was, self._state = self._state, state
        if state == "ok":
            if was != "ok":
                workers_log.info("ticks fire again", worker_id=self._worker_id)
            return
        if was != state or now_ms - self._said_ms >= SCHEDULER_SAID_EVERY_MS:
            self._said_ms = now_ms
            workers_log.warning(message, scheduler=state, worker_id=self._worker_id)
