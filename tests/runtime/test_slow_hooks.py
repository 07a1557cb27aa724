"""Slow hooks, on the real clock: host code that sleeps (an HTTP call, a lock)
must never cost the scheduler its lease nor any other schedule its ticks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from structlog.testing import capture_logs

from headgate import Headgate, RuntimeConfig
from headgate._runtime.config import SCHEDULER_LEASE
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from headgate.testing import FakeClock
from tests.runtime.conftest import jobs_for

pytestmark = pytest.mark.slow

TTL_MS = 1_500
LATENESS_TARGET_MS = 400
"""The most a tick of another schedule may commit late beside a slow or hung hook:
well under the hooks' own 0.6 s and 3 s, so a tick held up by them fails, and
loose enough for a loaded two-core machine (the scheduler's lateness figures
are benchmarks/scheduler.py's)."""
CONFIG_RENEW_MS = RuntimeConfig(lease_ttl_ms=TTL_MS).renew_every_ms


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
    hg.schedules.put("slow", spec="@every:2000", kind="k")
    hg.schedules.put("fast", spec="@every:1000", kind="k")
    hg.start()
    deadline = time.monotonic() + 5
    while hg.runtime.lease() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    status = hg.runtime.lease()
    assert status is not None
    first_term = status.term
    time.sleep(10)
    status = hg.runtime.lease()
    assert status is not None and status.term == first_term, "the lease was lost and re-taken"
    ticks = jobs_for(hg, "fast")
    assert len(ticks) >= 9
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), "one job per tick, contiguous"
    events = {  # read after the jobs: a tick may have come since
        e.tick_ms: e
        for e in hg.schedules.enqueue_events("fast", limit=100).events
        if e.tick_ms <= ticks[-1]
    }
    assert sorted(events) == ticks and {e.outcome for e in events.values()} == {"enqueued"}
    committed = dict(hook.committed["fast"])
    # A tick the 3 s hook held up would be at least a second late.
    late = {t: c - t for t, c in committed.items() if c is None or c - t > 900}
    assert not late, f"ticks committed late (ms): {late}"


def _start(hg: Headgate) -> int:
    """Start and wait for the lease; its term."""
    hg.start()
    deadline = time.monotonic() + 5
    while (status := hg.runtime.lease()) is None:
        assert time.monotonic() < deadline, "no scheduler lease"
        time.sleep(0.02)
    return status.term


def _assert_on_time(
    hg: Headgate,
    hook: Recorder,
    schedule_id: str,
    at_least: int,
    late_ms: int = LATENESS_TARGET_MS,
) -> None:
    ticks = jobs_for(hg, schedule_id)
    assert len(ticks) >= at_least
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), "one job per tick, contiguous"
    deadline = time.monotonic() + 3  # after-hooks run on their own thread, a little later
    while not set(ticks) <= {t for t, _ in hook.committed[schedule_id]}:
        assert time.monotonic() < deadline, "the after-hooks were not all told"
        time.sleep(0.02)
    committed = dict(hook.committed[schedule_id])
    late = {t: committed.get(t) for t in ticks}
    late = {t: c - t if c else c for t, c in late.items() if c is None or c - t > late_ms}
    assert not late, f"ticks committed late (ms) or never told: {late}"


class HangingBefore(Recorder):
    """Hangs in before_enqueue for `bad`'s first `hangs` attempts, for `hang_s` each
    (past the budget, but back before the retry: a call still hung would have
    the retry refused without calling the hook)."""

    def __init__(self, hangs: int, hang_s: float = 30.0) -> None:
        super().__init__(slow_id="")
        self.hangs = hangs
        self.hang_s = hang_s
        self.release = threading.Event()
        self.attempts: list[int] = []

    def before_enqueue(self, context: TickContext) -> None:
        if context.schedule_id == "bad":
            self.attempts.append(context.attempt)
            if len(self.attempts) <= self.hangs:
                self.release.wait(self.hang_s)


def test_a_before_hook_over_budget_fails_its_attempt_which_is_retried_while_others_fire(
    store_url: str, runtime: list[Headgate]
) -> None:
    hook = HangingBefore(hangs=2, hang_s=0.6)
    config = RuntimeConfig(lease_ttl_ms=TTL_MS, hook_timeout_ms=200)
    hg = Headgate(store_url, config=config, hooks=[hook])
    runtime.append(hg)
    # Backfill retries the very tick that failed (skip would retry the latest due).
    hg.schedules.put("bad", spec="@every:1000", kind="k", on_missed="backfill", backfill_max=10)
    hg.schedules.put("fast", spec="@every:1000", kind="k")
    try:
        term = _start(hg)
        deadline = time.monotonic() + 12
        while not jobs_for(hg, "bad") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)
    finally:
        hook.release.set()
    status = hg.runtime.lease()
    assert status is not None and status.term == term
    events = sorted(hg.schedules.enqueue_events("bad", limit=100).events, key=lambda e: e.event_id)
    failed = [e for e in events if e.outcome == "failed"]
    assert [(e.reason, e.tick_ms) for e in failed] == [("hook_error", events[0].tick_ms)] * 2
    assert hook.attempts[:3] == [1, 2, 3], "the tick is retried, attempt by attempt"
    retried_after = failed[1].recorded_at_ms - failed[0].recorded_at_ms
    assert retried_after >= 1000 - 50, "the retry waits for its backoff (1 s)"
    assert events[2].outcome == "enqueued" and events[2].tick_ms == events[0].tick_ms
    bad = jobs_for(hg, "bad")
    assert bad == list(range(bad[0], bad[-1] + 1000, 1000)), "the missed ticks backfilled"
    # A tick at the instant of `bad`'s hung attempt waits for its budget (200 ms)
    # at most, then commits: the bound leaves a loaded machine 350 ms over that,
    # and stays under the hang (600 ms), which a tick that waited it out exceeds.
    _assert_on_time(hg, hook, "fast", at_least=4, late_ms=550)


