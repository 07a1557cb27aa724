"""A schedule's runs: what became of each tick's (and Enqueue now's) job, newest
first, and the schedules listed by health."""

from __future__ import annotations

import pytest

from headgate._domain.events import (
    JobAttemptFailed,
    JobCancelled,
    JobExpired,
    JobRetried,
    JobSucceeded,
)
from headgate._domain.schedule_health import HealthState
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import ValidationError
from headgate._store.port import ANY_VERSION, NO_STREAM, HealthFilter, Store
from headgate.testing import FakeClock
from tests.store.builders import create_schedule, defined, enqueue, enqueued, fire_tick

GRACE_MS = 10_000


def _settle(store: Store, job_id: str, *events: object) -> None:
    stream = job_stream(job_id)
    store.log.append(stream, store.log.stream_version(stream), list(events))  # type: ignore[arg-type]


def _succeeded(job_id: str, schedule_id: str = "nightly", started: int = 0) -> JobSucceeded:
    return JobSucceeded(job_id, 1, "w", started, schedule_id=schedule_id)


def _failed(
    job_id: str, retry_at_ms: int | None = None, schedule_id: str = "nightly"
) -> JobAttemptFailed:
    return JobAttemptFailed(
        job_id, 1, "w", 0, "ValueError", "m", retry_at_ms, schedule_id=schedule_id
    )


def _tick_job(schedule_id: str, tick_ms: int) -> str:
    return f"job-for-{schedule_id}-{tick_ms}"


def _outcomes(store: Store, schedule_id: str = "nightly") -> list[tuple[int | None, str]]:
    page = store.reads.schedule_runs(schedule_id, 100, None)
    return [(read.run.tick_ms, read.facts().outcome) for read in page.items]


