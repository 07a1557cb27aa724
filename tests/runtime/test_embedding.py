"""The embedded API as a host service uses it."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select

from headgate import Headgate, NotFound, RuntimeConfig, ValidationError
from headgate._domain.admission import AdmissionLimits
from headgate._domain.ids import tick_job_id
from headgate._errors import AdmissionRejected, DuplicateJob, StoreUnavailable, TickHasJob
from headgate._store.port import NO_STREAM, StreamAppend
from headgate._store.sql.engine import create_store_engine
from headgate._store.sql.schema import events
from headgate.testing import FakeClock, finish_job
from tests.runtime.conftest import START_MS, fire, jobs_for
from tests.store.builders import schedule_defined

MINUTE = 60_000


def _nested(depth: int) -> list[object]:
    payload: list[object] = []
    for _ in range(depth):
        payload = [payload]
    return payload


def _event_count(hg: Headgate) -> int:
    with hg._core.store.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(events)).scalar_one())


class TestPutSchedule:
    def test_an_unchanged_spec_keeps_its_phase(self, hg: Headgate, clock: FakeClock) -> None:
        first = hg.schedules.put("s", spec="@every:3600000", kind="k", payload={"v": 1})
        clock.advance(20 * MINUTE)
        again = hg.schedules.put("s", spec="@every:3600000", kind="k", payload={"v": 2})
        assert again.next_run_ms == first.next_run_ms
        assert again.payload == {"v": 2}

    def test_a_changed_spec_re_anchors_after_now(self, hg: Headgate, clock: FakeClock) -> None:
        hg.schedules.put("s", spec="@every:3600000", kind="k")
        clock.advance(20 * MINUTE)
        changed = hg.schedules.put("s", spec="*/15 * * * *", kind="k")
        assert changed.next_run_ms == START_MS + 30 * MINUTE

    @pytest.mark.parametrize(
        "respelled",
        ["0 9 * * MON-FRI", "00 09 * * 1-5", "0 0 9 * * 1-5", "CRON_TZ=Etc/UTC 0 9 * * 1-5"],
    )
    def test_a_respelled_spec_keeps_its_phase(
        self, hg: Headgate, clock: FakeClock, respelled: str
    ) -> None:
        """A deploy re-putting the same schedule, spelled differently, must not lose the
        run missed while the scheduler was down (2024-01-01 is a Monday)."""
        first = hg.schedules.put("s", spec="0 9 * * 1-5", kind="k", on_missed="run_once")
        clock.set(first.next_run_ms + 5 * MINUTE)
        again = hg.schedules.put("s", spec=respelled, kind="k", on_missed="run_once")
        assert again.next_run_ms == first.next_run_ms
        fire(hg)
        assert jobs_for(hg, "s") == [first.next_run_ms]

    def test_a_different_day_rule_is_a_change(self, hg: Headgate, clock: FakeClock) -> None:
        """`* * 1 * 1-5` ORs the day fields; `* * 1 * *` does not: not the same ticks."""
        first = hg.schedules.put("s", spec="0 9 1 * *", kind="k")
        clock.set(first.next_run_ms + 5 * MINUTE)
        again = hg.schedules.put("s", spec="0 9 1 * 0-6", kind="k")
        assert again.next_run_ms > clock.now_ms()

    def test_an_identical_put_writes_nothing(self, hg: Headgate) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="k", payload={"a": [1]})
        before = _event_count(hg)
        hg.schedules.put("s", spec="0  9 * * *", kind="k", payload={"a": [1]})
        assert _event_count(hg) == before

    @pytest.mark.parametrize(
        ("fields", "message"),
        [
            ({"spec": "61 * * * *"}, "spec: bad cron '61 * * * *': minute 61 out of range 0-59"),
            ({"spec": "CRON_TZ=Europe/Paris @every:1000"}, "rejects a CRON_TZ prefix"),
            ({"kind": ""}, "kind: must be 1-128 characters, got 0"),
            (
                {"on_missed": "later"},
                "on_missed: must be one of skip, run_once, backfill, got 'later'",
            ),
            ({"backfill_max": 0}, "backfill_max: must be between 1 and 1000, got 0"),
            ({"queue": "has space"}, "queue: may contain only letters"),
            ({"payload": {"x": float("nan")}}, "payload: must be plain JSON"),
            ({"payload": {1: "one"}}, "payload: object keys must be strings, got int 1"),
            ({"payload": _nested(100_000)}, "payload: is nested too deeply"),
            ({"paused": "yes"}, "paused: must be true or false, got 'yes'"),
        ],
    )
    def test_bad_input_raises_and_changes_nothing(
        self, hg: Headgate, fields: dict[str, object], message: str
    ) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="k")
        before = _event_count(hg)
        arguments: dict[str, object] = {"spec": "0 9 * * *", "kind": "k", **fields}
        with pytest.raises(
            ValidationError,
            match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*"),
        ):
            hg.schedules.put("s", **arguments)  # type: ignore[arg-type]
        assert _event_count(hg) == before
        assert hg.schedules.get("s").spec == "0 9 * * *"

    def test_bad_ids_are_rejected(self, hg: Headgate) -> None:
        with pytest.raises(ValidationError, match="id: must be 1-128 characters"):
            hg.schedules.put("x" * 129, spec="0 9 * * *", kind="k")

    def test_delete_keeps_history_and_hides_the_schedule(
        self, hg: Headgate, clock: FakeClock
    ) -> None:
        hg.schedules.put("s", spec="@every:60000", kind="k")
        clock.advance(MINUTE)
        fire(hg)
        hg.schedules.delete("s")
        with pytest.raises(NotFound):
            hg.schedules.get("s")
        with pytest.raises(NotFound):
            hg.schedules.delete("s")
        assert jobs_for(hg, "s") == [START_MS + MINUTE]
        clock.advance(MINUTE)
        fire(hg)
        assert jobs_for(hg, "s") == [START_MS + MINUTE]

    def test_a_paused_schedule_does_not_fire(self, hg: Headgate, clock: FakeClock) -> None:
        hg.schedules.put("s", spec="@every:60000", kind="k", paused=True)
        clock.advance(5 * MINUTE)
        fire(hg)
        assert jobs_for(hg, "s") == []

    def test_listing_pages_through_every_schedule(self, hg: Headgate) -> None:
        for n in range(7):
            hg.schedules.put(f"s{n}", spec="@every:60000", kind="k")
        seen, cursor = [], None
        while True:
            page = hg.schedules.list(limit=3, cursor=cursor)
            seen += [s.id for s in page.schedules]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == [f"s{n}" for n in range(7)]


class TestRunNow:
    def test_the_same_key_twice_makes_one_job(self, hg: Headgate) -> None:
        schedule = hg.schedules.put("s", spec="0 9 * * *", kind="report", payload={"team": 7})
        first = hg.schedules.enqueue_now("s", idempotency_key="click-1")
        second = hg.schedules.enqueue_now("s", idempotency_key="click-1")
        assert first.job_id == second.job_id
        assert (first.replayed, second.replayed) == (False, True)
        job = hg.jobs.get(first.job_id)
        assert (job.kind, job.payload, job.periodic_origin) == ("report", {"team": 7}, None)
        assert hg.schedules.get("s").next_run_ms == schedule.next_run_ms
        assert hg.schedules.enqueue_events("s").events == []

    def test_different_keys_make_two_jobs(self, hg: Headgate) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="k")
        assert (
            hg.schedules.enqueue_now("s", "a").job_id != hg.schedules.enqueue_now("s", "b").job_id
        )

    def test_concurrent_double_click_makes_one_job(self, hg: Headgate) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="k")
        results: list[object] = []
        threads = [
            threading.Thread(target=lambda: results.append(hg.schedules.enqueue_now("s", "dbl")))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({r.job_id for r in results}) == 1  # type: ignore[attr-defined]
        assert sum(not r.replayed for r in results) == 1  # type: ignore[attr-defined]

    def test_keys_outlive_24_hours_and_the_schedule(self, hg: Headgate, clock: FakeClock) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="k")
        first = hg.schedules.enqueue_now("s", "k1")
        finish_job(hg, first.job_id)
        hg.schedules.delete("s")
        clock.advance(23 * 3_600_000)
        hg.runtime.compact()
        clock.advance(2 * 3_600_000)
        hg.runtime.compact()
        assert hg.schedules.enqueue_now("s", "k1") == (first.job_id, True)

    def test_it_goes_through_the_admission_gate(self, hg: Headgate) -> None:
        hg.schedules.put("s", spec="0 9 * * *", kind="poison")
        hg.quarantine.add(hg.quarantine.fingerprint("poison", None))
        with pytest.raises(AdmissionRejected, match="quarantined"):
            hg.schedules.enqueue_now("s", "k1")
        with pytest.raises(NotFound):
            hg.schedules.enqueue_now("missing", "k1")
        with pytest.raises(ValidationError, match="Idempotency-Key"):
            hg.schedules.enqueue_now("s", "")

    def test_it_meets_todays_payload_limit(
        self, make_headgate: Callable[..., Headgate], clock: FakeClock
    ) -> None:
        """A schedule stored under a larger limit: its automatic ticks fail
        invalid_request, and Enqueue now is refused the same way."""
        make_headgate().schedules.put("s", spec="@every:60000", kind="k", payload="x" * 2000)
        strict = make_headgate(RuntimeConfig(limits=AdmissionLimits(max_payload_bytes=1024)))
        before = _event_count(strict)
        with pytest.raises(ValidationError, match="payload: is 2002 bytes as JSON; the limit is"):
            strict.schedules.enqueue_now("s", "k1")
        assert _event_count(strict) == before
        clock.advance(MINUTE)
        fire(strict)
        (attempt,) = strict.schedules.enqueue_events("s").events
        assert (attempt.outcome, attempt.reason) == ("failed", "invalid_request")


class TestOrdinaryJobs:
    def test_an_ordinary_job_has_no_origin(self, hg: Headgate) -> None:
        job = hg.enqueue("email.send", {"to": "a@b"})
        assert hg.jobs.get(job.id).periodic_origin is None

    def test_origin_needs_both_fields(self, hg: Headgate) -> None:
        with pytest.raises(
            ValidationError, match="periodic_origin: needs both schedule_id and tick_ms"
        ):
            hg.enqueue("k", periodic_origin={"schedule_id": "s"})
        hg.schedules.put("s", spec="@every:60000", kind="k")
        job = hg.enqueue("k", periodic_origin={"schedule_id": "s", "tick_ms": 5})
        assert job.periodic_origin == ("s", 5)

    def test_origin_tick_must_be_a_calendar_instant(self, hg: Headgate) -> None:
        with pytest.raises(ValidationError, match=r"periodic_origin\.tick_ms: must be an integer"):
            hg.enqueue("k", periodic_origin={"schedule_id": "s", "tick_ms": 2**62})
        with pytest.raises(ValidationError, match=r"periodic_origin\.tick_ms"):
            hg.enqueue("k", periodic_origin={"schedule_id": "s", "tick_ms": 10**30})

    def test_an_origin_must_name_a_live_schedule(self, hg: Headgate) -> None:
        before = _event_count(hg)
        with pytest.raises(
            ValidationError, match=r"periodic_origin\.schedule_id: no schedule 'ghost'"
        ):
            hg.enqueue("k", periodic_origin=("ghost", 5))
        hg.schedules.put("gone", spec="@every:60000", kind="k")
        hg.schedules.delete("gone")
        with pytest.raises(ValidationError, match=r"periodic_origin\.schedule_id: no schedule"):
            hg.enqueue("k", periodic_origin=("gone", 5))
        assert _event_count(hg) == before + 2  # the schedule's definition and deletion only

    def test_a_fired_tick_keeps_its_one_job(self, hg: Headgate, clock: FakeClock) -> None:
        """An enqueue naming a tick the scheduler fired is refused with the tick's job,
        while it is pending and once it has finished: never a second row."""
        schedule = hg.schedules.put("s", spec="@every:60000", kind="k", payload={"n": 1})
        tick = schedule.next_run_ms
        clock.set(tick)
        fire(hg)
        tick_job = tick_job_id("s", tick)
        before = _event_count(hg)
        for finish in (True, False):
            with pytest.raises(TickHasJob) as caught:
                hg.enqueue("other", {"n": 2}, periodic_origin=("s", tick))
            assert caught.value.job_id == tick_job  # what a DuplicateJob handler reads
            assert isinstance(caught.value, DuplicateJob)
            assert (
                str(caught.value) == f"tick {tick} of schedule 's' already has its job {tick_job}"
            )
            if finish:
                finish_job(hg, tick_job, "completed")
        assert _event_count(hg) == before + 1  # the finish, nothing of the enqueues
        assert jobs_for(hg, "s") == [tick]

    def test_a_tick_still_to_come_is_the_schedulers(self, hg: Headgate, clock: FakeClock) -> None:
        schedule = hg.schedules.put("s", spec="@every:60000", kind="k", payload={"n": 1})
        tick = schedule.next_run_ms
        with pytest.raises(
            ValidationError, match=r"periodic_origin\.tick_ms: tick .* is not before"
        ):
            hg.enqueue("k", periodic_origin=("s", tick))
        with pytest.raises(ValidationError, match=r"periodic_origin\.tick_ms"):
            hg.enqueue("k", periodic_origin=("s", tick + 10 * MINUTE))
        clock.set(tick)
        fire(hg)
        (attempt,) = hg.schedules.enqueue_events("s").events
        assert (attempt.outcome, attempt.job_id) == ("enqueued", tick_job_id("s", tick))
        assert hg.jobs.get(attempt.job_id).payload == {"n": 1}  # the schedule's own job

    def test_a_passed_tick_without_a_job_takes_the_ticks_identity(
        self, hg: Headgate, clock: FakeClock
    ) -> None:
        """A tick the scheduler skipped (missed-run policy skip) may be credited by
        hand, once: the job gets the tick's id and unique key."""
        schedule = hg.schedules.put("s", spec="@every:60000", kind="k", on_missed="skip")
        skipped = schedule.next_run_ms
        clock.set(skipped + 2 * MINUTE)
        fire(hg)  # fires only the latest due tick
        assert jobs_for(hg, "s") == [skipped + 2 * MINUTE]
        job = hg.enqueue("k", {"by": "hand"}, periodic_origin=("s", skipped))
        assert job.id == tick_job_id("s", skipped)
        assert (job.periodic_origin, job.unique_key) == (("s", skipped), f"periodic:s:{skipped}")
        with pytest.raises(TickHasJob) as caught:
            hg.enqueue("k", {"by": "hand"}, periodic_origin=("s", skipped))
        assert caught.value.job_id == job.id
        with pytest.raises(ValidationError, match=r"unique_key: a job with a periodic_origin"):
            hg.enqueue("k", unique_key="mine", periodic_origin=("s", skipped + MINUTE))
        assert jobs_for(hg, "s") == [skipped, skipped + 2 * MINUTE]

    def test_a_held_unique_key_is_a_duplicate(self, hg: Headgate) -> None:
        first = hg.enqueue("k", unique_key="u")
        with pytest.raises(DuplicateJob) as caught:
            hg.enqueue("k", unique_key="u")
        assert caught.value.job_id == first.id

    def test_unknown_job(self, hg: Headgate) -> None:
        with pytest.raises(NotFound):
            hg.jobs.get("nope")


