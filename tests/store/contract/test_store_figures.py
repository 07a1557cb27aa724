"""Store figures: the aggregates metrics read at scrape time."""

from __future__ import annotations

from headgate._domain.events import (
    FingerprintQuarantined,
    FingerprintReleased,
    JobFinished,
    JobState,
    ScheduleDeleted,
)
from headgate._store.port import NO_STREAM, Store
from headgate.testing import FakeClock
from tests.store.builders import claim, create_schedule, defined, enqueue


def test_jobs_counted_by_queue_and_state_and_the_oldest_pending_per_queue(
    store: Store, clock: FakeClock
) -> None:
    assert store.reads.job_counts() == {}
    assert store.reads.oldest_pending() == {}
    now = clock.now_ms()
    enqueue(store, "a", run_at_ms=now - 3_000)
    enqueue(store, "b", run_at_ms=now - 7_000)
    enqueue(store, "c", run_at_ms=now + 60_000)
    enqueue(store, "later", queue="r", run_at_ms=now + 5_000)
    enqueue(store, "running", queue="r", run_at_ms=now - 99_000)
    claim(store, "running")
    enqueue(store, "done", queue="s", run_at_ms=now - 50_000)
    store.log.append("job-done", 1, [JobFinished("done", JobState.COMPLETED)])
    assert store.reads.job_counts() == {
        ("q", "pending"): 3,
        ("r", "pending"): 1,
        ("r", "running"): 1,
        ("s", "completed"): 1,
    }
    # Running and finished jobs wait for nobody: only pending ones count.
    assert store.reads.oldest_pending() == {"q": now - 7_000, "r": now + 5_000}


def test_the_due_backlog_and_the_quarantined_count(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    assert (store.reads.due_count(now), store.reads.quarantined_count()) == (0, 0)
    create_schedule(store, "due", next_run_ms=now - 1_000)
    create_schedule(store, "due-now", next_run_ms=now)
    create_schedule(store, "later", next_run_ms=now + 1_000)
    store.log.append("schedule-paused", NO_STREAM, [defined("paused", now - 1_000, paused=True)])
    create_schedule(store, "deleted", next_run_ms=now - 1_000)
    store.log.append("schedule-deleted", 1, [ScheduleDeleted("deleted")])
    assert store.reads.due_count(now) == 2
    assert store.reads.due_count(now + 1_000) == 3
    for fingerprint in ("f1", "f2"):
        store.log.append(
            f"quarantine-{fingerprint}", NO_STREAM, [FingerprintQuarantined(fingerprint)]
        )
    store.log.append("quarantine-f2", 1, [FingerprintReleased("f2")])
    assert store.reads.quarantined_count() == 1
