"""The job queue: claiming, the job lifecycle's rows and attempts, listings, what
waits and when, the store's one-job-per-tick rule, and enqueue notifications."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from headgate._domain.events import (
    JobAbandoned,
    JobAttemptFailed,
    JobClaimed,
    JobEnqueued,
    JobFinished,
    JobRetried,
    JobState,
    JobSucceeded,
    QueuePaused,
    QueueResumed,
)
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream, queue_stream
from headgate._errors import ConcurrencyConflict, ConstraintViolation, ValidationError
from headgate._json import canonical_json
from headgate._store.port import (
    JOBS_TAKEN,
    NO_STREAM,
    JobFilter,
    Store,
    StreamAppend,
    WriteTransaction,
)
from headgate.testing import FakeClock
from tests.store.builders import claim, create_schedule, enqueue, enqueued, fire_tick
from tests.store.contract.conftest import StoreFactory


class TestJobs:
    def test_periodic_origin_is_stored(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        job = store.reads.job("job-for-nightly-60000")
        assert job is not None
        assert (job.periodic_schedule_id, job.periodic_tick_ms, job.state) == (
            "nightly",
            60_000,
            "pending",
        )

    def test_ordinary_job_has_no_origin_and_can_finish(self, store: Store) -> None:
        store.log.append("job-j1", NO_STREAM, [enqueued("j1", "email.send", "mail", {"to": "x"})])
        store.log.append("job-j1", 1, [JobFinished("j1", JobState.COMPLETED)])
        job = store.reads.job("j1")
        assert job is not None
        assert (job.periodic_schedule_id, job.periodic_tick_ms, job.state, job.payload) == (
            None,
            None,
            "completed",
            '{"to":"x"}',
        )

    @pytest.mark.parametrize(("schedule_id", "tick_ms"), [("nightly", None), (None, 60_000)])
    def test_half_an_origin_is_rejected_before_anything_is_written(
        self, store: Store, schedule_id: str | None, tick_ms: int | None
    ) -> None:
        with pytest.raises(
            ValidationError, match="periodic_origin: needs both schedule_id and tick_ms"
        ):
            store.log.append(
                "job-j1", NO_STREAM, [enqueued("j1", "k", "q", {}, None, schedule_id, tick_ms)]
            )
        assert store.log.head() == 0


def test_claims_take_the_oldest_due_jobs_per_queue_within_capacity(
    store: Store, clock: FakeClock
) -> None:
    now = clock.now_ms()
    enqueue(store, "late", run_at_ms=now - 10)
    enqueue(store, "early", run_at_ms=now - 100)
    enqueue(store, "later-still", run_at_ms=now - 1)
    enqueue(store, "future", run_at_ms=now + 1_000)
    enqueue(store, "other-queue", queue="r")
    enqueue(store, "other-kind", kind="unknown")
    with store.log.write() as transaction:
        assert transaction.claim({"q": 0}, {"k": 1}, "w", now) == []
        assert transaction.claim({"q": 10}, {}, "w", now) == []
        rows = transaction.claim({"q": 2, "r": 5}, {"k": 1}, "w", transaction.now_ms)
    assert [row.job_id for row in rows] == ["early", "late", "other-queue"]
    with store.log.write() as transaction:
        (later,) = transaction.claim({"q": 1}, {"k": 1}, "w", now)
        assert later.job_id == "later-still"
        assert [r.job_id for r in transaction.claim({"q": 10}, {"k": 1}, "w", now + 1_000)] == [
            "future"
        ]
    other = store.reads.job("other-kind")
    assert other is not None and other.state == "pending"


def test_claims_take_higher_priorities_first_then_the_oldest_due(
    store: Store, clock: FakeClock
) -> None:
    now = clock.now_ms()
    enqueue(store, "old-low", run_at_ms=now - 100, priority=-5)
    enqueue(store, "old-default", run_at_ms=now - 90)
    enqueue(store, "new-high", run_at_ms=now - 1, priority=7)
    enqueue(store, "old-high", run_at_ms=now - 50, priority=7)
    enqueue(store, "future-highest", run_at_ms=now + 1_000, priority=100)
    enqueue(store, "mid", run_at_ms=now - 10, priority=3)
    with store.log.write() as transaction:
        first = transaction.claim({"q": 3}, {"k": 1}, "w", now)
        rest = transaction.claim({"q": 10}, {"k": 1}, "w", now)
    assert [row.job_id for row in first] == ["old-high", "new-high", "mid"]
    assert [row.job_id for row in rest] == ["old-default", "old-low"]
    assert [row.priority for row in first + rest] == [7, 7, 3, 0, -5]
    waiting = store.reads.job("future-highest")
    assert waiting is not None and (waiting.state, waiting.priority) == ("pending", 100)


def test_a_paused_queue_gives_no_claim_until_it_is_resumed(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    enqueue(store, "waits", queue="q", run_at_ms=now - 10)
    enqueue(store, "later", queue="q", run_at_ms=now + 5_000)
    enqueue(store, "runs", queue="r", run_at_ms=now - 10)
    store.log.append(queue_stream("q"), NO_STREAM, [QueuePaused("q", "deploy")])
    paused = store.reads.paused_queues()
    assert list(paused) == ["q"]
    assert (paused["q"].note, paused["q"].paused_at_ms) == ("deploy", now)
    assert store.reads.earliest_claimable(["q"], ["k"]) is None
    assert store.reads.earliest_claimable(["q", "r"], ["k"]) == now - 10
    with store.log.write() as transaction:
        rows = transaction.claim({"q": 10, "r": 10}, {"k": 1}, "w", now)
    assert [row.job_id for row in rows] == ["runs"]
    store.log.append(queue_stream("q"), 1, [QueueResumed("q")])
    assert store.reads.paused_queues() == {}
    assert store.reads.earliest_claimable(["q"], ["k"]) == now - 10
    with store.log.write() as transaction:
        rows = transaction.claim({"q": 10}, {"k": 1}, "w", now)
    assert [row.job_id for row in rows] == ["waits"]


def test_a_claim_is_the_rows_state_and_leaves_its_version(store: Store, clock: FakeClock) -> None:
    """Running on the worker, timing out at its own timeout or else its kind's; no
    event is appended, so the attempt's end appends at the version claimed."""
    store.log.append("job-own", NO_STREAM, [enqueued("own", "k", "q", {}, timeout_ms=5_000)])
    enqueue(store, "default", kind="k2")
    head = store.log.head()
    now = clock.now_ms()
    with store.log.write() as transaction:
        rows = transaction.claim({"q": 10}, {"k": 60_000, "k2": 30_000}, "w1", now)
    assert {r.job_id: (r.state, r.worker_id, r.deadline_ms, r.version) for r in rows} == {
        "own": ("running", "w1", now + 5_000, 1),
        "default": ("running", "w1", now + 30_000, 1),
    }
    assert store.log.head() == head
    stored = store.reads.job("own")
    assert stored is not None and (stored.state, stored.worker_id, stored.updated_at_ms) == (
        "running",
        "w1",
        now,
    )
    store.log.append("job-own", 1, [JobSucceeded("own", 1, "w1", now, None)])
    done = store.reads.job("own")
    assert done is not None and (done.state, done.worker_id, done.version) == (
        "completed",
        None,
        2,
    )


