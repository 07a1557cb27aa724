"""A projection's shortcuts (`changes`, `creates`) must agree with its fold (`apply`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headgate._domain.events import (
    EnqueueAttempted,
    JobAbandoned,
    JobAttemptFailed,
    JobCancelled,
    JobClaimed,
    JobFinished,
    JobQuarantined,
    JobReleased,
    JobRetried,
    JobState,
    JobSucceeded,
    NextRunAdvanced,
    Outcome,
    RecordedEvent,
    ScheduleDefined,
    ScheduleDeleted,
)
from headgate._projections import ENQUEUE_HISTORY, JOB_ATTEMPTS, JOBS, SCHEDULES
from tests.store.builders import enqueued, schedule_defined

ms = st.integers(0, 2**50)
definitions = st.builds(
    schedule_defined,
    schedule_id=st.just("s"),
    spec=st.just("@every:1000"),
    kind=st.just("k"),
    queue=st.just("q"),
    payload=st.none(),
    on_missed=st.sampled_from(["skip", "run_once", "backfill"]),
    backfill_max=st.integers(1, 1000),
    paused=st.booleans(),
    next_run_ms=ms,
    last_enqueued_ms=st.none() | ms,
    start_at_ms=st.none() | ms,
    end_at_ms=st.none() | ms,
    jitter_ms=st.integers(0, 3_600_000),
    due_at_ms=st.none() | ms,
    max_attempts=st.none() | st.integers(1, 10),
    timeout_ms=st.none() | ms,
)
later_events = st.one_of(
    st.builds(
        NextRunAdvanced,
        schedule_id=st.just("s"),
        next_run_ms=ms,
        last_enqueued_ms=st.none() | ms,
        due_at_ms=st.none() | ms,
        finished=st.booleans(),
    ),
    st.builds(
        EnqueueAttempted,
        schedule_id=st.just("s"),
        tick_ms=ms,
        job_id=st.just("j"),
        outcome=st.sampled_from(list(Outcome)),
        reason=st.sampled_from(["accepted", "backpressure", "hook_error"]),
        attempt=st.integers(1, 50),
        retry_at_ms=st.none() | ms,
        next_run_ms=st.none() | ms,
        last_enqueued_ms=st.none() | ms,
        due_at_ms=st.none() | ms,
        finished=st.booleans(),
    ),
    st.just(ScheduleDeleted("s")),
)


@given(definition=definitions, events=st.lists(later_events, min_size=1, max_size=8))
def test_changes_agree_with_apply(definition: ScheduleDefined, events: list[object]) -> None:
    row = SCHEDULES.apply(None, RecordedEvent(1, "schedule-s", 1, 10, definition))
    assert row is not None and SCHEDULES.changes is not None
    for offset, event in enumerate(events, start=2):
        recorded = RecordedEvent(offset, "schedule-s", offset, 10 + offset, event)  # type: ignore[arg-type]
        folded = SCHEDULES.apply(row, recorded)
        delta = SCHEDULES.changes(recorded)
        if delta is not None:
            assert folded == replace(row, **delta)
        row = folded
        assert row is not None


def _attempt(outcome: Outcome, **fields: object) -> EnqueueAttempted:
    return EnqueueAttempted("s", 60_000, "j", outcome, "r", **fields)  # type: ignore[arg-type]


FAILED, ENQUEUED = Outcome.FAILED, Outcome.ENQUEUED
WORKED_EXAMPLES = {
    "a tick enqueued advances": (
        [_attempt(ENQUEUED, next_run_ms=120_000, last_enqueued_ms=60_000)],
        (120_000, 120_000, 0, 60_000, False),
    ),
    "a skipped tick advances without enqueuing": (
        [_attempt(Outcome.SKIPPED, next_run_ms=120_000, last_enqueued_ms=None)],
        (120_000, 120_000, 0, None, False),
    ),
    "a failure keeps the tick and is due at its retry": (
        [_attempt(FAILED, attempt=1, retry_at_ms=61_000, next_run_ms=60_000)],
        (60_000, 61_000, 1, None, False),
    ),
    "two failures, then the tick succeeds": (
        [
            _attempt(FAILED, attempt=1, retry_at_ms=61_000, next_run_ms=60_000),
            _attempt(FAILED, attempt=2, retry_at_ms=63_000, next_run_ms=60_000),
            _attempt(ENQUEUED, next_run_ms=120_000, last_enqueued_ms=60_000),
        ],
        (120_000, 120_000, 0, 60_000, False),
    ),
    "a failure without a retry time keeps the due time it had": (
        [
            _attempt(FAILED, attempt=1, retry_at_ms=61_000, next_run_ms=60_000),
            _attempt(FAILED, attempt=2, next_run_ms=60_000),
        ],
        (60_000, 61_000, 2, None, False),
    ),
    "a v1 attempt says nothing of next_run; its own advance followed": (
        [_attempt(ENQUEUED), NextRunAdvanced("s", 120_000, 60_000)],
        (120_000, 120_000, 0, 60_000, False),
    ),
    "a v1 failure is due at its retry": (
        [_attempt(FAILED, attempt=1, retry_at_ms=61_000)],
        (60_000, 61_000, 1, None, False),
    ),
    "a jittered tick's successor is due at its own instant": (
        [_attempt(ENQUEUED, next_run_ms=120_000, last_enqueued_ms=60_000, due_at_ms=120_700)],
        (120_000, 120_700, 0, 60_000, False),
    ),
    "a failure of a jittered tick is due at its retry": (
        [_attempt(FAILED, attempt=1, retry_at_ms=61_900, next_run_ms=60_000, due_at_ms=60_900)],
        (60_000, 61_900, 1, None, False),
    ),
    "a realignment says when its tick is due": (
        [NextRunAdvanced("s", 180_000, None, due_at_ms=180_300)],
        (180_000, 180_300, 0, None, False),
    ),
    "a deletion keeps where the schedule stood": (
        [
            _attempt(ENQUEUED, next_run_ms=120_000, last_enqueued_ms=60_000),
            ScheduleDeleted("s"),
        ],
        (120_000, 120_000, 0, 60_000, True),
    ),
}


@pytest.mark.parametrize(("events", "stands"), WORKED_EXAMPLES.values(), ids=list(WORKED_EXAMPLES))
def test_the_schedule_row_is_where_the_events_left_it(
    events: list[object], stands: tuple[object, ...]
) -> None:
    """(next_run_ms, due_at_ms, failures, last_enqueued_ms, deleted) after a
    definition at next_run_ms 60000 and then these events."""
    definition = schedule_defined("s", "@every:60000", "k", "q", None, "skip", 1, False, 60_000)  # type: ignore[arg-type]
    row = SCHEDULES.apply(None, RecordedEvent(1, "schedule-s", 1, 10, definition))
    for offset, event in enumerate(events, start=2):
        row = SCHEDULES.apply(row, RecordedEvent(offset, "schedule-s", offset, 10, event))  # type: ignore[arg-type]
    assert row is not None
    assert (row.next_run_ms, row.due_at_ms, row.failures, row.last_enqueued_ms, row.deleted) == (
        stands
    )
    assert row.version == len(events) + 1


def test_an_attempt_past_the_end_finishes_the_schedule_and_a_definition_can_reopen_it() -> None:
    definition = schedule_defined(
        "s",
        "@every:60000",
        "k",
        "q",
        None,
        "skip",
        1,
        False,
        60_000,
        end_at_ms=100_000,  # type: ignore[arg-type]
    )
    row = SCHEDULES.apply(None, RecordedEvent(1, "schedule-s", 1, 10, definition))
    assert row is not None and not row.finished and row.end_at_ms == 100_000
    last = _attempt(ENQUEUED, next_run_ms=120_000, last_enqueued_ms=60_000, finished=True)
    row = SCHEDULES.apply(row, RecordedEvent(2, "schedule-s", 2, 10, last))
    assert row is not None and row.finished and row.next_run_ms == 120_000
    later_end = replace(
        definition,
        next_run_ms=120_000,
        definition=definition.definition.restored_with({"end_at_ms": 200_000}),
    )
    row = SCHEDULES.apply(row, RecordedEvent(3, "schedule-s", 3, 10, later_end))
    assert row is not None and not row.finished
    ended = replace(definition, next_run_ms=120_000)
    row = SCHEDULES.apply(row, RecordedEvent(4, "schedule-s", 4, 10, ended))
    assert row is not None and row.finished


job_events = st.builds(
    enqueued,
    job_id=st.text(min_size=1),
    kind=st.text(min_size=1),
    queue=st.text(min_size=1),
    payload=st.none() | st.dictionaries(st.text(), st.integers() | st.text(), max_size=3),
    unique_key=st.none() | st.text(),
) | st.builds(
    enqueued,
    job_id=st.text(min_size=1),
    kind=st.just("k"),
    queue=st.just("default"),
    payload=st.none(),
    unique_key=st.text(),
    periodic_schedule_id=st.text(),
    periodic_tick_ms=ms,
)
creating_events = st.one_of(
    job_events,
    definitions,
    later_events,
    st.builds(JobFinished, st.text(), st.sampled_from(list(JobState))),
)


@given(
    event=creating_events,
    position=st.integers(1, 2**40),
    version=st.integers(1, 3),
    recorded_at=ms,
)
def test_creates_agrees_with_apply(
    event: object, position: int, version: int, recorded_at: int
) -> None:
    recorded = RecordedEvent(position, "stream", version, recorded_at, event)  # type: ignore[arg-type]
    for projection in (JOBS, ENQUEUE_HISTORY, SCHEDULES):
        assert projection.creates is not None
        values = projection.creates(recorded)
        if values is not None:
            assert projection.apply(None, recorded) == projection.row_type(**values)


job_ids = st.just("j")
job_lifecycle = st.one_of(
    st.builds(JobClaimed, job_ids, st.text(max_size=5), st.integers(1, 30), ms),
    st.builds(
        JobSucceeded,
        job_ids,
        st.integers(1, 30),
        st.text(max_size=5),
        ms,
        st.none() | st.integers() | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    ),
    st.builds(
        JobAttemptFailed,
        job_ids,
        st.integers(1, 30),
        st.text(max_size=5),
        ms,
        st.text(max_size=10),
        st.none() | st.text(max_size=10),
        st.none() | ms,
        st.booleans(),
    ),
    st.builds(JobReleased, job_ids, st.text(max_size=5)),
    st.builds(
        JobAbandoned,
        job_ids,
        st.text(max_size=5),
        st.integers(1, 5),
        st.none() | st.integers(1, 30),
        st.none() | ms,
    ),
    st.builds(
        JobQuarantined,
        job_ids,
        st.text(max_size=5),
        st.integers(1, 5),
        st.none() | st.integers(1, 30),
        st.none() | ms,
    ),
    st.builds(JobCancelled, job_ids),
    st.builds(JobRetried, job_ids),
    st.builds(JobFinished, job_ids, st.sampled_from(list(JobState))),
)


@given(events=st.lists(job_lifecycle, min_size=1, max_size=8), run_at=st.none() | ms)
def test_job_changes_agree_with_apply(events: list[object], run_at: int | None) -> None:
    """Every event after a job's first says which columns it sets, whatever the row held."""
    first = enqueued("j", "k", "q", {"n": 1}, "key", None, None, run_at, 5, 1_000)
    row = JOBS.apply(None, RecordedEvent(1, "job-j", 1, 10, first))
    assert row is not None and JOBS.changes is not None
    for offset, event in enumerate(events, start=2):
        recorded = RecordedEvent(offset, "job-j", offset, 10 + offset, event)  # type: ignore[arg-type]
        delta = JOBS.changes(recorded)
        assert delta is not None
        folded = JOBS.apply(row, recorded)
        assert folded == replace(row, **delta)
        assert folded is not None and folded.version == offset
        row = folded


