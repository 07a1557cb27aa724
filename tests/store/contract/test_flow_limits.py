"""Fleet-wide concurrency limits, rate classes and fair turns, kept by the claim.

Every store keeps them inside its claim: a claim counts the jobs running and a
rate class's recent starts in its own transaction, and takes only what fits.
A second handle on the store plays another process."""

from __future__ import annotations

from headgate._domain.decisions import Candidate
from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    JobEnqueued,
    JobSucceeded,
    RateLimitSet,
)
from headgate._domain.fair_share import Turns
from headgate._domain.limits import EACH_PARTITION, scope_of
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream, limit_stream, rate_stream
from headgate._store.port import NO_STREAM, Store
from headgate.testing import FakeClock
from tests.store.contract.conftest import StoreFactory

TIMEOUTS = {"k": 60_000, "other": 60_000}
MINUTE = 60_000


def _job(
    store: Store,
    job_id: str,
    *,
    queue: str = "q",
    kind: str = "k",
    partition_key: str | None = None,
    rate_class: str | None = None,
    fair_turn: int = 0,
    priority: int | None = None,
) -> None:
    options = JobOptions.restored(
        queue=queue, partition_key=partition_key, rate_class=rate_class, priority=priority
    )
    event = JobEnqueued(job_id, kind, {"n": job_id}, options, fair_turn=fair_turn)
    store.log.append(job_stream(job_id), NO_STREAM, [event])


def _limit(
    store: Store,
    limit: int,
    *,
    queue: str | None = None,
    kind: str | None = None,
    partition_key: str | None = None,
) -> None:
    stream = limit_stream(scope_of(queue, kind, partition_key))
    version = store.log.stream_version(stream)
    event = ConcurrencyLimitSet(queue, kind, partition_key, limit)
    store.log.append(stream, version or NO_STREAM, [event])


def _claim(
    store: Store, capacity: dict[str, int], clock: FakeClock, worker: str = "w"
) -> list[str]:
    with store.log.write() as transaction:
        rows = transaction.claim(capacity, TIMEOUTS, worker, clock.now_ms())
    return [row.job_id for row in rows]


def _succeed(store: Store, job_id: str) -> None:
    row = store.reads.job(job_id)
    assert row is not None and row.worker_id is not None
    store.log.append(
        job_stream(job_id), row.version, [JobSucceeded(job_id, 1, row.worker_id, row.updated_at_ms)]
    )


