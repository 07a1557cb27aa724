"""Tick identity and attempt outcomes: one job per (schedule, tick), whatever happens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from structlog.testing import capture_logs

from headgate import EnqueueHook, Headgate, RuntimeConfig, TickContext
from headgate._domain.admission import AdmissionLimits
from headgate._domain.events import JobState
from headgate._domain.ids import tick_job_id, tick_unique_key
from headgate._domain.retention import RUNS_SHOWN
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import LeaseLost, NotFound, StoreError, StoreUnavailable, ValidationError
from headgate._runtime.tick_batch import TickProcessor
from headgate._store.port import NO_STREAM, Fence, LeaseHolder, Unit
from headgate.testing import FakeClock, finish_job
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, FaultyHeadgate, fire, jobs_for
from tests.store.builders import enqueued, schedule_defined

MINUTE = 60_000
TICK = START_MS + MINUTE


def _latest(hg: Headgate, schedule_id: str) -> tuple[str, str, str]:
    event = hg.schedules.enqueue_events(schedule_id, limit=1).events[0]
    return event.outcome, event.reason, event.job_id


@AND_MEMORY
def test_a_job_already_durable_for_the_tick_is_accepted_not_duplicated(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"a": 1})
    job_id = tick_job_id("s", TICK)
    # As if a crashed attempt had made the job durable and died before its record.
    same = enqueued(job_id, "k", "default", {"a": 1}, tick_unique_key("s", TICK), "s", TICK)
    hg._core.store.log.append(job_stream(job_id), NO_STREAM, [same])
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s") == ("enqueued", "accepted", job_id)
    assert len(hg._core.store.log.read_stream(job_stream(job_id))) == 1
    assert hg.schedules.get("s").next_run_ms == TICK + MINUTE
    assert hg.jobs.get(job_id).periodic_origin == ("s", TICK)


@AND_MEMORY
def test_a_live_job_holding_the_unique_key_deduplicates(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k")
    winner = hg.enqueue("other", unique_key=tick_unique_key("s", TICK))
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s") == ("deduplicated", "unique_key", winner.id)
    assert hg._core.store.log.read_stream(job_stream(tick_job_id("s", TICK))) == []
    assert hg.schedules.get("s").next_run_ms == TICK + MINUTE


@AND_MEMORY
def test_an_existing_id_with_other_content_is_an_id_conflict(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"a": 1})
    job_id = tick_job_id("s", TICK)
    other = enqueued(job_id, "k", "default", {"a": 2}, None, "s", TICK)
    hg._core.store.log.append(job_stream(job_id), NO_STREAM, [other])
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s") == ("deduplicated", "id_conflict", job_id)
    assert hg.jobs.get(job_id).payload == {"a": 2}


@AND_MEMORY
def test_a_stale_attempt_after_cleanup_still_cannot_duplicate(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k")
    stale_row = hg._core.store.reads.schedule("s")
    clock.advance(MINUTE)
    fire(hg)
    job_id = tick_job_id("s", TICK)
    finish_job(hg, job_id)
    for _ in range(RUNS_SHOWN):  # the schedule's newest runs keep their jobs: make it older
        clock.advance(MINUTE)
        fire(hg)
    clock.advance(2 * 86_400_000)
    hg.runtime.compact()
    assert hg._core.store.log.read_stream(job_stream(job_id)) == []  # the job is gone
    # A process that read the schedule before the advance tries the same tick now.
    assert stale_row is not None
    processor = TickProcessor(hg._core.store.log, FakeClock(TICK))
    report = processor.fire([stale_row], fence=None)
    assert report.changed_concurrently == ["s"] and report.recorded == []
    assert hg._core.store.log.read_stream(job_stream(job_id)) == []


@AND_MEMORY
def test_quarantine_skips_and_advances(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="poison", payload={"n": 1})
    hg.quarantine.add(hg.quarantine.fingerprint("poison", {"n": 1}), note="crashes workers")
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("skipped", "quarantined")
    assert hg.schedules.get("s").next_run_ms == TICK + MINUTE
    hg.quarantine.release(hg.quarantine.fingerprint("poison", {"n": 1}))
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("enqueued", "accepted")


@AND_MEMORY
@pytest.mark.parametrize(
    ("note", "message"),
    [
        (None, "note: must be a string, got NoneType"),
        ("n" * 256, "note: must be at most 255 characters, got 256"),
        ("a\x00b", r"note: must not contain .*; found U\+0000 \(a control character\) at index 1"),
        ("\ud800", r"note: must not contain .*; found U\+D800 \(a lone surrogate\) at index 0"),
    ],
)
def test_a_bad_quarantine_note_is_refused_and_nothing_quarantined(
    hg: Headgate, note: object, message: str
) -> None:
    fingerprint = hg.quarantine.fingerprint("poison", None)
    with pytest.raises(ValidationError, match=message):
        hg.quarantine.add(fingerprint, note)  # type: ignore[arg-type]
    with pytest.raises(NotFound, match="is not quarantined"):
        hg.quarantine.release(fingerprint)


@AND_MEMORY
def test_fingerprints_take_only_what_a_job_could_hold(hg: Headgate) -> None:
    with pytest.raises(ValidationError, match="payload: must be plain JSON"):
        hg.quarantine.fingerprint("k", float("nan"))
    with pytest.raises(ValidationError, match="kind: must be 1-128 characters"):
        hg.quarantine.fingerprint("", None)


@AND_MEMORY
def test_backpressure_fails_and_retries_with_capped_backoff(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    limits = AdmissionLimits(queue_limits={"q": 1})
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=3_600_000, limits=limits))
    blocker = hg.enqueue("blocker", queue="q")
    hg.schedules.put("s", spec="@every:60000", kind="k", queue="q")
    clock.advance(MINUTE)
    for _ in range(40):  # 40 s of fake time, one sweep per second
        fire(hg)
        clock.advance(1_000)
    events = hg.schedules.enqueue_events("s", limit=100).events
    assert {(e.outcome, e.reason) for e in events} == {("failed", "backpressure")}
    assert len(events) == 6  # retries after 1, 2, 4, 8, 16 s: the history is not flooded
    assert hg.schedules.get("s").next_run_ms == TICK
    finish_job(hg, blocker.id)
    clock.advance(40_000)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("enqueued", "accepted")


def test_an_oversized_payload_is_an_invalid_request(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate()
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"blob": "x" * 500})
    small = make_headgate(
        RuntimeConfig(lease_ttl_ms=60_000, limits=AdmissionLimits(max_payload_bytes=100))
    )
    clock.advance(MINUTE)
    fire(small)
    assert _latest(small, "s")[:2] == ("failed", "invalid_request")


@AND_MEMORY
def test_a_stored_spec_that_no_longer_parses_is_an_invalid_spec(
    hg: Headgate, clock: FakeClock
) -> None:
    broken = schedule_defined("s", "61 * * * *", "k", "default", None, "skip", 1, False, TICK)  # type: ignore[arg-type]
    hg._core.store.log.append(schedule_stream("s"), NO_STREAM, [broken])
    hg.schedules.put("fine", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("failed", "invalid_spec")
    assert _latest(hg, "fine")[:2] == ("enqueued", "accepted")


@AND_MEMORY
def test_a_store_error_on_one_schedule_does_not_fail_its_neighbours(
    faulty: FaultyHeadgate, clock: FakeClock
) -> None:
    hg, faults = faulty
    for name in ("a", "bad", "c"):
        hg.schedules.put(name, spec="@every:60000", kind="k")
    failed_once: list[bool] = []

    def failing(units: Sequence[Unit]) -> None:
        touches_bad_job = any(
            a.stream_id == job_stream(tick_job_id("bad", TICK)) for u in units for a in u
        )
        if touches_bad_job:
            failed_once.append(True)
            raise StoreError("simulated constraint failure")

    faults.before_append = failing
    clock.advance(MINUTE)
    fire(hg)
    assert failed_once
    assert _latest(hg, "a")[:2] == ("enqueued", "accepted")
    assert _latest(hg, "c")[:2] == ("enqueued", "accepted")
    assert _latest(hg, "bad")[:2] == ("failed", "store_error")
    assert hg.schedules.get("bad").next_run_ms == TICK


@AND_MEMORY
@pytest.mark.parametrize("outage", ["dropped_connection", "store_down"])
def test_an_unavailable_store_is_not_retried_schedule_by_schedule(
    faulty: FaultyHeadgate, clock: FakeClock, outage: str
) -> None:
    """A locked or unreachable store fails every schedule alike: the batch is retried
    once (a dropped connection), then left due; never one wait per schedule."""
    hg, faults = faulty
    for name in ("a", "b", "c"):
        hg.schedules.put(name, spec="@every:60000", kind="k")
    attempts: list[int] = []

    def unavailable(units: Sequence[Unit]) -> None:
        attempts.append(len(units))
        if outage == "store_down" or len(attempts) == 1:
            raise StoreUnavailable("writing to the store: store unavailable: database is locked")

    faults.before_append = unavailable
    clock.advance(MINUTE)
    rows = hg._core.store.reads.due_schedules(clock.now_ms(), 100)
    report = TickProcessor(hg._core.store.log, clock).fire(rows, fence=None)
    assert attempts == [3, 3], "the whole batch, twice"
    if outage == "store_down":
        assert sorted(report.unrecorded) == ["a", "b", "c"] and not report.recorded
        assert [hg.schedules.get(n).next_run_ms for n in "abc"] == [TICK] * 3  # still due
    else:
        assert len(report.recorded) == 3
        assert [_latest(hg, n)[:2] for n in "abc"] == [("enqueued", "accepted")] * 3


class RecordingHook(EnqueueHook):
    def __init__(self, fail_first: int = 0) -> None:
        self.before: list[TickContext] = []
        self.after: list[tuple[int, str, str]] = []
        self.fail_first = fail_first

    def before_enqueue(self, context: TickContext) -> None:
        self.before.append(context)
        if len(self.before) <= self.fail_first:
            raise RuntimeError("hook is broken (this text must not reach the audit record)")

    def after_enqueue(self, context, result) -> None:  # type: ignore[no-untyped-def]
        self.after.append((context.tick_ms, result.outcome, result.reason))


@AND_MEMORY
def test_hooks_receive_schedule_and_tick_context(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hook = RecordingHook()
    hg = make_headgate(hooks=[hook])
    hg.schedules.put(
        "s",
        spec="@every:60000",
        kind="k",
        payload={"team": 7},
        on_missed="backfill",
        backfill_max=2,
    )
    clock.advance(2 * MINUTE)
    fire(hg)
    assert [(c.schedule.id, c.tick_ms, c.job_id, c.attempt) for c in hook.before] == [
        ("s", TICK, tick_job_id("s", TICK), 1),
        ("s", TICK + MINUTE, tick_job_id("s", TICK + MINUTE), 1),
    ]
    assert hook.before[0].schedule.payload == {"team": 7}
    assert hook.after == [(TICK, "enqueued", "accepted"), (TICK + MINUTE, "enqueued", "accepted")]


@AND_MEMORY
def test_a_raising_hook_fails_the_attempt_and_a_retry_succeeds(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hook = RecordingHook(fail_first=1)
    hg = make_headgate(hooks=[hook])
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    fire(hg)
    event = hg.schedules.enqueue_events("s", limit=1).events[0]
    assert (event.outcome, event.reason) == ("failed", "hook_error")
    assert "broken" not in repr(event)
    with pytest.raises(NotFound):
        hg.jobs.get(event.job_id)  # a failed attempt creates no job
    clock.advance(1_000)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("enqueued", "accepted")
    assert hook.before[1].attempt == 2


@AND_MEMORY
def test_a_hook_raising_system_exit_only_fails_its_attempt(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Hooks are the host's code: not even SystemExit from one may stop the actors."""

    class Exiting(EnqueueHook):
        def before_enqueue(self, context: TickContext) -> None:
            raise SystemExit(3)

        def after_enqueue(self, context, result) -> None:  # type: ignore[no-untyped-def]
            raise SystemExit(4)

    hg = make_headgate(hooks=[Exiting()])
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("failed", "hook_error")
    clock.advance(1_000)
    fire(hg)  # the runtime still runs, and retries
    assert hg.running
    assert [e.outcome for e in hg.schedules.enqueue_events("s").events] == ["failed", "failed"]


