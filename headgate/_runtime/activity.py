"""The activity roll-up duty: once a minute the scheduler lease's holder rolls
up the minutes that closed (`headgate._domain.activity`) on a thread of its
own, so the scheduler keeps firing ticks meanwhile.

A duty of the lease, like compaction: only the holder rolls up on its own, and
a minute written twice (by a holder that lost the lease as it wrote, and its
successor) is replaced whole, so it is counted once. A minute closes
`GRACE_MS` after it ends, so the attempts ending at its edge are in the store;
after a gap (no holder for a while) at most `CATCH_UP_MINUTES` are rolled up,
and a store's first roll-up is of the minute that closed last.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final

import pykka

from headgate._domain.activity import (
    KEEP_MS,
    MINUTE_MS,
    Snapshot,
    minute_of,
    roll_up,
)
from headgate._domain.limits import scope_of
from headgate._logs import get_logger
from headgate._model import limit_statuses
from headgate._store.port import Store

log = get_logger("headgate.activity")
GRACE_MS: Final = 2_000
CATCH_UP_MINUTES: Final = 5


def roll_up_closed_minutes(store: Store, now_ms: int) -> list[int]:
    """Roll up every minute closed since the last one rolled up (at most
    CATCH_UP_MINUTES); the minutes rolled up, oldest first."""
    latest = minute_of(now_ms - GRACE_MS) - MINUTE_MS
    earliest = latest - (CATCH_UP_MINUTES - 1) * MINUTE_MS
    last = store.activity.last_minute()
    first = latest if last is None else max(last + MINUTE_MS, earliest)
    minutes = list(range(first, latest + 1, MINUTE_MS))
    for minute in minutes:
        # What stands now is the latest minute's; an older one has no snapshot.
        snapshot = _snapshot(store, now_ms) if minute == latest else Snapshot()
        points = roll_up(minute, store.activity.minute_rows(minute), snapshot)
        store.activity.record(minute, points, now_ms - KEEP_MS)
    return minutes


def _snapshot(store: Store, now_ms: int) -> Snapshot:
    reads = store.reads
    pending = {
        queue: count for (queue, state), count in reads.job_counts().items() if state == "pending"
    }
    oldest = {
        queue: max(now_ms - run_at, 0) / 1000 for queue, run_at in reads.oldest_pending().items()
    }
    limits = [
        (scope_of(status.queue, status.kind, status.partition_key), status.running, status.limit)
        for status in limit_statuses(reads.limits_state(now_ms))
    ]
    return Snapshot(pending, oldest, limits)


@dataclass(frozen=True)
class RollUp:
    now_ms: int


class ActivityRoller(pykka.ThreadingActor):
    """Rolls up closed minutes when the lease holder asks (`RollUp`)."""

    use_daemon_thread = True  # see SchedulerActor

    def __init__(self, store: Store, busy: threading.Event) -> None:
        super().__init__()
        self._store = store
        self._busy = busy

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, RollUp):
            return
        try:
            minutes = roll_up_closed_minutes(self._store, message.now_ms)
            if minutes:
                log.debug("activity rolled up", minutes=len(minutes), last_minute_ms=minutes[-1])
        except Exception:
            log.warning("activity roll-up failed; it runs again next minute", exc_info=True)
        finally:
            self._busy.clear()
