"""Soak: three runtimes on one store under chaos for minutes, on the real clock.

Behind the `soak` marker (`sh tests/run.sh -m soak`); HEADGATE_SOAK_SECONDS
sets the length (default 180). Meanwhile the holder is SIGKILLed, other
runtimes are stopped and replaced, on PostgreSQL a holder is SIGSTOPped past
its lease and resumed, the log is compacted every few seconds, and an API
client re-puts every schedule unchanged (as each deploy does), asks for
Enqueue now with repeated keys and finishes jobs. At the end, for every
schedule: one job per tick from its first to its last with none missing, one
`enqueued` record per tick in its history, next_run_ms advanced exactly past
the last; one job per idempotency key; and the projections equal a fresh
fold of the compacted log.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from headgate import Headgate, RuntimeConfig
from headgate._store.sql.backends.postgresql import IDLE_IN_TRANSACTION_MS
from headgate._store.sql.maintenance import verify
from headgate.testing import finish_job

pytestmark = pytest.mark.soak

SECONDS = float(os.environ.get("HEADGATE_SOAK_SECONDS", "180"))
TTL_MS = 1_500
COMPACT_EVERY_MS = 5_000
SCHEDULES = {f"soak-{n}": 200 * (n % 5 + 1) for n in range(20)}
"""Schedule id -> interval: 200 ms to 1 s, so a few minutes overflow the history's 100."""
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from headgate import Headgate, RuntimeConfig
    config = RuntimeConfig(lease_ttl_ms=int(sys.argv[2]), compaction_interval_ms=int(sys.argv[3]))
    hg = Headgate(sys.argv[1], config=config)
    def stop(*_):
        hg.close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    hg.start()
    while True:
        time.sleep(0.5)
    """
)


def _runtime(store_url: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, store_url, str(TTL_MS), str(COMPACT_EVERY_MS)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def test_chaos_for_minutes_loses_and_doubles_nothing(store_url: str, tmp_path: Path) -> None:
    chance = random.Random(7)
    observer = Headgate(
        store_url,
        config=RuntimeConfig(lease_ttl_ms=TTL_MS, min_interval_ms=min(SCHEDULES.values())),
    )
    _put_every_schedule(observer)
    log = tmp_path / "runtimes.log"
    runtimes = [_runtime(store_url, log) for _ in range(3)]
    keys: set[str] = set()
    actions: Counter[str] = Counter()
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            time.sleep(chance.uniform(1.0, 3.0))
            status = observer.runtime.lease()
            holder = next((r for r in runtimes if status and r.pid == status.pid), None)
            action = chance.choice(["kill holder", "replace other", "freeze holder", "api"])
            if action == "kill holder" and holder is not None:
                holder.kill()
                holder.wait()
                runtimes[runtimes.index(holder)] = _runtime(store_url, log)
            elif action == "replace other":
                other = chance.choice([r for r in runtimes if r is not holder])
                other.terminate()
                other.wait(timeout=30)
                runtimes[runtimes.index(other)] = _runtime(store_url, log)
            elif (
                action == "freeze holder"
                and holder is not None
                and observer._core.store.backend.name == "postgresql"
            ):
                # Past its lease, and past the session timeout that frees its locks.
                holder.send_signal(signal.SIGSTOP)
                time.sleep((IDLE_IN_TRANSACTION_MS + TTL_MS) / 1000 + 0.5)
                holder.send_signal(signal.SIGCONT)
            else:
                action = "api"
                _api_client_work(observer, chance, keys)
            actions[action] += 1
        for runtime in runtimes:
            runtime.terminate()
        for runtime in runtimes:
            runtime.wait(timeout=30)
        report = verify(observer._core.store)
        assert report.ok, (report.lagging, report.differences[:5])
        _assert_every_tick_once(observer)
        with observer._core.store.engine.connect() as connection:
            manual = connection.execute(
                text(
                    "SELECT COUNT(*) FROM headgate_jobs WHERE kind = 'soak.tick' AND periodic_tick_ms IS NULL"
                )
            ).scalar_one()
        assert manual == len(keys), "one Enqueue-now job per idempotency key"
        if SECONDS >= 60:  # a short run may not draw every action
            assert actions["kill holder"] and actions["replace other"] and actions["api"], actions
    finally:
        for runtime in runtimes:
            if runtime.poll() is None:
                runtime.send_signal(signal.SIGCONT)
                runtime.kill()
                runtime.wait(timeout=10)
        observer.close()


def _api_client_work(observer: Headgate, chance: random.Random, keys: set[str]) -> None:
    """What a host's API client does meanwhile: deploys re-put schedules unchanged,
    people press Enqueue now (twice, sometimes), workers finish jobs."""
    _put_every_schedule(observer)
    key = f"key-{chance.randrange(20)}"
    schedule_id = chance.choice(list(SCHEDULES))
    keys.add(f"{schedule_id}/{key}")
    observer.schedules.enqueue_now(schedule_id, idempotency_key=key)
    with observer._core.store.engine.connect() as connection:
        pending = connection.execute(
            text(
                "SELECT job_id FROM headgate_jobs WHERE state = 'pending' ORDER BY job_id LIMIT 20"
            )
        ).scalars()
        for job_id in list(pending):
            finish_job(observer, job_id)


def _put_every_schedule(observer: Headgate) -> None:
    """Define the schedules, or re-put them unchanged (which keeps their phase)."""
    for schedule_id, interval in SCHEDULES.items():
        observer.schedules.put(
            schedule_id,
            spec=f"@every:{interval}",
            kind="soak.tick",
            payload={"schedule": schedule_id},
            on_missed="backfill",
            backfill_max=1_000,
        )


def _assert_every_tick_once(observer: Headgate) -> None:
    with observer._core.store.engine.connect() as connection:
        for schedule_id, interval in SCHEDULES.items():
            ticks = [
                int(tick)
                for (tick,) in connection.execute(
                    text(
                        "SELECT periodic_tick_ms FROM headgate_jobs WHERE periodic_schedule_id = :s ORDER BY 1"
                    ),
                    {"s": schedule_id},
                )
            ]
            assert len(ticks) > 10, schedule_id
            expected = list(range(ticks[0], ticks[-1] + interval, interval))
            assert ticks == expected, f"{schedule_id}: every tick from first to last, once"
            assert observer.schedules.get(schedule_id).next_run_ms == ticks[-1] + interval
            page = observer.schedules.enqueue_events(schedule_id, limit=100)
            enqueued = sorted(e.tick_ms for e in page.events if e.outcome == "enqueued")
            # The history shows the newest attempts: a record for each of the
            # newest ticks, once.
            assert enqueued and enqueued == ticks[-len(enqueued) :], schedule_id