def test_a_claim_that_does_not_commit_leaves_the_job_pending(store: Store) -> None:
    enqueue(store, "a")
    with pytest.raises(RuntimeError), store.log.write() as transaction:
        assert transaction.claim({"q": 1}, {"k": 1}, "w", transaction.now_ms)
        raise RuntimeError("the worker died before committing")
    job = store.reads.job("a")
    assert job is not None and (job.state, job.worker_id) == ("pending", None)


def test_a_fingerprints_pending_jobs_are_found_by_kind_and_exact_payload(
    store: Store, clock: FakeClock
) -> None:
    """Whatever their queue or run_at; not running ones, not another kind's, not
    another payload's (key order is canonical: the same payload)."""
    now = clock.now_ms()
    poison = {"file": "bad.csv", "rows": [1, 2]}
    enqueue(store, "later", payload=poison, run_at_ms=now + 60_000)
    enqueue(store, "sooner", payload={"rows": [1, 2], "file": "bad.csv"}, queue="r")
    enqueue(store, "running", payload=poison)
    claim(store, "running")
    enqueue(store, "other-kind", payload=poison, kind="k2")
    enqueue(store, "other-payload", payload={"file": "bad.csv", "rows": [1]})
    text = canonical_json(poison)
    with store.log.write() as transaction:
        assert [row.job_id for row in transaction.pending_like("k", text, 10)] == [
            "sooner",
            "later",
        ]
        (first,) = transaction.pending_like("k", text, 1)
        assert (first.job_id, first.state, first.version) == ("sooner", "pending", 1)
        assert transaction.pending_like("k", canonical_json({"file": "bad.csv"}), 10) == []
        transaction.append_units(
            [[StreamAppend("job-sooner", 1, (JobClaimed("sooner", "w", 1, 10**13),))]]
        )
        assert [row.job_id for row in transaction.pending_like("k", text, 10)] == ["later"]


