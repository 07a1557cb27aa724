"""A scheduler process killed (SIGKILL) at each step of firing a tick.

Firing a tick writes the job, its enqueue-attempt record and the advance of
next_run_ms in one transaction. The kill points cover every boundary inside
it and the moment right after commit. After a restart the invariant must
hold: one job per (schedule, tick), its audit record present once, and the
schedule advanced exactly once per tick.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from sqlalchemy import text

from headgate import FakeClock, Headgate, RuntimeConfig
from headgate.domain.streams import schedule_stream
from tests.runtime.conftest import START_MS

HOUR = 3_600_000
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from headgate import FakeClock, Headgate, RuntimeConfig
    from headgate.runtime import tick_batch
    from headgate.store import event_store, projector

    url, point, now = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "events_written":          # job, record and advance rows inserted; nothing projected
        projector.Projector.apply_live = die
    elif point == "advance_projected":      # next_run_ms updated in the schedules table; jobs not yet
        original_fold = projector.fold_into_table
        def fold_then_die(connection, projection, table, recorded):
            used = original_fold(connection, projection, table, recorded)
            if projection.name == "schedules":
                die()
            return used
        projector.fold_into_table = fold_then_die
    elif point == "before_commit":         # everything written, transaction still open
        original_append = event_store.WriteTransaction.append_units
        def append_then_die(self, units):
            original_append(self, units)
            die()
        event_store.WriteTransaction.append_units = append_then_die
    elif point == "after_commit":          # durable, before the runtime hears back
        tick_batch.TickProcessor._after = die
    hg = Headgate(url, clock=FakeClock(now), config=RuntimeConfig(lease_ttl_ms=60_000))
    hg.start()
    hg.run_pending(timeout=60)
    print("survived", flush=True)
    """
)
POINTS = ["events_written", "advance_projected", "before_commit", "after_commit"]


@pytest.mark.parametrize("point", POINTS)
def test_killed_while_firing_then_restarted(store_url: str, point: str) -> None:
    clock = FakeClock(START_MS)
    setup = Headgate(store_url, clock=clock)
    setup.put_schedule("every-hour", spec="@every:3600000", kind="k")
    setup.put_schedule(
        "backfill", spec="@every:3600000", kind="k", on_missed="backfill", backfill_limit=3
    )
    setup.close()
    now = START_MS + 3 * HOUR + 5_000  # three ticks missed
    child = subprocess.run(
        [sys.executable, "-c", CHILD, store_url, point, str(now)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stdout + child.stderr
    assert "survived" not in child.stdout

    clock = FakeClock(now + 61_000)  # the dead holder's lease has expired
    hg = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=60_000))
    try:
        hg.start()
        assert hg.run_pending(timeout=60)
        expected = {
            "every-hour": [START_MS + 3 * HOUR],
            "backfill": [START_MS + n * HOUR for n in (1, 2, 3)],
        }
        for schedule_id, ticks in expected.items():
            records = hg.enqueue_events(schedule_id, limit=100).events
            assert Counter(e.tick_ms for e in records) == Counter(ticks), (
                f"one audit record per tick ({schedule_id})"
            )
            assert {e.outcome for e in records} == {"enqueued"}
            for event in records:
                job = hg.get_job(event.job_id)
                assert job.periodic_origin == (schedule_id, event.tick_ms)
            stream = hg.store.read_stream(schedule_stream(schedule_id))
            advances = [e.event for e in stream if type(e.event).__name__ == "NextRunAdvanced"]
            assert len(advances) == len(ticks), "advanced exactly once per tick"
            assert hg.get_schedule(schedule_id).next_run_ms == START_MS + 4 * HOUR
        with hg.store.engine.connect() as connection:
            duplicates = connection.execute(
                text(
                    "SELECT periodic_schedule_id, periodic_tick_ms, COUNT(*) FROM jobs "
                    "GROUP BY periodic_schedule_id, periodic_tick_ms HAVING COUNT(*) > 1"
                )
            ).all()
        assert duplicates == []
    finally:
        hg.close()
