"""Compaction inside a running runtime: it must never hold up ticks or the lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headgate import EnqueueHook, Headgate, RuntimeConfig, TickContext
from headgate._store.port import CompactionReport
from headgate._store.sql.maintenance import rebuild, verify
from headgate.testing import FakeClock
from tests.runtime.conftest import START_MS, FaultyHeadgate, fire, jobs_for

MINUTE = 60_000


def test_ticks_fire_while_a_compaction_runs_and_stop_cuts_it_short(
    make_faulty: Callable[..., FaultyHeadgate], clock: FakeClock
) -> None:
    started = threading.Event()

    def slow_compact(
        _run: Callable[[], CompactionReport], cancel: threading.Event | None
    ) -> CompactionReport:
        started.set()
        assert cancel is not None and cancel.wait(30), "stop() did not cut the run short"
        return CompactionReport(0, 0, 0)

    hg, faults = make_faulty(RuntimeConfig(lease_ttl_ms=10 * MINUTE, compaction_interval_ms=MINUTE))
    faults.around_compaction = slow_compact
    hg.schedules.put("s", spec="@every:60000", kind="k")
    fire(hg)
    clock.advance(MINUTE)
    fire(hg)  # a compaction is due: it starts, and the tick fires
    assert started.wait(10)
    for _ in range(3):
        clock.advance(MINUTE)
        fire(hg)  # the compaction is still running
    assert jobs_for(hg, "s") == [START_MS + n * MINUTE for n in range(1, 5)]
    began = time.monotonic()
    hg.stop()
    assert time.monotonic() - began < 10


class _Switchable(EnqueueHook):
    def __init__(self) -> None:
        self.failing = False

    def before_enqueue(self, context: TickContext) -> None:
        if self.failing:
            raise RuntimeError("the host's hook is down")


def test_a_failure_streak_longer_than_the_kept_history_still_rebuilds_where_the_schedule_stands(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Compaction keeps a schedule's newest 100 attempts. After more failures than
    that, the record of its last settled tick is gone; every failed attempt
    restates next_run_ms and last_enqueued_ms, so a rebuild still agrees."""
    hook = _Switchable()
    quiet = RuntimeConfig(lease_ttl_ms=10_000 * MINUTE, compaction_interval_ms=10_000 * MINUTE)
    hg = make_headgate(quiet, hooks=[hook])
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    fire(hg)
    hook.failing = True
    for _ in range(110):
        schedule = hg.schedules.get("s")
        clock.set(max(schedule.next_run_ms, schedule.retry_at_ms or 0))
        fire(hg)
    hg.stop()
    assert len(hg.schedules.enqueue_events("s", limit=100).events) == 100
    report = hg.runtime.compact()
    assert report.events_deleted > 0
    rebuild(hg._core.store)
    assert verify(hg._core.store).ok
    schedule = hg.schedules.get("s")
    assert (schedule.next_run_ms, schedule.last_enqueued_ms) == (
        START_MS + 2 * MINUTE,
        START_MS + MINUTE,
    )
    assert schedule.retry_at_ms is not None
    assert jobs_for(hg, "s") == [START_MS + MINUTE]