class TestLease:
    def test_only_one_runtime_holds_the_duty(
        self, make_headgate: Callable[..., Headgate], clock: FakeClock
    ) -> None:
        first, second = make_headgate(), make_headgate()
        first.start()
        assert first.fire_due_ticks()
        second.start()
        assert not second.fire_due_ticks()
        status = first.runtime.lease()
        assert status is not None and status.term == 1
        first.stop()  # releases
        assert first.runtime.lease() is None
        assert second.fire_due_ticks()
        status = second.runtime.lease()
        assert status is not None and status.term == 2

    def test_stop_then_start_again(self, hg: Headgate, clock: FakeClock) -> None:
        hg.schedules.put("s", spec="@every:60000", kind="k")
        hg.start()
        hg.stop()
        clock.advance(MINUTE)
        fire(hg)
        assert jobs_for(hg, "s") == [START_MS + MINUTE]

    def test_thread_count_does_not_grow_with_schedules(
        self, make_headgate: Callable[..., Headgate], clock: FakeClock
    ) -> None:
        few = make_headgate(RuntimeConfig(lease_ttl_ms=600_000, shards=4))
        few.schedules.put("one", spec="@every:60000", kind="k")
        baseline = threading.active_count()
        few.start()
        assert few.fire_due_ticks()
        with_one = threading.active_count() - baseline
        few.stop()
        few._core.store.log.append_units(
            [
                [StreamAppend(f"schedule-bulk{n}", NO_STREAM, (_definition(f"bulk{n}"),))]
                for n in range(3000)
            ]
        )
        few.start()
        clock.advance(MINUTE)
        assert few.fire_due_ticks()
        assert threading.active_count() - baseline == with_one
        assert len(jobs_for(few, "bulk2999")) == 1


