"""Defining schedules, on SQLite and PostgreSQL, printed as tables.

1. Bulk: `hg.schedules.put_many` of N new schedules (a multi-tenant host's start:
   one schedule per tenant, 60 distinct cron specs among them), in schedules/s.
   Compared, in the same run, with a raw batched insert of the same rows and
   events on a store Headgate made (its schema and indexes): per chunk of 500,
   one transaction that locks the log head, builds the ScheduleDefined event
   rows (JSON bodies) and the schedules rows as dicts, inserts them with
   SQLAlchemy Core executemany, and moves the log head (the "floor" style of
   benchmarks/scheduler.py: no validation, no decisions, no objects; the 60
   specs' next ticks are found once, before the clock starts). Then the same
   call again (every item unchanged: nothing is written), and once more with
   every payload changed (updates).
   Ours and the raw insert alternate three times; medians are printed.
2. Single: `hg.schedules.put` latency (a new schedule each time; then an update
   of one) against a bare commit: a one-row raw insert and commit on the same
   database, and an empty Headgate write transaction (its lock and checks,
   nothing written). Samples alternate, so load on the machine hits all alike.

Run: python -m benchmarks.schedules [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import insert, text, update

from benchmarks._common import fresh_database, locked_log_head, print_table, raw_engine
from headgate import Headgate
from headgate._domain.spec import parse_spec
from headgate._domain.streams import schedule_stream

RAW_BATCH = 500
NOW_MS = 1_704_067_200_000


def items(count: int, payload_key: str = "tenant") -> list[dict[str, Any]]:
    return [
        {
            "schedule_id": f"tenant-{n}-nightly",
            "spec": f"{n % 60} 9 * * *",
            "kind": "report.build",
            "payload": {payload_key: n},
        }
        for n in range(count)
    ]


def bulk_ours(backend: str, count: int) -> tuple[float, float, float]:
    """Schedules/s: creating `count`, the same again (unchanged), then updating them."""
    with fresh_database(backend) as url:
        hg = Headgate(url)
        try:
            rates = []
            for batch in (items(count), items(count), items(count, "customer")):
                began = time.perf_counter()
                hg.schedules.put_many(batch)
                rates.append(count / (time.perf_counter() - began))
            assert len(hg.schedules.list(limit=200).schedules) == min(count, 200)
        finally:
            hg.close()
    created, unchanged, updated = rates
    return created, unchanged, updated


def bulk_raw(backend: str, count: int) -> float:
    """The same rows and events, by a raw batched insert (see the module's docstring)."""
    from headgate._store.sql.schema import LIVE, events, log_head

    schedules = LIVE.schedules
    with fresh_database(backend) as url:
        Headgate(url).close()  # the schema, its indexes and the log head
        engine = raw_engine(url)
        head_query = locked_log_head(engine)
        batch = items(count)
        # Each spec's next tick, found once: 60 specs for all the rows.
        ticks = {spec: parse_spec(spec).next_tick_ms(NOW_MS) for spec in {i["spec"] for i in batch}}
        began = time.perf_counter()
        for start in range(0, count, RAW_BATCH):
            with engine.begin() as connection:
                head = connection.execute(head_query).scalar_one()
                event_rows, schedule_rows = _raw_rows(batch[start : start + RAW_BATCH], ticks, head)
                connection.execute(insert(events), event_rows)
                connection.execute(insert(schedules), schedule_rows)
                connection.execute(update(log_head).values(position=head + len(event_rows)))
        elapsed = time.perf_counter() - began
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT COUNT(*) FROM headgate_schedules")).scalar()
        assert stored == count, stored
        engine.dispose()
    return count / elapsed


def _raw_rows(
    batch: list[dict[str, Any]], ticks: dict[str, int], head: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The event rows (after log position `head`) and schedules rows of these items."""
    event_rows, schedule_rows = [], []
    for position, item in enumerate(batch, start=head + 1):
        next_run = ticks[item["spec"]]
        payload = json.dumps(item["payload"], sort_keys=True, separators=(",", ":"))
        body = {
            "schedule_id": item["schedule_id"],
            "spec": item["spec"],
            "kind": item["kind"],
            "queue": "default",
            "payload": item["payload"],
            "on_missed": "skip",
            "backfill_max": 1,
            "paused": False,
            "next_run_ms": next_run,
            "last_enqueued_ms": None,
            "max_attempts": None,
            "timeout_ms": None,
        }
        event_rows.append(
            {
                "position": position,
                "stream_id": schedule_stream(item["schedule_id"]),
                "version": 1,
                "type": "ScheduleDefined",
                "schema_version": 2,
                "body": json.dumps(body, sort_keys=True, separators=(",", ":")),
                "recorded_at_ms": NOW_MS,
            }
        )
        schedule_rows.append(
            {
                "schedule_id": item["schedule_id"],
                "spec": item["spec"],
                "kind": item["kind"],
                "queue": "default",
                "payload": payload,
                "on_missed": "skip",
                "backfill_max": 1,
                "paused": False,
                "next_run_ms": next_run,
                "due_at_ms": next_run,
                "failures": 0,
                "last_enqueued_ms": None,
                "version": 1,
                "deleted": False,
                "updated_at_ms": NOW_MS,
                "max_attempts": None,
                "timeout_ms": None,
            }
        )
    return event_rows, schedule_rows


def bulk(backend: str, count: int, trials: int) -> list[object]:
    ours: list[tuple[float, float, float]] = []
    raw: list[float] = []
    for _ in range(trials):
        ours.append(bulk_ours(backend, count))
        raw.append(bulk_raw(backend, count))
    created = statistics.median(o[0] for o in ours)
    unchanged = statistics.median(o[1] for o in ours)
    updated = statistics.median(o[2] for o in ours)
    raw_median = statistics.median(raw)
    ratios = [o[0] / r for o, r in zip(ours, raw, strict=True)]
    return [
        backend,
        f"{count:,}",
        f"{created:,.0f}",
        f"{raw_median:,.0f}",
        f"{created / raw_median:.2f}",
        f"{min(ratios):.2f}-{max(ratios):.2f}",
        f"{unchanged:,.0f}",
        f"{updated:,.0f}",
    ]


def single(backend: str, samples: int) -> list[object]:
    """put_schedule latency against a bare commit, samples alternating."""
    with fresh_database(backend) as url:
        hg = Headgate(url)
        engine = hg._core.store.engine
        try:
            with engine.begin() as connection:
                connection.execute(text("CREATE TABLE raw_commits (id VARCHAR(64) PRIMARY KEY)"))
            for n in range(200):  # a store that holds some, and warm connections
                hg.schedules.put(f"warm-{n}", spec=f"{n % 60} 9 * * *", kind="report.build")
            counter = iter(range(10**9))

            def create() -> None:
                n = next(counter)
                hg.schedules.put(
                    f"tenant-{n}", spec=f"{n % 60} 9 * * *", kind="report.build", payload={"n": n}
                )

            def change() -> None:
                n = next(counter)
                hg.schedules.put("warm-0", spec="0 9 * * *", kind="report.build", payload={"n": n})

            def raw_commit() -> None:
                with engine.begin() as connection:
                    connection.execute(
                        text("INSERT INTO raw_commits (id) VALUES (:id)"),
                        {"id": str(next(counter))},
                    )

            def empty_write() -> None:
                with hg._core.store.log.write():
                    pass

            timings = _alternating([create, change, raw_commit, empty_write], samples)
        finally:
            hg.close()
    created, changed, raw, empty = (sorted(t) for t in timings)
    commit = statistics.median(raw)
    return [
        backend,
        f"{statistics.median(created):.2f}",
        f"{_p99(created):.2f}",
        f"{statistics.median(changed):.2f}",
        f"{_p99(changed):.2f}",
        f"{commit:.2f}",
        f"{statistics.median(empty):.2f}",
        f"{statistics.median(created) - commit:+.2f}",
    ]


def _alternating(operations: list[Callable[[], None]], samples: int) -> list[list[float]]:
    timings: list[list[float]] = [[] for _ in operations]
    for _ in range(samples):
        for operation, spent in zip(operations, timings, strict=True):
            began = time.perf_counter()
            operation()
            spent.append((time.perf_counter() - began) * 1000)
    return timings


def _p99(ordered: list[float]) -> float:
    return ordered[max(int(len(ordered) * 0.99) - 1, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    sizes = [1000] if args.quick else [1000, 10_000]
    trials = 1 if args.quick else 3
    print_table(
        f"Bulk put_schedules (schedules/s, median of {trials} alternating trials; "
        "ratio = ours / raw batched insert of the same rows and events, same run)",
        [
            "backend",
            "schedules",
            "ours/s",
            "raw/s",
            "ratio",
            "per-trial ratios",
            "unchanged/s",
            "updated/s",
        ],
        [bulk(backend, size, trials) for backend in backends for size in sizes],
    )
    samples = 100 if args.quick else 500
    print_table(
        f"Single put_schedule latency in ms ({samples} alternating samples each; commit = a "
        "one-row raw insert and commit; empty = a Headgate write transaction writing nothing)",
        [
            "backend",
            "create p50",
            "create p99",
            "update p50",
            "update p99",
            "commit p50",
            "empty p50",
            "create - commit",
        ],
        [single(backend, samples) for backend in backends],
    )


if __name__ == "__main__":
    main()
