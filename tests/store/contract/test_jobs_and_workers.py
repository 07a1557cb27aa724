"""The store's part in running jobs: claiming, the job lifecycle's reads, crash
blame, worker heartbeats, listings and notifications."""

from __future__ import annotations

import threading
import time

import pytest

from headgate._domain.events import (
    FingerprintBlameCleared,
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    FingerprintReleased,
    JobAbandoned,
    JobAttemptFailed,
    JobClaimed,
    JobFinished,
    JobRetried,
    JobState,
    JobSucceeded,
)
from headgate._errors import ConcurrencyConflict, ValidationError
from headgate._json import canonical_json
from headgate._store.port import (
    ANY_VERSION,
    NO_STREAM,
    JobFilter,
    ProcessIdentity,
    Store,
    StreamAppend,
    WorkerBeat,
)
from headgate.testing import FakeClock
from tests.store.builders import enqueued
from tests.store.contract.conftest import StoreFactory


def _enqueue(
    store: Store,
    job_id: str,
    *,
    kind: str = "k",
    queue: str = "q",
    run_at_ms: int | None = None,
    payload: object = None,
) -> None:
    body = {"n": job_id} if payload is None else payload
    job = enqueued(job_id, kind, queue, body, run_at_ms=run_at_ms)  # type: ignore[arg-type]
    store.log.append(f"job-{job_id}", NO_STREAM, [job])


def _claim(store: Store, job_id: str, worker: str = "w1", attempt: int = 1) -> None:
    version = store.log.stream_version(f"job-{job_id}")
    store.log.append(f"job-{job_id}", version, [JobClaimed(job_id, worker, attempt, 10**13)])


def test_claimable_jobs_come_oldest_first_per_queue_within_capacity(
    store: Store, clock: FakeClock
) -> None:
    now = clock.now_ms()
    _enqueue(store, "late", run_at_ms=now - 10)
    _enqueue(store, "early", run_at_ms=now - 100)
    _enqueue(store, "later-still", run_at_ms=now - 1)
    _enqueue(store, "future", run_at_ms=now + 1_000)
    _enqueue(store, "other-queue", queue="r")
    _enqueue(store, "other-kind", kind="unknown")
    with store.log.write() as transaction:
        rows = transaction.claimable({"q": 2, "r": 5}, {"k"}, transaction.now_ms)
    assert [row.job_id for row in rows] == ["early", "late", "other-queue"]
    with store.log.write() as transaction:
        assert transaction.claimable({"q": 10}, {"k"}, now + 1_000)[-1].job_id == "future"
        assert transaction.claimable({"q": 0}, {"k"}, now) == []
        assert transaction.claimable({"q": 10}, set(), now) == []


def test_a_fingerprints_pending_jobs_are_found_by_kind_and_exact_payload(
    store: Store, clock: FakeClock
) -> None:
    """Whatever their queue or run_at; not running ones, not another kind's, not
    another payload's (key order is canonical: the same payload)."""
    now = clock.now_ms()
    poison = {"file": "bad.csv", "rows": [1, 2]}
    _enqueue(store, "later", payload=poison, run_at_ms=now + 60_000)
    _enqueue(store, "sooner", payload={"rows": [1, 2], "file": "bad.csv"}, queue="r")
    _enqueue(store, "running", payload=poison)
    _claim(store, "running")
    _enqueue(store, "other-kind", payload=poison, kind="k2")
    _enqueue(store, "other-payload", payload={"file": "bad.csv", "rows": [1]})
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


def test_a_claimed_job_is_not_claimable_again_and_a_stale_claim_is_refused(store: Store) -> None:
    _enqueue(store, "a")
    _claim(store, "a")
    with store.log.write() as transaction:
        assert transaction.claimable({"q": 10}, {"k"}, transaction.now_ms) == []
        (running,) = transaction.running_on(["w1"])
        assert (running.job_id, running.state, running.worker_id, running.version) == (
            "a",
            "running",
            "w1",
            2,
        )
    with pytest.raises(ConcurrencyConflict):  # another worker, from a stale read at version 1
        store.log.append("job-a", 1, [JobClaimed("a", "w2", 1, 10**13)])