def _definition(schedule_id: str):  # type: ignore[no-untyped-def]

    return schedule_defined(
        schedule_id, "@every:60000", "k", "default", None, "skip", 1, False, START_MS + MINUTE
    )  # type: ignore[arg-type]


class TestDaylightSaving:
    @staticmethod
    def _local(text: str, zone: str = "America/New_York") -> int:
        return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)

    def _night(self, hg: Headgate, clock: FakeClock, start: str, hours: int) -> None:
        clock.set(self._local(start))
        for _ in range(hours * 4):
            clock.advance(15 * MINUTE)
            fire(hg)

    def test_spring_forward_skips_the_missing_hour(self, hg: Headgate, clock: FakeClock) -> None:
        clock.set(self._local("2024-03-09 12:00"))
        hg.schedules.put("half-two", spec="CRON_TZ=America/New_York 30 2 * * *", kind="k")
        hg.schedules.put("hourly", spec="CRON_TZ=America/New_York 0 * * * *", kind="k")
        self._night(hg, clock, "2024-03-10 00:00", 4)
        assert jobs_for(hg, "half-two") == []  # 02:30 does not exist that night
        assert hg.schedules.get("half-two").next_run_ms == self._local("2024-03-11 02:30")
        assert jobs_for(hg, "hourly") == [
            self._local("2024-03-10 00:00"),  # the latest tick missed while the clock jumped
            self._local("2024-03-10 01:00"),
            self._local("2024-03-10 03:00"),  # 02:00 does not exist
            self._local("2024-03-10 04:00"),
            self._local("2024-03-10 05:00"),  # four real hours after midnight EST
        ]

    def test_fall_back_fires_the_repeated_hour_once(self, hg: Headgate, clock: FakeClock) -> None:
        clock.set(self._local("2024-11-02 12:00"))
        hg.schedules.put("half-one", spec="CRON_TZ=America/New_York 30 1 * * *", kind="k")
        self._night(hg, clock, "2024-11-03 00:00", 4)
        assert jobs_for(hg, "half-one") == [1730611800000]  # 01:30 EDT, not again at 01:30 EST
        assert tick_job_id("half-one", 1730611800000) in {
            e.job_id for e in hg.schedules.enqueue_events("half-one").events
        }


