"""The claim's rules as the domain states them: order, the serial rule, what a
claim takes within limits, fair turns, rate windows and start deadlines."""

from __future__ import annotations

from dataclasses import dataclass

from headgate._domain import claim_policy
from headgate._domain.limits import ConcurrencyLimit, RateLimit, Slots


@dataclass(frozen=True)
class Job:
    job_id: str
    queue: str = "q"
    kind: str = "k"
    state: str = "pending"
    priority: int = 0
    fair_turn: int = 0
    run_at_ms: int = 0
    partition_key: str | None = None
    rate_class: str | None = None
    serial: bool = False
    periodic_schedule_id: str | None = None
    periodic_tick_ms: int | None = None


def _claim(jobs: list[Job], capacity: dict[str, int], **more: object) -> list[str]:
    slots = more.pop("slots", None)
    assert slots is None or isinstance(slots, Slots)
    paused = more.pop("paused", ())
    assert isinstance(paused, tuple)
    ticks = claim_policy.live_ticks_by_schedule(jobs)
    chosen = claim_policy.choose_claims(
        lambda queue: [job for job in jobs if job.queue == queue and job.state == "pending"],
        capacity,
        {"k", "k2"},
        1_000,
        paused,
        lambda schedule_id: ticks.get(schedule_id, []),
        slots,
    )
    return [job.job_id for job in chosen]


def test_claims_take_priority_then_turn_then_run_at_then_id() -> None:
    jobs = [
        Job("e", run_at_ms=5),
        Job("d", fair_turn=1),
        Job("c", priority=5, run_at_ms=9),
        Job("b", run_at_ms=5),
        Job("a", priority=-1),
    ]
    assert _claim(jobs, {"q": 5}) == ["c", "b", "e", "d", "a"]


def test_a_claim_takes_due_jobs_of_its_kinds_in_unpaused_queues_up_to_capacity() -> None:
    jobs = [
        Job("later", run_at_ms=1_001),
        Job("other kind", kind="x"),
        Job("running", state="running"),
        Job("paused", queue="held"),
        Job("first"),
        Job("second", run_at_ms=1),
        Job("over capacity", run_at_ms=2),
    ]
    assert _claim(jobs, {"q": 2, "held": 5}, paused=("held",)) == ["first", "second"]
    assert _claim(jobs, {"q": 0}) == []


def test_a_serial_tick_job_waits_for_every_earlier_live_tick_of_its_schedule() -> None:
    older = Job("t1", state="running", periodic_schedule_id="s", periodic_tick_ms=1)
    waiting = Job("t2", serial=True, periodic_schedule_id="s", periodic_tick_ms=2)
    elsewhere = Job("u2", serial=True, periodic_schedule_id="u", periodic_tick_ms=2)
    not_serial = Job("t3", periodic_schedule_id="s", periodic_tick_ms=3)
    assert _claim([older, waiting, elsewhere, not_serial], {"q": 5}) == ["t3", "u2"]
    finished = Job("t1", state="completed", periodic_schedule_id="s", periodic_tick_ms=1)
    assert _claim([finished, waiting], {"q": 5}) == ["t2"]


def test_a_claim_skips_what_a_limit_holds_back_and_counts_what_it_takes() -> None:
    per_tenant = ConcurrencyLimit(None, None, "*", 1)
    slots = Slots.counted([per_tenant], {"r": RateLimit("r", 1, 1_000)}, {}, {})
    jobs = [
        Job("a1", partition_key="a"),
        Job("a2", partition_key="a", run_at_ms=1),
        Job("b1", partition_key="b", run_at_ms=2),
        Job("r1", rate_class="r", run_at_ms=3),
        Job("r2", rate_class="r", run_at_ms=4),
        Job("plain", run_at_ms=5),
    ]
    assert _claim(jobs, {"q": 10}, slots=slots) == ["a1", "b1", "r1", "plain"]


