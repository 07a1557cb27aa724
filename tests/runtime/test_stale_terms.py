"""Terms that changed while something was on its way, with a fake clock.

A batch sent under term T may come back after the scheduler has taken the
lease again under T+1 (the process stalled past the TTL while the batch
waited for its instant, or for a hook). Its `LeaseLost` is about T: it must
not cost the new term its ticks. A loss to another process stays a loss.
And a holder that lost track of its own live term (a renewal it could not
trust, a takeover whose answer was lost) takes the lease again at once under
the next term, instead of idling until the lease expires.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from structlog.testing import capture_logs

from headgate import EnqueueHook, Headgate, RuntimeConfig, TickContext, WorkerConfig
from headgate._domain.events import EnqueueAttempted, JobClaimed
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import StoreUnavailable
from headgate._runtime.actors import shard_of
from headgate._runtime.config import SCHEDULER_LEASE
from headgate._runtime.duties import MAINTENANCE_LEASE, DutyKeeper
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.maintenance import ExpiredRescue
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import Lease, WorkerBeat
from headgate.testing import FakeClock
from tests.runtime.conftest import START_MS, jobs_for

CONFIG = RuntimeConfig()  # the defaults: a 1.5 s lease, batches prepared 0.5 s ahead
TTL_MS = CONFIG.lease_ttl_ms
HELD_CONFIG = RuntimeConfig(hook_timeout_ms=60_000)
"""A hook the test holds stays within its budget."""


class HeldHook(EnqueueHook):
    """Holds the first `before_enqueue` call until released: its batch stays in flight."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def before_enqueue(self, context: TickContext) -> None:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.entered.set()
            assert self.release.wait(30), "the test never released the hook"


def _wait_for(condition: Callable[[], Any], what: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)
    return value


def _term(hg: Headgate) -> int | None:
    status = hg.runtime.lease()
    return None if status is None else status.term


def _advances(hg: Headgate, schedule_id: str) -> list[tuple[int, int | None]]:
    """(tick, next run) of every attempt the schedule's stream records, in order."""
    return [
        (recorded.event.tick_ms, recorded.event.next_run_ms)
        for recorded in hg._core.store.log.read_stream(schedule_stream(schedule_id))
        if isinstance(recorded.event, EnqueueAttempted)
    ]


def _assert_each_tick_once(hg: Headgate, schedule_id: str) -> None:
    """One job per tick, one record per tick, and each advance past the one before."""
    ticks = jobs_for(hg, schedule_id)
    assert len(ticks) == len(set(ticks)), f"{schedule_id}: a tick has two jobs"
    advances = _advances(hg, schedule_id)
    recorded = [tick for tick, _ in advances]
    assert recorded == sorted(set(recorded)), f"{schedule_id}: a tick was recorded twice"
    for (tick, next_run), (later, _) in itertools.pairwise(advances):
        assert next_run is not None and tick < next_run <= later, (
            f"{schedule_id}: advanced from {tick} to {next_run}, then fired {later}"
        )


def _stale_losses(logs: list[dict[str, Any]], current_term: int) -> list[int]:
    lost = [e["term"] for e in logs if e["event"].startswith("lease lost; batch discarded")]
    return [term for term in lost if term < current_term]