@given(event=job_lifecycle, position=st.integers(1, 2**40), version=st.integers(2, 2**20))
def test_a_job_rows_changes_do_not_depend_on_the_events_position(
    event: object, position: int, version: int
) -> None:
    """An attempt's end is folded into its job row before its event is given a
    position (`SqlWriteTransaction._append_on_job_rows`), from what `changes`
    makes of it at position 0: the same columns as at its real position."""
    assert JOBS.changes is not None
    unplaced = RecordedEvent(0, "job-j", version, 10, event)  # type: ignore[arg-type]
    placed = RecordedEvent(position, "job-j", version, 10, event)  # type: ignore[arg-type]
    assert JOBS.key(unplaced) == JOBS.key(placed)
    assert JOBS.changes(unplaced) == JOBS.changes(placed)


@given(event=job_lifecycle, position=st.integers(1, 2**40), recorded_at=ms)
def test_job_attempt_rows_are_what_apply_makes(
    event: object, position: int, recorded_at: int
) -> None:
    recorded = RecordedEvent(position, "job-j", 2, recorded_at, event)  # type: ignore[arg-type]
    assert JOB_ATTEMPTS.creates is not None
    values = JOB_ATTEMPTS.creates(recorded)
    if values is not None:
        assert JOB_ATTEMPTS.apply(None, recorded) == JOB_ATTEMPTS.row_type(**values)
        assert values["event_id"] == position and values["ended_at_ms"] == recorded_at


