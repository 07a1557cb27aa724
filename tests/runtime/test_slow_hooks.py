"""Slow hooks, on the real clock: host code that sleeps (an HTTP call, a lock)
must never cost the scheduler its lease nor any other schedule its ticks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from headgate import Headgate, RuntimeConfig
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from tests.runtime.conftest import jobs_for

TTL_MS = 1_500
LATENESS_TARGET_MS = 200


class Recorder(EnqueueHook):
    """Sleeps after enqueueing `slow_id`'s ticks; notes every other commit time."""

    def __init__(self, slow_id: str, after_s: float = 0.0) -> None:
        self.slow_id = slow_id
        self.after_s = after_s
        self.committed: dict[str, list[tuple[int, int | None]]] = {}
        self._lock = threading.Lock()

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        with self._lock:
            self.committed.setdefault(context.schedule_id, []).append(
                (context.tick_ms, result.committed_at_ms)
            )
        if context.schedule_id == self.slow_id:
            time.sleep(self.after_s)


@pytest.fixture
def runtime(store_url: str) -> Iterator[list[Headgate]]:
    made: list[Headgate] = []
    yield made
    for hg in made:
        hg.close()


def test_a_slow_after_hook_costs_neither_the_lease_nor_other_ticks(
    store_url: str, runtime: list[Headgate]
) -> None:
    hook = Recorder("slow", after_s=3.0)
    hg = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=TTL_MS), hooks=[hook])
    runtime.append(hg)
    hg.put_schedule("slow", spec="@every:2000", kind="k")
    hg.put_schedule("fast", spec="@every:1000", kind="k")
    hg.start()
    deadline = time.monotonic() + 5
    while hg.lease_status() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    status = hg.lease_status()
    assert status is not None
    first_term = status.term
    time.sleep(10)
    status = hg.lease_status()
    assert status is not None and status.term == first_term, "the lease was lost and re-taken"
    ticks = jobs_for(hg, "fast")
    assert len(ticks) >= 9
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), "one job per tick, contiguous"
    events = {e.tick_ms: e for e in hg.enqueue_events("fast", limit=100).events}
    assert sorted(events) == ticks and {e.outcome for e in events.values()} == {"enqueued"}
    committed = dict(hook.committed["fast"])
    late = {t: c - t for t, c in committed.items() if c is None or c - t > LATENESS_TARGET_MS}
    assert not late, f"ticks committed late (ms): {late}"