class TestRuns:
    def test_each_tick_job_is_a_run_newest_first_with_what_became_of_it(
        self, store: Store, clock: FakeClock
    ) -> None:
        create_schedule(store, "nightly")
        for tick in (60_000, 120_000, 180_000, 240_000, 300_000):
            fire_tick(store, "nightly", tick)
        _settle(store, _tick_job("nightly", 60_000), _succeeded(_tick_job("nightly", 60_000)))
        _settle(store, _tick_job("nightly", 120_000), _failed(_tick_job("nightly", 120_000)))
        retry_at = clock.now_ms() + 5_000
        _settle(
            store, _tick_job("nightly", 180_000), _failed(_tick_job("nightly", 180_000), retry_at)
        )
        _settle(
            store,
            _tick_job("nightly", 240_000),
            JobExpired(_tick_job("nightly", 240_000), 250_000, "nightly"),
        )
        assert _outcomes(store) == [
            (300_000, "enqueued"),
            (240_000, "expired"),
            (180_000, "retrying"),
            (120_000, "failed"),
            (60_000, "succeeded"),
        ]
        failed = store.reads.schedule_runs("nightly", 100, None).items[3].run
        assert (failed.error_type, failed.attempts) == ("ValueError", 1)

    def test_a_run_reads_running_from_its_job_and_a_success_its_duration(
        self, store: Store, clock: FakeClock
    ) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        job_id = _tick_job("nightly", 60_000)
        with store.log.write() as transaction:
            claimed = transaction.claim({"default": 1}, {"report.build": 1}, "w", 10**13)
        assert [row.job_id for row in claimed] == [job_id]
        assert _outcomes(store) == [(60_000, "running")]
        started = clock.now_ms()
        clock.advance(1_500)
        _settle(store, job_id, _succeeded(job_id, started=started))
        (read,) = store.reads.schedule_runs("nightly", 100, None).items
        assert (read.facts().outcome, read.facts().duration_ms) == ("succeeded", 1_500)

    def test_an_operators_cancel_and_retry_change_the_run(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        job_id = _tick_job("nightly", 60_000)
        _settle(store, job_id, _failed(job_id))
        _settle(store, job_id, JobRetried(job_id, "nightly"))
        assert _outcomes(store) == [(60_000, "enqueued")]
        _settle(store, job_id, JobCancelled(job_id, "nightly"))
        assert _outcomes(store) == [(60_000, "cancelled")]

    def test_an_enqueue_now_is_a_manual_run_and_other_jobs_are_none(self, store: Store) -> None:
        create_schedule(store, "nightly")
        manual = enqueued("m1", "report.build", "default", {}, run_now_schedule_id="nightly")
        store.log.append(job_stream("m1"), NO_STREAM, [manual])
        enqueue(store, "plain")
        (read,) = store.reads.schedule_runs("nightly", 100, None).items
        assert (read.run.job_id, read.run.manual, read.run.tick_ms) == ("m1", True, None)
        assert store.reads.recent_runs(["nightly", "plain", "nobody"], 5).keys() == {"nightly"}

    def test_runs_page_by_cursor_and_show_the_newest_hundred(self, store: Store) -> None:
        create_schedule(store, "busy")
        for n in range(1, 106):
            fire_tick(store, "busy", n * 1_000, interval_ms=1_000)
        seen: list[int | None] = []
        cursor = None
        while True:
            page = store.reads.schedule_runs("busy", 30, cursor)
            seen.extend(read.run.tick_ms for read in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [n * 1_000 for n in range(105, 5, -1)]
        recent = store.reads.recent_runs(["busy"], 3)["busy"]
        assert [read.run.tick_ms for read in recent] == [105_000, 104_000, 103_000]

    def test_a_bad_cursor_or_limit_is_refused(self, store: Store) -> None:
        with pytest.raises(ValidationError, match="cursor"):
            store.reads.schedule_runs("nightly", 10, "not-a-cursor")
        with pytest.raises(ValidationError, match="limit"):
            store.reads.schedule_runs("nightly", 101, None)
        with pytest.raises(ValidationError, match="limit"):
            store.reads.recent_runs(["nightly"], 0)


class TestHealthFilter:
    def _listed(self, store: Store, state: HealthState, now_ms: int) -> list[str]:
        health = HealthFilter(state, now_ms, GRACE_MS)
        page = store.reads.schedules_page(50, None, None, health)
        ids = [row.schedule_id for row in page.items]
        assert store.reads.schedule_count(None, health) == len(ids)
        return ids

    def _ends(self, store: Store, schedule_id: str, tick_ms: int, event: object) -> None:
        _settle(store, _tick_job(schedule_id, tick_ms), event)

    def test_each_schedule_is_listed_under_its_one_state(
        self, store: Store, clock: FakeClock
    ) -> None:
        now = 1_000_000
        for schedule_id in ("failing", "late", "missing", "paused", "recovered", "ok"):
            store.log.append(
                schedule_stream(schedule_id), NO_STREAM, [defined(schedule_id, now + 60_000)]
            )
        for schedule_id in ("failing", "recovered", "ok"):
            fire_tick(store, schedule_id, now - 120_000, interval_ms=180_000 + 60_000)
        first = now - 120_000
        self._ends(store, "failing", first, _failed(_tick_job("failing", first), None, "failing"))
        self._ends(store, "ok", first, _succeeded(_tick_job("ok", first), "ok"))
        self._ends(
            store, "recovered", first, _failed(_tick_job("recovered", first), None, "recovered")
        )
        fire_tick(store, "recovered", now + 60_000, interval_ms=60_000)
        self._ends(
            store,
            "recovered",
            now + 60_000,
            _succeeded(_tick_job("recovered", now + 60_000), "recovered"),
        )
        fire_tick(store, "late", now - 2 * GRACE_MS, interval_ms=2 * GRACE_MS + 60_000)
        missing = defined("missing", now - 2 * GRACE_MS)
        store.log.append(schedule_stream("missing"), ANY_VERSION, [missing])
        paused = defined("paused", now - 2 * GRACE_MS, paused=True)
        store.log.append(schedule_stream("paused"), ANY_VERSION, [paused])
        assert self._listed(store, HealthState.FAILING, now) == ["failing"]
        assert self._listed(store, HealthState.LATE, now) == ["late"]
        assert self._listed(store, HealthState.MISSING, now) == ["missing"]
        assert self._listed(store, HealthState.PAUSED, now) == ["paused"]
        assert self._listed(store, HealthState.OK, now) == ["ok", "recovered"]