@AND_MEMORY
def test_a_hook_cannot_change_what_is_stored(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    class Meddler(EnqueueHook):
        def before_enqueue(self, context: TickContext) -> None:
            context.schedule.payload["team"] = 999

    hg = make_headgate(hooks=[Meddler()])
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"team": 7})
    clock.advance(MINUTE)
    fire(hg)
    assert hg.jobs.get(tick_job_id("s", TICK)).payload == {"team": 7}


@AND_MEMORY
def test_every_tick_is_logged_with_its_identity(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"secret": "do-not-log"})
    clock.advance(MINUTE)
    with capture_logs() as logs:
        fire(hg)
    (line,) = [entry for entry in logs if entry["event"] == "enqueue attempt"]
    assert line["schedule_id"] == "s" and line["tick_ms"] == TICK
    assert line["job_id"] == tick_job_id("s", TICK)
    assert (line["outcome"], line["reason"]) == ("enqueued", "accepted")
    assert "do-not-log" not in repr(logs)


@AND_MEMORY
def test_finished_jobs_free_the_unique_key(hg: Headgate) -> None:
    job = hg.enqueue("k", unique_key="u1")
    finish_job(hg, job.id, "completed")
    assert hg.jobs.get(job.id).state == JobState.COMPLETED.value
    again = hg.enqueue("k", unique_key="u1")
    assert again.id != job.id