JOB_WORKED_EXAMPLES = {
    "claimed, then it succeeds": (
        [JobClaimed("j", "w", 1, 900), JobSucceeded("j", 1, "w", 100, {"ok": True})],
        ("completed", 1, 0, None, '{"ok":true}'),
    ),
    "a failed attempt waits for its retry": (
        [JobClaimed("j", "w", 1, 900), JobAttemptFailed("j", 1, "w", 100, "E", "m", 5_000)],
        ("pending", 1, 0, None, None),
    ),
    "out of attempts, it has failed": (
        [JobClaimed("j", "w", 1, 900), JobAttemptFailed("j", 1, "w", 100, "E", "m", None)],
        ("failed", 1, 0, None, None),
    ),
    "a crash counts apart from attempts": (
        [JobClaimed("j", "w", 1, 900), JobAbandoned("j", "w", 1), JobClaimed("j", "v", 1, 950)],
        ("running", 0, 1, "v", None),
    ),
    "a release counts neither": (
        [JobClaimed("j", "w", 1, 900), JobReleased("j", "w")],
        ("pending", 0, 0, None, None),
    ),
    "a retry resets the counts": (
        [
            JobClaimed("j", "w", 1, 900),
            JobAbandoned("j", "w", 3),
            JobQuarantined("j", "fp", 3),
            JobRetried("j"),
        ],
        ("pending", 0, 0, None, None),
    ),
}