def test_a_batch_prepared_ahead_and_lost_with_an_old_term_leaves_the_new_term_firing(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """The sequence of the report: the batch for the 3,000 ms instant, prepared at
    2,500, commits at 4,000 after the lease lapsed and was taken again."""
    hg = make_headgate(CONFIG)
    hg.schedules.put("s", spec="@every:1000", kind="k")
    hg.start(workers=False)
    clock.set(START_MS + 2_500)
    assert hg.fire_due_ticks()
    with capture_logs() as logs:
        clock.set(START_MS + 4_000)
        assert hg.fire_due_ticks(), "the runtime fires under the term it took again"
    term = _term(hg)
    assert term is not None and _stale_losses(logs, term), "the stale batch's loss happened"
    for at in (5_000, 6_000):
        clock.set(START_MS + at)
        assert hg.fire_due_ticks()
    assert jobs_for(hg, "s") == [START_MS + at for at in (2_000, 4_000, 5_000, 6_000)]
    assert _term(hg) == term, "no lease changed hands after the stale loss"
    _assert_each_tick_once(hg, "s")


def test_a_batch_due_now_and_lost_with_an_old_term_leaves_the_new_term_firing(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """A batch held by a hook while the lease lapses and is taken again."""
    hook = HeldHook()
    hg = make_headgate(HELD_CONFIG, hooks=[hook])
    hg.schedules.put("s", spec="@every:1000", kind="k")
    hg.start(workers=False)
    with ThreadPoolExecutor(1) as pool:
        clock.set(START_MS + 1_200)  # tick 1,000 is due now: its batch waits in the hook
        pending: Future[bool] = pool.submit(hg.fire_due_ticks)
        assert hook.entered.wait(10)
        first = _term(hg)
        assert first is not None
        clock.set(START_MS + 1_200 + TTL_MS)  # the lease renewed at 1,200 has lapsed
        _wait_for(lambda: (_term(hg) or 0) > first, "the lease to be taken again")
        hook.release.set()
        assert pending.result(timeout=30), "the batch's loss left the new term firing"
    assert jobs_for(hg, "s") == [START_MS + 2_000]  # skip: the latest due tick
    clock.set(START_MS + 3_000)
    assert hg.fire_due_ticks()
    assert jobs_for(hg, "s") == [START_MS + 2_000, START_MS + 3_000]
    _assert_each_tick_once(hg, "s")


def test_a_stale_loss_across_several_shards_leaves_every_schedule_firing(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    config = RuntimeConfig(shards=4)
    ids = [f"s{n}" for n in range(8)]
    assert len({shard_of(schedule_id, config.shards) for schedule_id in ids}) > 1
    hg = make_headgate(config)
    for schedule_id in ids:
        hg.schedules.put(schedule_id, spec="@every:1000", kind="k")
    hg.start(workers=False)
    clock.set(START_MS + 2_500)
    assert hg.fire_due_ticks()
    with capture_logs() as logs:
        clock.set(START_MS + 4_000)
        assert hg.fire_due_ticks()
    term = _term(hg)
    assert term is not None and _stale_losses(logs, term)
    clock.set(START_MS + 5_000)
    assert hg.fire_due_ticks()
    for schedule_id in ids:
        assert jobs_for(hg, schedule_id) == [START_MS + at for at in (2_000, 4_000, 5_000)]
        _assert_each_tick_once(hg, schedule_id)


class FreezableLeases:
    """A runtime's lease calls, frozen on demand as a paused process's would be."""

    def __init__(self, leases: Any) -> None:
        self._leases = leases
        self.thawed = threading.Event()
        self.thawed.set()
        self.frozen_in_call = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._leases, name)

    def acquire(self, *args: Any, **kwargs: Any) -> Lease | None:
        if not self.thawed.is_set():
            self.frozen_in_call.set()
            assert self.thawed.wait(30), "the test never thawed the lease calls"
        lease: Lease | None = self._leases.acquire(*args, **kwargs)
        return lease


def test_a_loss_to_another_process_stays_a_loss(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Frozen while its batch waits in a hook, the first runtime loses the lease to
    a second; woken, its batch is refused and it fires nothing more."""
    hook = HeldHook()
    first = make_headgate(HELD_CONFIG, hooks=[hook])
    leases = FreezableLeases(first._core.store.leases)
    first._core.store.leases = leases  # type: ignore[assignment]
    first.schedules.put("s", spec="@every:1000", kind="k")
    first.start(workers=False)
    with ThreadPoolExecutor(1) as pool:
        clock.set(START_MS + 1_200)
        pending: Future[bool] = pool.submit(first.fire_due_ticks)
        assert hook.entered.wait(10)
        leases.thawed.clear()
        clock.set(START_MS + 1_200 + TTL_MS)
        assert leases.frozen_in_call.wait(10), "the first runtime's renewal was due"
        second = make_headgate(HELD_CONFIG)
        second.start(workers=False)
        assert second.fire_due_ticks(), "the second runtime took the lapsed lease"
        assert jobs_for(second, "s") == [START_MS + 2_000]
        hook.release.set()
        leases.thawed.set()
        assert not pending.result(timeout=30), "the first runtime knows it lost the lease"
    assert not first.fire_due_ticks()
    clock.set(START_MS + 3_000)
    assert not first.fire_due_ticks()
    assert second.fire_due_ticks()
    status = first.runtime.lease()
    assert status is not None and status.holder == second._core.holder
    assert jobs_for(first, "s") == [START_MS + 2_000, START_MS + 3_000]
    _assert_each_tick_once(first, "s")


class LostAnswers:
    """A runtime's calls for one lease (`name`), whose next answer is lost after
    the store acted on it (the connection dropped as the commit was acknowledged)."""

    def __init__(self, leases: Any, name: str = SCHEDULER_LEASE) -> None:
        self._leases = leases
        self._name = name
        self.lose_next = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._leases, name)

    def acquire(self, *args: Any, **kwargs: Any) -> Lease | None:
        lease: Lease | None = self._leases.acquire(*args, **kwargs)
        if args[0] == self._name and self.lose_next.is_set():
            self.lose_next.clear()
            raise StoreUnavailable("claiming lease: the connection dropped before the answer")
        return lease


def test_a_takeover_whose_answer_was_lost_is_taken_again_at_once(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(CONFIG)
    leases = LostAnswers(hg._core.store.leases)
    hg._core.store.leases = leases  # type: ignore[assignment]
    hg.schedules.put("s", spec="@every:1000", kind="k")
    hg.start(workers=False)
    assert hg.fire_due_ticks()
    leases.lose_next.set()
    clock.set(START_MS + 2_000)  # lapsed: the runtime takes it again, and hears nothing back
    _wait_for(lambda: not leases.lose_next.is_set(), "the takeover")
    assert hg.fire_due_ticks(), "its own live lease is taken again, not refused until it expires"
    assert _term(hg) == 3
    assert jobs_for(hg, "s") == [START_MS + 2_000]
    _assert_each_tick_once(hg, "s")


def test_a_renewal_too_late_to_trust_is_followed_by_a_new_term_at_once(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(CONFIG)
    leases = hg._core.store.leases
    slow = threading.Event()

    class SlowLeases:
        def __getattr__(self, name: str) -> Any:
            return getattr(leases, name)

        def acquire(self, *args: Any, **kwargs: Any) -> Lease | None:
            lease: Lease | None = leases.acquire(*args, **kwargs)
            if args[0] == SCHEDULER_LEASE and slow.is_set():
                slow.clear()
                clock.advance(TTL_MS - 100)  # the answer took nearly the whole TTL
            return lease

    hg._core.store.leases = SlowLeases()  # type: ignore[assignment]
    hg.schedules.put("s", spec="@every:1000", kind="k")
    hg.start(workers=False)
    assert hg.fire_due_ticks()
    with capture_logs() as logs:
        slow.set()
        clock.advance(CONFIG.renew_every_ms)
        _wait_for(
            lambda: [e for e in logs if e["event"].startswith("lease renewal came back too late")],
            "the late renewal",
        )
    assert hg.fire_due_ticks(), "a fresh term is taken at once, not once the untrusted one expires"
    assert _term(hg) == 2
    assert jobs_for(hg, "s") == [START_MS + 1_000]
    _assert_each_tick_once(hg, "s")


def test_a_keeper_whose_takeover_answer_was_lost_runs_its_duties_at_its_next_turn(
    hg: Headgate, clock: FakeClock
) -> None:
    """The maintenance lease is kept by the scheduler's rule: a takeover whose
    answer was lost is taken again at once under the next term."""
    store = hg._core.store
    leases = LostAnswers(store.leases, MAINTENANCE_LEASE)
    store.leases = leases  # type: ignore[assignment]
    rescuer = Rescuer(store, clock, worker_identity("rescuer"), WorkerConfig())
    keeper = DutyKeeper(
        store,
        clock,
        worker_identity("keeper"),
        [ExpiredRescue(rescuer, 5_000)],
        lease_ttl_ms=15_000,
    )
    job = hg.enqueue("k")
    store.workers.beat(WorkerBeat("dead", "host", 1, {"default": 1}, 0, 1, 0), ttl_ms=1_000)
    store.log.append(job_stream(job.id), 1, [JobClaimed(job.id, "dead", 1, 10**13)])
    clock.advance(2_000)  # the worker stopped heartbeating
    leases.lose_next.set()
    assert keeper.run_due() == []  # it took the maintenance lease, and heard nothing back
    clock.advance(keeper.lease.timing.renew_every_ms)  # its next turn, asking the store again
    assert keeper.run_due() == ["rescue"], "rescued at its next turn, not once its lease expired"
    assert rescuer.rescued == 1
    assert hg.jobs.get(job.id).state == "pending"
    lease = store.leases.status(MAINTENANCE_LEASE)
    assert lease is not None and lease.term == 2
    keeper.stop()