def test_earliest_claimable_leaves_out_paused_queues_other_kinds_and_waiting_serials() -> None:
    jobs = [
        Job("paused", queue="held", run_at_ms=1),
        Job("other", kind="x", run_at_ms=2),
        Job("t1", run_at_ms=50, periodic_schedule_id="s", periodic_tick_ms=1),
        Job("t2", run_at_ms=3, serial=True, periodic_schedule_id="s", periodic_tick_ms=2),
        Job("due", run_at_ms=40),
    ]
    ticks = claim_policy.live_ticks_by_schedule(jobs)

    def earliest(after_ms: int | None = None) -> int | None:
        return claim_policy.earliest_claimable(
            jobs, {"k"}, {"held"}, lambda s: ticks.get(s, []), after_ms
        )

    assert earliest() == 40
    assert earliest(after_ms=40) == 50
    assert earliest(after_ms=50) is None


def test_the_latest_turn_counts_live_jobs_of_the_asked_partitions_only() -> None:
    jobs = [
        Job("a", partition_key="p", fair_turn=3),
        Job("b", partition_key="p", fair_turn=7, state="running"),
        Job("c", partition_key="p", fair_turn=9, state="completed"),
        Job("d", partition_key="p", fair_turn=8, priority=1),
        Job("e", partition_key="other", fair_turn=4),
    ]
    turns = claim_policy.turns(jobs, {("q", 0): 2, ("x", 0): 1}, [("q", 0)], [("q", 0, "p")])
    assert turns.current == {("q", 0): 2}
    assert turns.latest == {("q", 0, "p"): 7}
    assert turns.take("q", 0, "p") == 8


def test_a_rate_window_counts_starts_strictly_inside_it() -> None:
    rate = RateLimit("r", 2, 1_000)
    starts = {"r": [0, 500, 1_000]}
    assert claim_policy.recent_starts([rate], starts, 1_000) == {"r": 2}
    assert claim_policy.recent_starts([rate], starts, 1_500) == {"r": 1}
    assert claim_policy.recent_starts([rate], {}, 1_500) == {"r": 0}


def test_a_used_up_rate_class_frees_a_start_when_its_limit_th_newest_leaves() -> None:
    two_a_second = RateLimit("r", 2, 1_000)
    assert claim_policy.rate_slot_frees_at([two_a_second], {"r": [100, 400, 900]}, 950) == 1_400
    assert claim_policy.rate_slot_frees_at([two_a_second], {"r": [100]}, 950) is None
    one = RateLimit("s", 1, 300)
    both = claim_policy.rate_slot_frees_at([two_a_second, one], {"r": [400, 900], "s": [900]}, 950)
    assert both == 1_200


def test_starts_no_window_can_count_are_forgotten() -> None:
    day = 24 * 3_600_000
    now = 2 * day
    starts = [day - 5, now - 5_000, now - 4_000, now - 3_000, now - 500, now - 100]
    kept = claim_policy.starts_kept(starts, 2, 1_000, now)
    assert kept == [now - 500, now - 100]
    assert claim_policy.starts_kept(starts, 4, 1_000, now) == starts[2:]
    assert claim_policy.starts_kept(starts, 9, 1_000, now) == starts[1:]
    tied = [now - 3_000, now - 3_000, now - 2_000]
    assert claim_policy.starts_kept(tied, 2, 1_000, now) == tied


def test_a_start_deadline_runs_from_the_tick_then_run_at_then_enqueue() -> None:
    assert claim_policy.start_deadline(None, 5, 6, 7) is None
    assert claim_policy.start_deadline(100, 5, 6, 7) == 105
    assert claim_policy.start_deadline(100, None, 6, 7) == 106
    assert claim_policy.start_deadline(100, None, None, 7) == 107
    assert claim_policy.is_late(106, 107)
    assert not claim_policy.is_late(107, 107)
    assert not claim_policy.is_late(None, 10**15)
