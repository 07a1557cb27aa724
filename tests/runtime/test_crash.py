"""A scheduler process killed (SIGKILL) at each step of firing a tick.

Firing a tick writes the job and its enqueue-attempt record, which carries the
advance of next_run_ms, in one transaction. The kill points cover every boundary inside
it, the moment right after commit, and a batch written ahead of its instant
and held open for it. After a restart the invariant must hold: one job per
(schedule, tick), its audit record present once, and the schedule advanced
exactly once per tick. A compaction killed between its small transactions
keeps what committed, loses nothing, and the next run completes it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence

import pytest
from sqlalchemy import text

from headgate import Headgate, RuntimeConfig
from headgate._domain.streams import schedule_stream
from headgate._store.sql.maintenance import verify
from headgate.testing import FakeClock
from tests.runtime.conftest import START_MS

pytestmark = pytest.mark.processes

HOUR = 3_600_000
CHILD = textwrap.dedent(
    """
    import sys, time
    from headgate import Headgate, RuntimeConfig
    from headgate.testing import FakeClock
    from headgate._domain.events import EnqueueAttempted
    from headgate._projections import ALL_PROJECTIONS, SCHEDULES, Projection
    from headgate._store.sql.store import SqlStore
    from tests.faults import Faults, FaultyStore, die, records_ticks

    url, point, now = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def die_at_a_tick(recorded):  # a projection's key: called as the projector folds
        if isinstance(recorded.event, EnqueueAttempted):
            die()
        return None

    probe = Projection(
        name="crash-probe", table="schedules", row_type=object, key_column="schedule_id",
        key=die_at_a_tick, apply=lambda row, recorded: row,
    )
    projections = ALL_PROJECTIONS
    faults = Faults()
    if point == "events_written":          # job and record rows inserted; nothing projected
        projections = (probe, *ALL_PROJECTIONS)
    elif point == "advance_projected":      # next_run_ms in the schedules table; jobs not yet
        projections = (SCHEDULES, probe, *(p for p in ALL_PROJECTIONS if p is not SCHEDULES))
    elif point == "before_commit":         # everything written, transaction still open
        faults.after_append = lambda units, held: die() if records_ticks(units) else None
    elif point == "after_commit":          # the first transaction recording ticks committed
        faults.after_commit = lambda units: die() if records_ticks(units) else None
    elif point == "held_for_instant":      # next instant's batch written, waiting to commit
        faults.after_append = (
            lambda units, held: die() if held is not None and records_ticks(units) else None
        )
    clock = FakeClock(now)
    store = FaultyStore(SqlStore(url, clock, projections=projections), faults)
    hg = Headgate(store, config=RuntimeConfig(lease_ttl_ms=60_000))
    hg.start()
    hg.fire_due_ticks(timeout=60)
    if point == "held_for_instant":
        time.sleep(0.1)
        clock.set(int(sys.argv[4]) - 5)  # past the time the batch opens, short of its instant
        time.sleep(10)
    print("survived", flush=True)
    """
)
POINTS = ["events_written", "advance_projected", "before_commit", "after_commit"]


def _define_schedules(store_url: str) -> None:
    setup = Headgate(store_url, clock=FakeClock(START_MS))
    setup.schedules.put("every-hour", spec="@every:3600000", kind="k")
    setup.schedules.put(
        "backfill", spec="@every:3600000", kind="k", on_missed="backfill", backfill_max=3
    )
    setup.close()


def _run_child_until_killed(store_url: str, point: str, *args: int) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, store_url, point, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stdout + child.stderr
    assert "survived" not in child.stdout


def _durable(store_url: str) -> dict[str, object]:
    """What the store holds, read without starting a runtime."""
    hg = Headgate(store_url, clock=FakeClock(START_MS))
    try:
        types = Counter(e.type for e in hg._core.store.log.read_all(0, 100_000))
        with hg._core.store.engine.connect() as connection:
            jobs = connection.execute(text("SELECT COUNT(*) FROM headgate_jobs")).scalar_one()
        return {
            "jobs": jobs,
            "records": types["EnqueueAttempted"],
            "advances": sum(
                e.event.next_run_ms > e.event.tick_ms
                for e in hg._core.store.log.read_all(0, 100_000)
                if e.type == "EnqueueAttempted"
            ),
            "next_run": [hg.schedules.get(s).next_run_ms for s in ("every-hour", "backfill")],
        }
    finally:
        hg.close()


NOTHING_FIRED = {"jobs": 0, "records": 0, "advances": 0, "next_run": [START_MS + HOUR] * 2}
CATCH_UP_DONE = {"jobs": 4, "records": 4, "advances": 4, "next_run": [START_MS + 4 * HOUR] * 2}
"""The first batch, all or nothing: every-hour's latest tick and backfill's three."""


def _assert_each_tick_once(
    store_url: str, now: int, every_hour: Sequence[int], backfill: Sequence[int], next_run: int
) -> None:
    clock = FakeClock(now + 61_000)  # the dead holder's lease has expired
    hg = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=60_000))
    try:
        hg.start()
        assert hg.fire_due_ticks(timeout=60)
        expected = {"every-hour": every_hour, "backfill": backfill}
        for schedule_id, ticks in expected.items():
            records = hg.schedules.enqueue_events(schedule_id, limit=100).events
            assert Counter(e.tick_ms for e in records) == Counter(ticks), (
                f"one audit record per tick ({schedule_id})"
            )
            assert {e.outcome for e in records} == {"enqueued"}
            for event in records:
                job = hg.jobs.get(event.job_id)
                assert job.periodic_origin == (schedule_id, event.tick_ms)
            stream = hg._core.store.log.read_stream(schedule_stream(schedule_id))
            advances = [
                (e.event.tick_ms, e.event.next_run_ms)
                for e in stream
                if type(e.event).__name__ == "EnqueueAttempted"
            ]
            assert advances == [(tick, tick + HOUR) for tick in ticks], (
                "advanced exactly once per tick, each to the tick after it"
            )
            assert hg.schedules.get(schedule_id).next_run_ms == next_run
        with hg._core.store.engine.connect() as connection:
            duplicates = connection.execute(
                text(
                    "SELECT periodic_schedule_id, periodic_tick_ms, COUNT(*) FROM headgate_jobs "
                    "GROUP BY periodic_schedule_id, periodic_tick_ms HAVING COUNT(*) > 1"
                )
            ).all()
        assert duplicates == []
    finally:
        hg.close()


@pytest.mark.parametrize("point", POINTS)
def test_killed_while_firing_then_restarted(store_url: str, point: str) -> None:
    _define_schedules(store_url)
    now = START_MS + 3 * HOUR + 5_000  # three ticks missed
    _run_child_until_killed(store_url, point, now)
    assert _durable(store_url) == (CATCH_UP_DONE if point == "after_commit" else NOTHING_FIRED)
    _assert_each_tick_once(
        store_url,
        now,
        every_hour=[START_MS + 3 * HOUR],
        backfill=[START_MS + n * HOUR for n in (1, 2, 3)],
        next_run=START_MS + 4 * HOUR,
    )


def test_killed_while_holding_a_batch_for_its_instant_then_restarted(store_url: str) -> None:
    _define_schedules(store_url)
    instant = START_MS + 4 * HOUR
    now = instant - 300  # three ticks missed, the fourth 300 ms away: prepared ahead
    _run_child_until_killed(store_url, "held_for_instant", now, instant)
    assert _durable(store_url) == CATCH_UP_DONE, "the held batch left nothing"
    _assert_each_tick_once(
        store_url,
        now,
        every_hour=[START_MS + 3 * HOUR, instant],
        backfill=[START_MS + n * HOUR for n in (1, 2, 3, 4)],
        next_run=instant + HOUR,
    )


COMPACTION_CHILD = textwrap.dedent(
    """
    import sys
    from sqlalchemy import Engine, event
    from headgate.testing import FakeClock
    from headgate._store.sql import compaction
    from headgate._store.sql.store import SqlStore
    from tests.faults import die

    store = SqlStore(sys.argv[1], FakeClock(int(sys.argv[2])))
    trims = []

    @event.listens_for(Engine, "after_cursor_execute")
    def die_in_the_second_trim(connection, cursor, statement, *args):
        if statement.startswith("DELETE") and "events.position IN (SELECT" in statement:
            trims.append(statement)
            if len(trims) == 2:  # the first transaction committed, the second is open
                die()

    compaction.compact(store.database, store.log, streams_per_transaction=1)
    print("survived", flush=True)
    """
)


def test_killed_while_compacting_then_compacted_again(store_url: str) -> None:
    """Compaction runs in many small transactions: a kill between them keeps what
    committed (old attempts gone, with their history rows; the definitions,
    fewer than compaction keeps, stay), loses nothing a tick needs, and the next
    run finishes the job."""
    clock = FakeClock(START_MS)
    quiet = RuntimeConfig(lease_ttl_ms=3_600_000, compaction_interval_ms=1_000 * HOUR)
    hg = Headgate(store_url, clock=clock, config=quiet)  # the runtime itself does not compact
    rounds = (107, 1, 1, 1)  # 110 ticks each: 10 more than compaction keeps
    for round_, hours in enumerate((0, *rounds)):
        clock.advance(hours * HOUR)
        for name in ("a", "b", "c"):  # a changed payload: a definition of its history
            hg.schedules.put(
                name,
                spec="@every:3600000",
                kind="k",
                payload={"round": round_},
                on_missed="backfill",
                backfill_max=200,
            )
        hg.start()
        assert hg.fire_due_ticks(timeout=60)
        hg.stop()  # the next round's definitions land before anything fires
    hg.close()
    child = subprocess.run(
        [sys.executable, "-c", COMPACTION_CHILD, store_url, str(clock.now_ms())],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stdout + child.stderr
    hg = Headgate(store_url, clock=clock)
    try:
        assert _per_schedule(hg) == {
            "definitions": [5, 5, 5],
            "attempts": [100, 110, 110],
            "history rows": [100, 110, 110],
        }, "one stream compacted, one rolled back"
        assert verify(hg._core.store).ok
        hg.runtime.compact()
        assert _per_schedule(hg) == {
            "definitions": [5, 5, 5],
            "attempts": [100, 100, 100],
            "history rows": [100, 100, 100],
        }
        assert verify(hg._core.store).ok
        for name in ("a", "b", "c"):
            events = hg.schedules.enqueue_events(name, limit=100).events
            assert sorted(e.tick_ms for e in events) == [
                START_MS + n * HOUR for n in range(11, 111)
            ]
            assert all(hg.jobs.get(e.job_id).periodic_origin for e in events)
            assert hg.schedules.get(name).next_run_ms == START_MS + 111 * HOUR
    finally:
        hg.close()


def _per_schedule(hg: Headgate) -> dict[str, list[int]]:
    """Definitions and attempts in the log, and rows in the history table, per
    schedule (sorted counts)."""
    logged = hg._core.store.log.read_all(0, 100_000)
    with hg._core.store.engine.connect() as connection:
        history = connection.execute(
            text("SELECT schedule_id, COUNT(*) FROM headgate_enqueue_history GROUP BY schedule_id")
        ).all()
    return {
        "definitions": sorted(
            Counter(e.stream_id for e in logged if e.type == "ScheduleDefined").values()
        ),
        "attempts": sorted(
            Counter(e.stream_id for e in logged if e.type == "EnqueueAttempted").values()
        ),
        "history rows": sorted(count for _, count in history),
    }