def test_two_workers_claiming_at_once_never_share_a_job(make_store: StoreFactory) -> None:
    first = make_store()
    for n in range(40):
        _enqueue(first, f"j{n:02}")
    stores = [first, make_store(), make_store()]
    taken: list[list[str]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def claim_all(index: int, store: Store) -> None:
        barrier.wait()
        while True:
            with store.log.write() as transaction:
                rows = transaction.claimable({"q": 3}, {"k"}, transaction.now_ms)
                units = [
                    [
                        StreamAppend(
                            f"job-{r.job_id}", r.version, (JobClaimed(r.job_id, f"w{index}", 1, 1),)
                        )
                    ]
                    for r in rows
                ]
                results = transaction.append_units(units)
            taken[index].extend(
                r.job_id
                for r, result in zip(rows, results, strict=True)
                if isinstance(result, list)
            )
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
    _enqueue(store, "a")
    _claim(store, "a")
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
    _claim(store, "a", attempt=2)
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
    _enqueue(store, "a")
    _claim(store, "a")
    store.log.append("job-a", 2, [JobAttemptFailed("a", 1, "w1", 5, "E", "bad", None)])
    clock.advance(1_000)
    store.log.append("job-a", 3, [JobRetried("a")])
    retried_at = clock.now_ms()
    _claim(store, "a", worker="w2")
    clock.advance(1_000)
    store.log.append("job-a", 5, [JobAbandoned("a", "w2", 1, 1, retried_at)])
    history = [
        (a.attempt, a.outcome, a.worker_id, a.started_at_ms, a.ended_at_ms)
        for a in store.reads.job_attempts("a", 10)
    ]
    assert history[0] == (1, "crashed", "w2", retried_at, clock.now_ms())
    assert history[1] == (0, "retried", None, None, retried_at)
    assert [row[:2] for row in history[2:]] == [(1, "failed")]


def test_crash_blame_carries_the_total_and_a_release_forgets_it(store: Store) -> None:
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "a", 500)])
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "b", 1_500)])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp", "other"]) == {"fp": 1_500, "other": 0}
        assert transaction.quarantined(["fp"]) == frozenset()
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintQuarantined("fp", "crash limit")])
    with store.log.write() as transaction:
        assert transaction.quarantined(["fp", "other"]) == frozenset({"fp"})
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintReleased("fp")])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 0}
        assert transaction.quarantined(["fp"]) == frozenset()


def test_a_completed_job_clears_its_fingerprints_blame(store: Store) -> None:
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "a", 2_000)])
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintBlameCleared("fp", "b")])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 0}
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "c", 500)])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 500}


def _beat(
    worker_id: str, running: int = 0, process: ProcessIdentity | None = None, started: int = 1
) -> WorkerBeat:
    return WorkerBeat(worker_id, "host", 1, {"q": 4}, started, running, 0, process)


def test_heartbeats_keep_a_worker_live_until_they_stop(store: Store, clock: FakeClock) -> None:
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    store.workers.beat(_beat("w2"), ttl_ms=1_000)
    clock.advance(600)
    store.workers.beat(_beat("w1", running=2), ttl_ms=1_000)
    clock.advance(600)  # w2 is 1,200 ms past its beat, w1 600
    assert [(w.worker_id, w.running) for w in store.workers.live(clock.now_ms())] == [("w1", 2)]
    with store.log.write() as transaction:
        expired = transaction.expired_workers(transaction.now_ms)
        assert [w.worker_id for w in expired] == ["w2"]
        transaction.forget_workers(expired)
        assert transaction.expired_workers(transaction.now_ms) == []
    store.workers.stop("w1")
    assert store.workers.live(clock.now_ms()) == []


def test_a_worker_that_beat_since_it_was_read_as_expired_is_not_forgotten(
    store: Store, clock: FakeClock
) -> None:
    """The rescuer forgets the rows it read; a worker that renewed meanwhile is alive,
    and its row is what gets its later jobs rescued should it die. (On PostgreSQL
    the renewal can land inside the rescuer's own transaction:
    tests/store/sql/test_interleaved_writes.py.)"""
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    clock.advance(1_200)
    with store.log.write() as transaction:
        expired = transaction.expired_workers(transaction.now_ms)
    assert [w.worker_id for w in expired] == ["w1"]
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    with store.log.write() as transaction:
        transaction.forget_workers(expired)
    assert [w.worker_id for w in store.workers.live(clock.now_ms())] == ["w1"]


BOOT = "3a5419f7-b5ea-4d8d-a96a-a99bcbb6c25c"
NAMESPACES = "pid:[4026531836] time:[4026531834]"


def test_workers_sharing_a_boot_and_namespaces_are_found_expired_or_not(
    store: Store, clock: FakeClock
) -> None:
    """What a worker needs to check its machine's other workers for death: their
    rows, with the identity each wrote, however stale their heartbeat."""
    here = ProcessIdentity(BOOT, NAMESPACES, 70_147)
    store.workers.beat(_beat("later", process=ProcessIdentity(BOOT, NAMESPACES, 9), started=5), 100)
    store.workers.beat(_beat("here", process=here), ttl_ms=100)
    store.workers.beat(_beat("other-boot", process=ProcessIdentity("b2", NAMESPACES, 1)), 100)
    store.workers.beat(_beat("other-ns", process=ProcessIdentity(BOOT, "pid:[1] time:[2]", 1)), 100)
    store.workers.beat(_beat("old-build"), ttl_ms=100)
    clock.advance(1_000)  # every heartbeat has expired
    store.workers.beat(_beat("here", running=3, process=here), ttl_ms=100)  # renewed
    found = store.workers.in_namespaces(BOOT, NAMESPACES)
    assert [(w.worker_id, w.process) for w in found] == [
        ("here", here),
        ("later", ProcessIdentity(BOOT, NAMESPACES, 9)),
    ]
    assert found[0].running == 3
    assert store.workers.in_namespaces(BOOT, "pid:[4026531836]") == []
    with store.log.write() as transaction:
        expired = {w.worker_id: w.process for w in transaction.expired_workers(transaction.now_ms)}
        assert expired["old-build"] is None and expired["later"] is not None
        transaction.forget_workers([found[0]])  # "here", as read
    assert [w.worker_id for w in store.workers.in_namespaces(BOOT, NAMESPACES)] == ["later"]
    assert store.workers.beat(_beat("again", process=here), ttl_ms=100).process == here
    assert [(w.worker_id, w.process) for w in store.workers.live(clock.now_ms())] == [
        ("again", here)
    ]