def test_an_expired_key_still_finds_its_pending_job(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("s", spec="0 9 * * *", kind="k")
    first = hg.schedules.enqueue_now("s", "k1")
    clock.advance(8 * 86_400_000)
    hg.runtime.compact()  # the key's record is past its 7-day retention; the job is still pending
    assert hg.schedules.enqueue_now("s", "k1") == (first.job_id, True)


@pytest.mark.parametrize("identifier", ["a\x00b", "\ud800", "x" * 300])
def test_ids_that_cannot_exist_are_simply_not_found(hg: Headgate, identifier: str) -> None:
    with pytest.raises(NotFound):
        hg.schedules.get(identifier)
    with pytest.raises(NotFound):
        hg.jobs.get(identifier)
    with pytest.raises(NotFound):
        hg.schedules.enqueue_now(identifier, "k")
    assert hg.schedules.enqueue_events(identifier).events == []


@contextlib.contextmanager
def _store_locked_elsewhere(store_url: str) -> Iterator[None]:
    """Another process holding the store's lock (SQLite's write lock, or the lease
    table on PostgreSQL) until the block ends."""
    if store_url.startswith("sqlite"):
        other = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    engine = create_store_engine(store_url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("LOCK TABLE headgate_leases IN ACCESS EXCLUSIVE MODE")
            yield
    finally:
        engine.dispose()


def test_stop_while_another_process_locks_the_store(store_url: str, clock: FakeClock) -> None:
    """stop() cannot interrupt a write the database is blocking: it says so in a
    clear error after its timeout, and the actors end once the lock goes."""
    hg = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=60_000))
    baseline = threading.active_count()
    with _store_locked_elsewhere(store_url):
        hg.start()  # its first act, claiming the lease, now waits for the lock
        time.sleep(0.2)
        with pytest.raises(StoreUnavailable, match="did not stop within 1 s: a store write"):
            hg.stop(timeout=1)
        assert not hg.running
    deadline = time.monotonic() + 20
    while threading.active_count() > baseline:
        assert time.monotonic() < deadline, "the actors did not end once the lock was gone"
        time.sleep(0.05)
    hg.close()