class Misbehaving(Recorder):
    """After-hooks that raise (for `raises`) and hang (for `hangs`, until released)."""

    def __init__(self) -> None:
        super().__init__(slow_id="")
        self.release = threading.Event()

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        super().after_enqueue(context, result)
        if context.schedule_id == "raises":
            raise RuntimeError("after-hook broke")
        if context.schedule_id == "hangs":
            self.release.wait(30)


def test_after_hooks_that_raise_or_hang_never_stop_later_ticks(
    store_url: str, runtime: list[Headgate]
) -> None:
    hook = Misbehaving()
    # A short budget: the hung call is abandoned well before the next tick's after-hooks.
    config = RuntimeConfig(lease_ttl_ms=TTL_MS, hook_timeout_ms=200)
    hg = Headgate(store_url, config=config, hooks=[hook])
    runtime.append(hg)
    for schedule_id in ("raises", "hangs", "fast"):
        hg.schedules.put(schedule_id, spec="@every:1000", kind="k")
    try:
        term = _start(hg)
        time.sleep(6)
        status = hg.runtime.lease()
        assert status is not None and status.term == term
        for schedule_id in ("raises", "hangs"):
            ticks = jobs_for(hg, schedule_id)
            assert len(ticks) >= 5 and ticks == list(range(ticks[0], ticks[-1] + 1000, 1000))
        # A tick the forever-hung hook held up would be a whole interval late, or never told.
        _assert_on_time(hg, hook, "fast", at_least=5, late_ms=900)
    finally:
        hook.release.set()


def test_stop_returns_promptly_with_hooks_still_hung(
    store_url: str, runtime: list[Headgate]
) -> None:
    release = threading.Event()
    entered = threading.Event()

    class Hung(EnqueueHook):
        def before_enqueue(self, context: TickContext) -> None:
            entered.set()
            release.wait(30)

        def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
            release.wait(30)

    config = RuntimeConfig(lease_ttl_ms=TTL_MS, hook_timeout_ms=5_000)
    hg = Headgate(store_url, config=config, hooks=[Hung()])
    runtime.append(hg)
    hg.schedules.put("s", spec="@every:1000", kind="k")
    try:
        _start(hg)
        assert entered.wait(5)
        began = time.monotonic()
        hg.stop()
        assert time.monotonic() - began < 1.5, "stop waited for a hung hook"
        assert hg.runtime.lease() is None, "the lease was released"
    finally:
        release.set()


def test_a_lapsed_lease_retaken_under_a_new_term_says_so(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=TTL_MS))
    hg.start()
    assert hg.fire_due_ticks()
    with capture_logs() as logs:
        clock.advance(4 * TTL_MS)  # no renewal in all that time: the lease lapsed
        deadline = time.monotonic() + 5
        while (status := hg.runtime.lease()) is None or status.term == 1:
            assert time.monotonic() < deadline, "the lease was not taken again"
            time.sleep(0.01)
    (line,) = [entry for entry in logs if entry["event"].startswith("lease acquired again")]
    assert line["log_level"] == "warning"
    assert (line["old_term"], line["new_term"]) == (1, 2)
    assert line["late_ms"] == 4 * TTL_MS - CONFIG_RENEW_MS


def test_a_renewal_too_late_to_trust_is_logged(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """A renewal that returns within the trust margin of its expiry (a slow store)
    stops the ticks under it, and says so."""
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=TTL_MS))
    leases = hg._core.store.leases
    slow = threading.Event()

    class SlowLeases:
        def __getattr__(self, name: str) -> object:
            return getattr(leases, name)

        def acquire(self, *args: object) -> object:
            lease = leases.acquire(*args)  # type: ignore[arg-type]
            if args[0] == SCHEDULER_LEASE and slow.is_set():
                slow.clear()
                clock.advance(TTL_MS - 100)  # the answer took nearly the whole TTL
            return lease

    hg._core.store.leases = SlowLeases()  # type: ignore[assignment]
    hg.start()
    assert hg.fire_due_ticks()
    with capture_logs() as logs:
        slow.set()
        clock.advance(CONFIG_RENEW_MS)  # a renewal is due: it comes back too late
        deadline = time.monotonic() + 5
        while not (late := [e for e in logs if e["event"].startswith("lease renewal came")]):
            assert time.monotonic() < deadline, "the late renewal was not logged"
            time.sleep(0.01)
    assert late[0]["log_level"] == "warning"
    assert (late[0]["term"], late[0]["renewal_took_ms"]) == (1, TTL_MS - 100)