@pytest.mark.parametrize(
    ("events", "stands"), JOB_WORKED_EXAMPLES.values(), ids=list(JOB_WORKED_EXAMPLES)
)
def test_the_job_row_is_where_the_events_left_it(
    events: list[object], stands: tuple[object, ...]
) -> None:
    """(state, attempts, crash_count, worker_id, result) after these events."""
    row = JOBS.apply(None, RecordedEvent(1, "job-j", 1, 10, enqueued("j", "k", "q", None)))
    for offset, event in enumerate(events, start=2):
        row = JOBS.apply(row, RecordedEvent(offset, "job-j", offset, 10, event))  # type: ignore[arg-type]
    assert row is not None
    assert (row.state, row.attempts, row.crash_count, row.worker_id, row.result) == stands


JOB_ATTEMPT_ROWS = {
    "a crash names the attempt it ended and when that was claimed": (
        JobAbandoned("j", "w", 1, attempt=2, claimed_at_ms=500),
        (2, "crashed", "w", 500),
    ),
    "a crash recorded before it said so": (JobAbandoned("j", "w", 1), (0, "crashed", "w", None)),
    "the crash that quarantines the job": (
        JobQuarantined("j", "fp", 3, attempt=1, claimed_at_ms=700),
        (1, "quarantined", None, 700),
    ),
    "a job held with its fingerprint while it waited": (
        JobQuarantined("j", "fp", 0),
        (0, "quarantined", None, None),
    ),
    "an operator's retry": (JobRetried("j"), (0, "retried", None, None)),
}


@pytest.mark.parametrize(("event", "row"), JOB_ATTEMPT_ROWS.values(), ids=list(JOB_ATTEMPT_ROWS))
def test_the_attempt_row_each_end_makes(event: object, row: tuple[object, ...]) -> None:
    """(attempt, outcome, worker_id, started_at_ms); ended when the event was recorded."""
    made = JOB_ATTEMPTS.apply(None, RecordedEvent(9, "job-j", 3, 1_000, event))  # type: ignore[arg-type]
    assert made is not None and made.ended_at_ms == 1_000
    assert (made.attempt, made.outcome, made.worker_id, made.started_at_ms) == row