def _run_host(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A host program in its own interpreter: what happens at its exit (or its
    crash) is part of what is tested."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


EXITS_WITHOUT_CLOSE = textwrap.dedent(
    """
    import gc, sys, time
    from headgate import Headgate, RuntimeConfig

    def start() -> Headgate:
        hg = Headgate(
            sys.argv[1], config=RuntimeConfig(lease_ttl_ms=600_000, min_interval_ms=100)
        )
        hg.schedules.put("pulse", spec="@every:100", kind="k")
        hg.start()
        while hg.runtime.lease() is None:
            time.sleep(0.05)
        return hg

    if sys.argv[2] == "dropped":
        start()  # the host keeps no reference; the runtime fires on regardless
        gc.collect()
    else:
        hg = start()
    print("holding", flush=True)
    if sys.argv[2] == "raise":
        raise RuntimeError("the host's own bug")
    sys.exit(3)  # a host whose startup failed after start(): no close()
    """
)


@pytest.mark.processes
@pytest.mark.parametrize(("how", "code"), [("exit", 3), ("raise", 1), ("dropped", 3)])
def test_a_host_that_exits_without_closing_stops_and_releases_the_lease(
    store_url: str, how: str, code: int
) -> None:
    """The actors never keep the interpreter alive (it used to hang, firing ticks,
    until killed), and the lease is released on the way out rather than left
    to expire (here, ten minutes), even by a runtime the host no longer holds."""
    Headgate(store_url).close()  # the schema, before two processes race to create it
    child = _run_host(EXITS_WITHOUT_CLOSE, store_url, how)
    assert child.returncode == code, child.stderr
    assert child.stdout.strip() == "holding"
    with Headgate(store_url) as observer:
        assert observer.runtime.lease() is None


CLOSES_UNDER_WRITERS = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate
    from headgate._errors import StoreClosed
    hg = Headgate(sys.argv[1])
    refused = []

    def write() -> None:
        while True:
            try:
                hg.enqueue(kind="k", payload={})
            except StoreClosed:
                refused.append(True)
                return

    writers = [threading.Thread(target=write) for _ in range(4)]
    for writer in writers:
        writer.start()
    time.sleep(1)
    hg.close()  # a host shutting down while request threads still write
    for writer in writers:
        writer.join(timeout=30)
    print(len(refused), flush=True)
    """
)


@pytest.mark.processes
def test_close_while_threads_write_refuses_their_next_writes(store_url: str) -> None:
    """On SQLite every write shares one connection: closing it under another
    thread's write crashed the interpreter (SIGSEGV). Now the write in flight
    finishes, and every later one gets StoreClosed."""
    Headgate(store_url).close()
    child = _run_host(CLOSES_UNDER_WRITERS, store_url)
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    assert child.stdout.strip() == "4", "each writer was refused once the store closed"