def test_a_claimed_job_is_not_claimed_again_and_a_lost_jobs_end_is_refused(
    store: Store,
) -> None:
    enqueue(store, "a")
    with store.log.write() as transaction:
        (claimed,) = transaction.claim({"q": 10}, {"k": 1}, "w1", transaction.now_ms)
    with store.log.write() as transaction:
        assert transaction.claim({"q": 10}, {"k": 1}, "w2", transaction.now_ms) == []
        (running,) = transaction.running_on(["w1"])
        assert (running.job_id, running.state, running.worker_id, running.version) == (
            "a",
            "running",
            "w1",
            1,
        )
    store.log.append("job-a", 1, [JobAbandoned("a", "w1", 1)])  # rescued: w1 lost it
    with store.log.write() as transaction:
        (again,) = transaction.claim({"q": 10}, {"k": 1}, "w2", transaction.now_ms)
    assert (again.worker_id, again.version, again.attempts, again.crash_count) == ("w2", 2, 0, 1)
    with pytest.raises(ConcurrencyConflict):  # w1's late end, at the version it claimed
        store.log.append("job-a", claimed.version, [JobSucceeded("a", 1, "w1", 0, None)])


def test_two_workers_claiming_at_once_never_share_a_job(make_store: StoreFactory) -> None:
    first = make_store()
    for n in range(40):
        enqueue(first, f"j{n:02}")
    stores = [first, make_store(), make_store()]
    taken: list[list[str]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def claim_all(index: int, store: Store) -> None:
        barrier.wait()
        while True:
            with store.log.write() as transaction:
                rows = transaction.claim({"q": 3}, {"k": 1}, f"w{index}", transaction.now_ms)
            taken[index].extend(r.job_id for r in rows)
            if not rows:
                return

    threads = [threading.Thread(target=claim_all, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = [job_id for share in taken for job_id in share]
    assert sorted(every) == [f"j{n:02}" for n in range(40)]


def test_a_job_row_follows_its_attempts(store: Store, clock: FakeClock) -> None:
    enqueue(store, "a")
    claim(store, "a")
    store.log.append(
        "job-a", 2, [JobAttemptFailed("a", 1, "w1", 5, "ValueError", "bad", clock.now_ms() + 500)]
    )
    with store.log.write() as transaction:
        row = transaction.jobs(["a", "missing"])["a"]
    assert (row.state, row.attempts, row.run_at_ms, row.worker_id, row.error_type) == (
        "pending",
        1,
        clock.now_ms() + 500,
        None,
        "ValueError",
    )
    claim(store, "a", attempt=2)
    store.log.append("job-a", 4, [JobSucceeded("a", 2, "w1", 7, {"done": 2})])
    job = store.reads.job("a")
    assert job is not None and (job.state, job.attempts, job.result) == (
        "completed",
        2,
        '{"done":2}',
    )
    attempts = store.reads.job_attempts("a", 10)
    assert [(a.attempt, a.outcome, a.error_type) for a in attempts] == [
        (2, "succeeded", None),
        (1, "failed", "ValueError"),
    ]
    assert [a.attempt for a in store.reads.job_attempts("a", 1)] == [2]


def test_the_attempt_history_marks_a_retry_and_numbers_a_crash(
    store: Store, clock: FakeClock
) -> None:
    """After a retry the numbers start again from 1: its row tells the runs apart.
    A crash is shown in the attempt it ended, from when that was claimed."""
    enqueue(store, "a")
    claim(store, "a")
    store.log.append("job-a", 2, [JobAttemptFailed("a", 1, "w1", 5, "E", "bad", None)])
    clock.advance(1_000)
    store.log.append("job-a", 3, [JobRetried("a")])
    retried_at = clock.now_ms()
    claim(store, "a", worker="w2")
    clock.advance(1_000)
    store.log.append("job-a", 5, [JobAbandoned("a", "w2", 1, 1, retried_at)])
    history = [
        (a.attempt, a.outcome, a.worker_id, a.started_at_ms, a.ended_at_ms)
        for a in store.reads.job_attempts("a", 10)
    ]
    assert history[0] == (1, "crashed", "w2", retried_at, clock.now_ms())
    assert history[1] == (0, "retried", None, None, retried_at)
    assert [row[:2] for row in history[2:]] == [(1, "failed")]


def test_a_schedules_jobs_are_its_ticks_and_its_manual_runs_newest_first(
    store: Store, clock: FakeClock
) -> None:
    create_schedule(store, "s")
    fire_tick(store, "s", 60_000)
    clock.advance(1)
    manual = enqueued("m1", "k", "q", None, run_now_schedule_id="s")
    store.log.append("job-m1", NO_STREAM, [manual])
    clock.advance(1)
    fire_tick(store, "s", 120_000)
    clock.advance(1)
    store.log.append("job-other", NO_STREAM, [enqueued("other", "k", "q", None)])
    where = JobFilter(made_by_schedule="s")
    first = store.reads.jobs_page(where, 2, None)
    rest = store.reads.jobs_page(where, 2, first.next_cursor)
    assert [j.job_id for j in first.items + rest.items] == [
        "job-for-s-120000",
        "m1",
        "job-for-s-60000",
    ]
    assert rest.next_cursor is None
    assert store.reads.jobs_page(JobFilter(made_by_schedule="\x00"), 2, None).items == []


def test_jobs_list_newest_first_filtered_and_paged(store: Store, clock: FakeClock) -> None:
    for n in range(5):
        enqueue(store, f"j{n}", queue="even" if n % 2 == 0 else "odd")
        clock.advance(1)
    first = store.reads.jobs_page(JobFilter(), 2, None)
    second = store.reads.jobs_page(JobFilter(), 2, first.next_cursor)
    third = store.reads.jobs_page(JobFilter(), 2, second.next_cursor)
    assert [r.job_id for r in first.items + second.items + third.items] == [
        "j4",
        "j3",
        "j2",
        "j1",
        "j0",
    ]
    assert third.next_cursor is None
    assert [r.job_id for r in store.reads.jobs_page(JobFilter(queue="odd"), 10, None).items] == [
        "j3",
        "j1",
    ]
    assert store.reads.jobs_page(JobFilter(state="running"), 10, None).items == []
    with pytest.raises(ValidationError, match="cursor"):
        store.reads.jobs_page(JobFilter(), 2, "not-a-cursor")


def test_what_waits_and_when(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    enqueue(store, "a", run_at_ms=now + 5_000)
    enqueue(store, "b", kind="nobody", run_at_ms=now + 1_000)
    assert store.reads.earliest_claimable(["q"], ["k"]) == now + 5_000
    assert store.reads.earliest_claimable(["q"], ["k", "nobody"]) == now + 1_000
    assert store.reads.earliest_claimable(["elsewhere"], ["k"]) is None
    assert store.reads.pending_work() == {("q", "k"): 1, ("q", "nobody"): 1}


def test_the_next_instant_a_job_becomes_claimable(store: Store, clock: FakeClock) -> None:
    """What an idle worker sleeps until: a job due already is no instant to wait
    for (a claim passed it over), the next one due later is."""
    now = clock.now_ms()
    assert store.reads.next_claimable_at(["q"], ["k"], now) is None
    enqueue(store, "due", run_at_ms=now - 10)
    enqueue(store, "later", run_at_ms=now + 5_000)
    enqueue(store, "sooner-elsewhere", queue="r", run_at_ms=now + 2_000)
    enqueue(store, "sooner-of-another-kind", kind="nobody", run_at_ms=now + 1_000)
    assert store.reads.next_claimable_at(["q"], ["k"], now) == now + 5_000
    assert store.reads.next_claimable_at(["q", "r"], ["k"], now) == now + 2_000
    assert store.reads.next_claimable_at(["q"], ["k"], now + 5_000) is None


def _heard_once_committed(
    store: Store, make_store: StoreFactory, notify: Callable[[WriteTransaction], None]
) -> list[str | None]:
    """What another handle's listener hears of `notify`: nothing from a write that
    rolled back, then whatever one that committed (beside an append) sends."""
    heard: list[str | None] = []
    arrived = threading.Event()

    def on_heard(what: str | None) -> None:
        heard.append(what)
        arrived.set()

    listener = make_store().listen(on_heard)
    if listener is None:
        pytest.skip("this backend does not notify: its workers poll")
    try:
        time.sleep(0.3)  # the listener connects
        with pytest.raises(RuntimeError), store.log.write() as transaction:
            notify(transaction)
            raise RuntimeError("never committed")
        time.sleep(0.2)
        assert heard == []
        with store.log.write() as transaction:
            notify(transaction)
            transaction.append_units(
                [[StreamAppend("job-n", NO_STREAM, (enqueued("n", "k", "q", {}),))]]
            )
        assert arrived.wait(10)
        time.sleep(0.2)
        return heard
    finally:
        listener.close()


def test_an_enqueue_notifies_listeners_when_it_commits_only(
    store: Store, make_store: StoreFactory
) -> None:
    """By queue where the backend names them (PostgreSQL's NOTIFY, the memory
    store), or as "look at every queue" (None) where it can only tell that
    another connection committed (SQLite's data version)."""
    heard = _heard_once_committed(
        store, make_store, lambda transaction: transaction.notify_enqueued(["q", "r"])
    )
    assert sorted(heard) == ["q", "r"] if None not in heard else set(heard) == {None}


def test_jobs_taken_from_their_workers_are_heard_by_every_listener_once_committed(
    store: Store, make_store: StoreFactory
) -> None:
    """`notify_jobs_taken` is heard as JOBS_TAKEN where the backend names what it
    heard (PostgreSQL, memory), or as a commit (None: SQLite), whose workers
    then look at their running jobs; never before the commit, nor after a
    rollback."""
    heard = _heard_once_committed(
        store, make_store, lambda transaction: transaction.notify_jobs_taken()
    )
    assert set(heard) in ({JOBS_TAKEN}, {None})


def test_jobs_are_read_by_id_in_one_read_leaving_out_those_that_do_not_exist(
    store: Store,
) -> None:
    enqueue(store, "a")
    enqueue(store, "b")
    found = store.reads.jobs(["b", "missing", "a", "b", "\x00"])
    assert sorted(found) == ["a", "b"]
    assert found["a"] == store.reads.job("a")
    assert store.reads.jobs([]) == {}


def _with_deadline(
    job_id: str, run_at_ms: int, start_within_ms: int, *, queue: str = "q", kind: str = "k"
) -> StreamAppend:
    options = JobOptions.restored(queue=queue, run_at_ms=run_at_ms, start_within_ms=start_within_ms)
    return StreamAppend(
        job_stream(job_id), NO_STREAM, (JobEnqueued(job_id, kind, {"n": job_id}, options),)
    )


def test_late_jobs_are_the_pending_ones_past_their_start_deadline_earliest_first(
    store: Store, clock: FakeClock
) -> None:
    now = clock.now_ms()
    store.log.append_units(
        [
            [_with_deadline("later", now - 5_000, 4_000)],  # due by now - 1_000
            [_with_deadline("earliest", now - 9_000, 1_000)],  # by now - 8_000
            [_with_deadline("on-time", now - 1_000, 5_000)],  # by now + 4_000
            [_with_deadline("elsewhere", now - 9_000, 1_000, queue="other")],
            [_with_deadline("unhandled", now - 9_000, 1_000, kind="nobody")],
            [_with_deadline("running", now - 9_000, 1_000)],
        ]
    )
    enqueue(store, "no-deadline", run_at_ms=now - 500)
    with store.log.write() as transaction:
        late = transaction.late_jobs(["q"], ["k"], now, 10)
        assert [row.job_id for row in late] == ["earliest", "running", "later"]
        assert [row.job_id for row in transaction.late_jobs(["q"], ["k"], now, 1)] == ["earliest"]
        assert transaction.late_jobs(["q"], [], now, 10) == []
        assert transaction.late_jobs([], ["k"], now, 10) == []
        assert [
            row.job_id for row in transaction.late_jobs(["q", "other"], ["k", "nobody"], now, 10)
        ] == [
            "earliest",
            "elsewhere",
            "running",
            "unhandled",
            "later",
        ]
        claimed = transaction.claim({"q": 1}, {"k": 60_000}, "w", now)
    assert [row.job_id for row in claimed] == ["earliest"]
    with store.log.write() as transaction:
        assert [row.job_id for row in transaction.late_jobs(["q"], ["k"], now, 10)] == [
            "running",
            "later",
        ], "a running job is no longer late to start"


def _tick_job(job_id: str, tick_ms: int, unique_key: str | None = None) -> JobEnqueued:
    return enqueued(job_id, "k", "q", {}, unique_key, "nightly", tick_ms)


def test_a_second_job_for_one_tick_is_refused_by_the_store(store: Store) -> None:
    """Whatever the admission gate read: one job per (schedule, tick) is the store's
    own rule (an index on SQL), so a race past the gate cannot make two."""
    store.log.append("job-first", NO_STREAM, [_tick_job("first", 60_000)])
    with pytest.raises(ConstraintViolation, match="each tick has one job"):
        store.log.append("job-second", NO_STREAM, [_tick_job("second", 60_000)])
    assert [event.stream_id for event in store.log.read_all()] == ["job-first"]
    assert store.reads.job("second") is None
    with store.log.write() as transaction:
        tick_job = transaction.job_for_tick("nightly", 60_000)
        assert tick_job is not None and tick_job.job_id == "first"
        assert transaction.job_for_tick("nightly", 120_000) is None
    store.log.append("job-next", NO_STREAM, [_tick_job("next", 120_000)])


def test_a_unique_key_is_held_by_one_pending_or_running_job(store: Store) -> None:
    """Another live job under a held key is refused; a job that finishes frees its
    key, within the very write that gives the key to the next job too."""
    store.log.append("job-a", NO_STREAM, [enqueued("a", "k", "q", {}, "key")])
    claim(store, "a")
    with pytest.raises(ConstraintViolation, match="constraint"):
        store.log.append("job-b", NO_STREAM, [enqueued("b", "k", "q", {}, "key")])
    assert store.reads.job("b") is None
    with store.log.write() as transaction:
        results = transaction.append_units(
            [
                [StreamAppend("job-c", NO_STREAM, (enqueued("c", "k", "q", {}, "key"),))],
                [StreamAppend("job-a", 2, (JobFinished("a", JobState.COMPLETED),))],
            ]
        )
        assert all(isinstance(result, list) for result in results)
    job = store.reads.job("c")
    assert job is not None and job.unique_key == "key"


def _keyed(store: Store, job_id: str, unique_key: str) -> None:
    store.log.append(job_stream(job_id), NO_STREAM, [enqueued(job_id, "k", "q", None, unique_key)])


def test_jobs_are_searched_by_id_and_unique_key_finished_ones_too(
    store: Store, clock: FakeClock
) -> None:
    """The console's search box: the job of that id, every job of that unique
    key (a finished one's too), and the further ids the caller derived."""
    _keyed(store, "old", "invoice-7")
    store.log.append("job-old", 1, [JobFinished("old", JobState.COMPLETED)])
    clock.advance(1)
    _keyed(store, "new", "invoice-7")
    clock.advance(1)
    enqueue(store, "invoice-7")
    clock.advance(1)
    enqueue(store, "manual")
    clock.advance(1)
    enqueue(store, "unrelated")

    def found(where: JobFilter) -> list[str]:
        return [row.job_id for row in store.reads.jobs_page(where, 10, None).items]

    assert found(JobFilter(search="invoice-7")) == ["invoice-7", "new", "old"]
    assert found(JobFilter(search="invoice-7", state="pending")) == ["invoice-7", "new"]
    assert found(JobFilter(search="nothing", search_ids=("manual",))) == ["manual"]
    assert found(JobFilter(search="\x00")) == []
    first = store.reads.jobs_page(JobFilter(search="invoice-7"), 2, None)
    rest = store.reads.jobs_page(JobFilter(search="invoice-7"), 2, first.next_cursor)
    assert [row.job_id for row in first.items + rest.items] == ["invoice-7", "new", "old"]


def test_state_counts_follow_the_filters_and_stop_at_the_cap(store: Store) -> None:
    for n in range(3):
        enqueue(store, f"p{n}", kind="mail")
    enqueue(store, "other-kind", kind="report")
    enqueue(store, "done", kind="mail")
    store.log.append("job-done", 1, [JobFinished("done", JobState.COMPLETED)])
    enqueue(store, "running", kind="mail", queue="busy")
    claim(store, "running")
    create_schedule(store, "nightly")
    fire_tick(store, "nightly", 60_000)

    everything = store.reads.state_counts(JobFilter(), 100)
    assert set(everything) == {state.value for state in JobState}
    assert (everything["pending"], everything["running"], everything["completed"]) == (5, 1, 1)
    assert everything["failed"] == 0
    mail = store.reads.state_counts(JobFilter(kind="mail", state="failed"), 100)
    assert (mail["pending"], mail["running"], mail["completed"]) == (3, 1, 1), "state ignored"
    assert store.reads.state_counts(JobFilter(queue="busy"), 100)["running"] == 1
    assert store.reads.state_counts(JobFilter(queue="busy"), 100)["pending"] == 0
    assert store.reads.state_counts(JobFilter(made_by_schedule="nightly"), 100)["pending"] == 1
    assert store.reads.state_counts(JobFilter(search="p1"), 100)["pending"] == 1
    assert store.reads.state_counts(JobFilter(kind="\x00"), 100)["pending"] == 0
    assert store.reads.state_counts(JobFilter(), 2)["pending"] == 2, "counted up to the cap"
    with pytest.raises(ValidationError, match="limit"):
        store.reads.state_counts(JobFilter(), 0)


def test_latest_attempts_are_each_jobs_newest(store: Store, clock: FakeClock) -> None:
    enqueue(store, "a")
    claim(store, "a")
    store.log.append("job-a", 2, [JobAttemptFailed("a", 1, "w1", 5, "E1", "bad", clock.now_ms())])
    claim(store, "a", attempt=2)
    clock.advance(250)
    started = clock.now_ms() - 250
    store.log.append("job-a", 4, [JobAttemptFailed("a", 2, "w1", started, "E2", "worse", None)])
    enqueue(store, "never-ran")
    latest = store.reads.latest_attempts(["a", "never-ran", "missing", "\x00"])
    assert list(latest) == ["a"]
    newest = latest["a"]
    assert (newest.attempt, newest.error_type, newest.ended_at_ms - newest.started_at_ms) == (
        2,
        "E2",
        250,
    )