def test_jobs_list_newest_first_filtered_and_paged(store: Store, clock: FakeClock) -> None:
    for n in range(5):
        _enqueue(store, f"j{n}", queue="even" if n % 2 == 0 else "odd")
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
    _enqueue(store, "a", run_at_ms=now + 5_000)
    _enqueue(store, "b", kind="nobody", run_at_ms=now + 1_000)
    assert store.reads.earliest_claimable(["q"], ["k"]) == now + 5_000
    assert store.reads.earliest_claimable(["q"], ["k", "nobody"]) == now + 1_000
    assert store.reads.earliest_claimable(["elsewhere"], ["k"]) is None
    assert store.reads.pending_kinds() == {"k": 1, "nobody": 1}


def test_an_enqueue_notifies_listeners_when_it_commits_only(
    store: Store, make_store: StoreFactory
) -> None:
    heard: list[str] = []
    arrived = threading.Event()

    def on_enqueued(queue: str) -> None:
        heard.append(queue)
        arrived.set()

    listener = make_store().listen(on_enqueued)
    if listener is None:
        pytest.skip("this backend does not notify: its workers poll")
    try:
        time.sleep(0.3)  # the listener connects
        with pytest.raises(RuntimeError), store.log.write() as transaction:
            transaction.notify_enqueued(["rolled-back"])
            raise RuntimeError("never committed")
        with store.log.write() as transaction:
            transaction.notify_enqueued(["q", "r"])
        assert arrived.wait(10)
        time.sleep(0.2)
        assert sorted(heard) == ["q", "r"]
    finally:
        listener.close()


def test_quarantine_lists_newest_first_with_why_and_when_in_pages(
    store: Store, clock: FakeClock
) -> None:
    for fingerprint, note in (("fp-a", "crash limit: job a"), ("fp-b", ""), ("fp-c", "by hand")):
        store.log.append(
            f"q-{fingerprint}", ANY_VERSION, [FingerprintQuarantined(fingerprint, note)]
        )
        clock.advance(1_000)
    store.log.append("q-fp-b", ANY_VERSION, [FingerprintReleased("fp-b")])

    first = store.reads.quarantine_page(1, None)
    assert [(row.fingerprint, row.note) for row in first.items] == [("fp-c", "by hand")]
    assert first.next_cursor is not None
    rest = store.reads.quarantine_page(10, first.next_cursor)
    assert [row.fingerprint for row in rest.items] == ["fp-a"]
    assert rest.next_cursor is None
    entry = store.reads.quarantine_entry("fp-a")
    assert entry is not None and entry.note == "crash limit: job a"
    assert entry.quarantined_at_ms == rest.items[0].quarantined_at_ms
    assert first.items[0].quarantined_at_ms - entry.quarantined_at_ms == 2_000
    assert store.reads.quarantine_entry("fp-b") is None
    assert store.reads.quarantine_entry("\x00") is None
    with pytest.raises(ValidationError, match="cursor"):
        store.reads.quarantine_page(10, "not-a-cursor")
    with pytest.raises(ValidationError, match="limit"):
        store.reads.quarantine_page(0, None)


def test_jobs_counted_by_queue_and_state_and_the_oldest_pending_per_queue(
    store: Store, clock: FakeClock
) -> None:
    assert store.reads.job_counts() == {}
    assert store.reads.oldest_pending() == {}
    now = clock.now_ms()
    _enqueue(store, "a", run_at_ms=now - 3_000)
    _enqueue(store, "b", run_at_ms=now - 7_000)
    _enqueue(store, "c", run_at_ms=now + 60_000)
    _enqueue(store, "later", queue="r", run_at_ms=now + 5_000)
    _enqueue(store, "running", queue="r", run_at_ms=now - 99_000)
    _claim(store, "running")
    _enqueue(store, "done", queue="s", run_at_ms=now - 50_000)
    store.log.append("job-done", 1, [JobFinished("done", JobState.COMPLETED)])
    assert store.reads.job_counts() == {
        ("q", "pending"): 3,
        ("r", "pending"): 1,
        ("r", "running"): 1,
        ("s", "completed"): 1,
    }
    # Running and finished jobs wait for nobody: only pending ones count.
    assert store.reads.oldest_pending() == {"q": now - 7_000, "r": now + 5_000}