@AND_MEMORY
@pytest.mark.parametrize("taken_over", [True, False])
def test_fenced_writes_under_a_stale_term_are_refused(
    hg: Headgate, clock: FakeClock, taken_over: bool
) -> None:
    """A holder paused past its expiry wakes and tries to write a batch it had read:
    refused whether another process took the lease over or nobody did yet."""
    leases = hg._core.store.leases
    paused = leases.acquire("scheduler", LeaseHolder("paused", "host-a", 1), ttl_ms=MINUTE)
    assert paused is not None
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    row = hg._core.store.reads.schedule("s")  # current: only the fence can refuse it
    assert row is not None
    clock.advance(1)  # past the paused holder's expiry
    if taken_over:
        other = leases.acquire("scheduler", LeaseHolder("other", "host-b", 2), ttl_ms=MINUTE)
        assert other is not None and other.term == paused.term + 1
    with pytest.raises(LeaseLost):
        TickProcessor(hg._core.store.log, clock).fire([row], Fence("scheduler", paused.term))
    assert jobs_for(hg, "s") == []
    assert hg.schedules.enqueue_events("s").events == []


def test_a_schedule_that_cannot_be_planned_fails_alone(hg: Headgate, clock: FakeClock) -> None:
    from sqlalchemy import update

    from headgate._store.sql.schema import LIVE

    hg.schedules.put("odd", spec="@every:60000", kind="k")
    hg.schedules.put("fine", spec="@every:60000", kind="k")
    with hg._core.store.engine.begin() as connection:  # as if written by a newer Headgate
        connection.execute(
            update(LIVE.schedules)
            .where(LIVE.schedules.c.schedule_id == "odd")
            .values(on_missed="later")
        )
    clock.advance(MINUTE)
    fire(hg)
    assert _latest(hg, "odd")[:2] == ("failed", "invalid_request")
    assert _latest(hg, "fine")[:2] == ("enqueued", "accepted")