def test_a_queue_limit_holds_across_processes_and_frees_a_slot_when_a_job_ends(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one, other = make_store(), make_store()
    for n in range(5):
        _job(one, f"j{n}")
    _limit(one, 2, queue="q")
    assert _claim(one, {"q": 5}, clock, "w1") == ["j0", "j1"]
    assert _claim(other, {"q": 5}, clock, "w2") == [], "the other process sees the same limit"
    _succeed(one, "j0")
    assert _claim(other, {"q": 5}, clock, "w2") == ["j2"]
    state = other.reads.limits_state(clock.now_ms())
    assert [row.max_running for row in state.limits] == [2]
    assert state.running == {("q", "k", None): 2}


def test_each_partition_has_its_own_limit_and_unkeyed_jobs_are_not_counted(
    store: Store, clock: FakeClock
) -> None:
    for job_id, key in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", None), ("c2", None)):
        _job(store, job_id, partition_key=key)
    _limit(store, 1, partition_key=EACH_PARTITION)
    assert _claim(store, {"q": 10}, clock) == ["a1", "b1", "c1", "c2"]
    assert _claim(store, {"q": 10}, clock) == []
    _succeed(store, "a1")
    assert _claim(store, {"q": 10}, clock) == ["a2"]


def test_a_full_partition_backlog_is_skipped_not_read_through(
    store: Store, clock: FakeClock
) -> None:
    for n in range(60):
        _job(store, f"a{n:02d}", partition_key="a")
    _job(store, "b0", partition_key="b")
    _limit(store, 2, partition_key="a")
    assert _claim(store, {"q": 3}, clock) == ["a00", "a01", "b0"]
    assert _claim(store, {"q": 3}, clock) == [], "a is full; nothing else waits"


def test_a_kind_limit_counts_every_queue(store: Store, clock: FakeClock) -> None:
    for job_id, queue in (("x1", "q1"), ("x2", "q2"), ("x3", "q2")):
        _job(store, job_id, queue=queue)
    _job(store, "o1", queue="q2", kind="other")
    _limit(store, 1, kind="k")
    assert _claim(store, {"q1": 5, "q2": 5}, clock) == ["x1", "o1"]


def test_a_limit_of_zero_per_partition_holds_every_keyed_job(
    store: Store, clock: FakeClock
) -> None:
    _job(store, "a1", partition_key="a")
    _job(store, "plain")
    _limit(store, 0, partition_key=EACH_PARTITION)
    assert _claim(store, {"q": 5}, clock) == ["plain"]


def test_a_cleared_limit_holds_nothing(store: Store, clock: FakeClock) -> None:
    for n in range(3):
        _job(store, f"j{n}")
    _limit(store, 1, queue="q")
    assert _claim(store, {"q": 5}, clock) == ["j0"]
    stream = limit_stream(scope_of("q", None, None))
    store.log.append(
        stream, store.log.stream_version(stream), [ConcurrencyLimitCleared("q", None, None)]
    )
    assert _claim(store, {"q": 5}, clock) == ["j1", "j2"]
    assert store.reads.limits_state(clock.now_ms()).limits == []


def test_a_rate_class_starts_at_most_its_limit_in_any_window(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one, other = make_store(), make_store()
    for n in range(4):
        _job(one, f"m{n}", rate_class="mail")
    _job(one, "z-free")
    one.log.append(rate_stream("mail"), NO_STREAM, [RateLimitSet("mail", 2, MINUTE)])
    assert _claim(one, {"q": 2}, clock, "w1") == ["m0", "m1"]
    for job_id in ("m0", "m1"):
        _succeed(one, job_id)
    clock.advance(MINUTE // 2)
    assert _claim(other, {"q": 5}, clock, "w2") == ["z-free"], "finished starts still count"
    assert other.reads.limits_state(clock.now_ms()).started == {"mail": 2}
    clock.advance(MINUTE // 2 - 1)
    assert _claim(other, {"q": 5}, clock, "w2") == [], "a start counts for a whole window"
    clock.advance(1)
    assert _claim(other, {"q": 5}, clock, "w2") == ["m2", "m3"]
    assert one.reads.job("m2") is not None


def test_a_rate_limit_lowered_and_raised_within_its_window_still_counts_every_start(
    store: Store, clock: FakeClock
) -> None:
    """5 per 10 s, 5 started; lowered to 1 (a claim under it forgets nothing it
    may count again), raised back to 5 two seconds later: still used up until
    the first starts leave the window, not 4 more at once."""
    window = 10_000
    for n in range(10):
        _job(store, f"m{n}", rate_class="mail")
    stream = rate_stream("mail")
    store.log.append(stream, NO_STREAM, [RateLimitSet("mail", 5, window)])
    for n in range(5):
        assert _claim(store, {"q": 1}, clock) == [f"m{n}"]
        clock.advance(100)
    clock.advance(500)
    store.log.append(stream, 1, [RateLimitSet("mail", 1, window)])
    assert _claim(store, {"q": 10}, clock) == []
    clock.advance(1_000)
    store.log.append(stream, 2, [RateLimitSet("mail", 5, window)])
    assert _claim(store, {"q": 10}, clock) == [], "the five starts still count"
    assert store.reads.limits_state(clock.now_ms()).started == {"mail": 5}
    clock.advance(window - 2_000)
    assert _claim(store, {"q": 10}, clock) == ["m5"], "the first start left the window"


def _frees_at(store: Store, now_ms: int) -> int | None:
    with store.log.write() as transaction:
        return transaction.rate_slot_frees_at(now_ms)


def test_a_used_up_rate_class_says_when_it_frees_a_start(store: Store, clock: FakeClock) -> None:
    start = clock.now_ms()
    for n in range(4):
        _job(store, f"m{n}", rate_class="mail")
    assert _frees_at(store, start) is None, "no class"
    store.log.append(rate_stream("mail"), NO_STREAM, [RateLimitSet("mail", 2, 1_000)])
    store.log.append(rate_stream("sms"), NO_STREAM, [RateLimitSet("sms", 5, 1_000)])
    assert _claim(store, {"q": 1}, clock) == ["m0"]
    assert _frees_at(store, clock.now_ms()) is None, "mail has a start left"
    clock.advance(300)
    assert _claim(store, {"q": 5}, clock) == ["m1"]
    assert _frees_at(store, clock.now_ms()) == start + 1_000
    clock.advance(700)
    assert _claim(store, {"q": 5}, clock) == ["m2"]
    assert _frees_at(store, clock.now_ms()) == start + 300 + 1_000


def test_a_used_up_rate_class_is_an_instant_a_job_becomes_claimable(
    store: Store, clock: FakeClock
) -> None:
    start = clock.now_ms()
    for n in range(3):
        _job(store, f"m{n}", rate_class="mail")
    store.log.append(rate_stream("mail"), NO_STREAM, [RateLimitSet("mail", 2, 1_000)])
    assert store.reads.next_claimable_at(["q"], ["k"], start) is None, "nothing used up"
    assert _claim(store, {"q": 5}, clock) == ["m0", "m1"]
    assert store.reads.next_claimable_at(["q"], ["k"], start) == start + 1_000


def test_claims_take_the_lowest_fair_turn_within_a_priority(store: Store, clock: FakeClock) -> None:
    _job(store, "a-late-turn", partition_key="a", fair_turn=7)
    clock.advance(1)
    _job(store, "b-early-turn", partition_key="b", fair_turn=3)
    clock.advance(1)
    _job(store, "urgent", partition_key="a", fair_turn=9, priority=5)
    assert _claim(store, {"q": 3}, clock) == ["urgent", "b-early-turn", "a-late-turn"]


def _turns(store: Store, partition_key: str | None, priority: int | None = None) -> Turns:
    options = JobOptions.restored(queue="q", partition_key=partition_key, priority=priority)
    candidate = Candidate(JobEnqueued("new", "k", None, options), "f", 4)
    with store.log.write() as transaction:
        return transaction.gate_facts([candidate], []).turns


def test_the_gate_learns_each_lanes_turn_and_each_partitions_latest(
    store: Store, clock: FakeClock
) -> None:
    for n, turn in enumerate((4, 5, 6)):
        _job(store, f"a{n}", partition_key="a", fair_turn=turn)
        clock.advance(1)
    _job(store, "later", partition_key="c", fair_turn=2)
    _job(store, "urgent", partition_key="a", fair_turn=9, priority=5)
    _job(store, "elsewhere", queue="other", partition_key="a", fair_turn=40)
    assert _turns(store, "b").current == {}, "no claim has taken a turn yet"
    assert _turns(store, "b").latest == {}, "b has no live job"
    assert _turns(store, "a").latest == {("q", 0, "a"): 6}
    assert _turns(store, "a", priority=5).latest == {("q", 5, "a"): 9}
    assert _claim(store, {"q": 2}, clock) == ["urgent", "later"]
    turns = _turns(store, "a")
    assert turns.current == {("q", 0): 2}, "each priority is a lane of its own"
    assert (turns.take("q", 0, "a"), turns.take("q", 0, "b")) == (7, 2)
    assert _turns(store, "b", priority=5).current == {("q", 5): 9}
    assert _claim(store, {"q": 5}, clock) == ["a0", "a1", "a2"]
    assert _turns(store, None).current == {("q", 0): 6}, "a lane's turn never falls back"


def test_a_kinds_per_partition_limit_leaves_other_kinds_of_the_partition_free(
    store: Store, clock: FakeClock
) -> None:
    for job_id, kind in (("k1", "k"), ("k2", "k"), ("o1", "other"), ("o2", "other")):
        _job(store, job_id, kind=kind, partition_key="a")
        clock.advance(1)
    _job(store, "k-of-b", partition_key="b")
    _limit(store, 1, kind="k", partition_key=EACH_PARTITION)
    assert _claim(store, {"q": 2}, clock) == ["k1", "o1"], "k2 waits; other kinds do not"
    assert _claim(store, {"q": 5}, clock) == ["o2", "k-of-b"]