def test_writes_pause_while_projections_are_rebuilt(hg: Headgate, clock: FakeClock) -> None:
    from sqlalchemy import update

    from headgate._errors import ProjectionsRebuilding
    from headgate._store.sql.maintenance import rebuild
    from headgate._store.sql.schema import log_head, projection_checkpoints

    hg.schedules.put("s", spec="@every:60000", kind="k")
    with hg._core.store.engine.begin() as connection:  # an interrupted rebuild, as it leaves both
        connection.execute(
            update(projection_checkpoints)
            .where(projection_checkpoints.c.name == "jobs")
            .values(rebuilding=True)
        )
        connection.execute(update(log_head).values(rebuilding=True))
    clock.advance(MINUTE)
    hg.start()
    with pytest.raises(ProjectionsRebuilding, match="headgate projections rebuild"):
        hg.schedules.put("t", spec="@every:60000", kind="k")
    with pytest.raises(TimeoutError):
        hg.fire_due_ticks(timeout=1)  # paused, not spinning or writing
    assert hg.schedules.enqueue_events("s").events == []
    rebuild(hg._core.store)
    assert hg.fire_due_ticks()
    assert _latest(hg, "s")[:2] == ("enqueued", "accepted")


@AND_MEMORY
def test_the_end_of_the_calendar_is_a_clear_failure(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Year 9999: a schedule with no tick left records invalid_spec; a new one is refused."""
    last_minute = MAX_INSTANT_MS // MINUTE * MINUTE
    clock.set(last_minute - MINUTE)
    hg = make_headgate()
    hg.schedules.put("s", spec="@every:60000", kind="k")
    assert hg.schedules.get("s").next_run_ms == last_minute
    clock.set(last_minute)
    fire(hg)
    assert _latest(hg, "s")[:2] == ("failed", "invalid_spec")
    with pytest.raises(ValidationError, match="spec: no tick of '@every:60000' after"):
        hg.schedules.put("t", spec="@every:60000", kind="k")
