"""Scheduler runtime benchmarks, on SQLite and PostgreSQL, printed as tables.

1. Catch-up burst: N schedules all due at once; time until every one has one
   job, one audit record and an advanced next_run_ms. Compared, in the same
   run and database, with a raw SQLAlchemy loop writing the same rows (job,
   audit record, compare-and-set update) 500 per transaction. Beside them,
   the floor of this event model: the rows every tick must write here (two
   events, the job row, the history row, the schedule's compare-and-set
   update), written the way the raw loop writes its own (SQLAlchemy Core
   executemany), with no decisions, objects or logging: the target's yardstick
   applied to the rows this design must write. (Ours writes through faster
   driver paths, so it could in principle pass the floor; item 5 gives a
   strict ceiling for SQLite.) The three alternate three times; medians are
   printed, with the spread of ours against the raw loop. 1,000 and 10,000
   schedules on each backend (quick: one trial each). Targets (issue 38):
   10,000 at >= 0.2x raw on SQLite, >= 0.5x on PostgreSQL; a ratio below its
   target prints a `REGRESSION:` line (1,000 is held to the same targets).
2. Steady state: 1,000 and 4,000 schedules at @every:1000 for 30 s on the real
   clock (quick: 4,000 for 5 s): jobs/s, lateness (the enqueue's commit minus
   its tick, as the after-enqueue hook is told it) p50/p99/max, CPU share, and
   the latency of an ordinary API enqueue made every 20 ms meanwhile (it waits
   while a batch is held). Target (issue 38): 4,000 at one instant fire within
   p99 lateness <= 250 ms, 0 lost; a miss prints a `REGRESSION:` line.
3. Failover: SIGKILL the holder; time until another process enqueues a tick.
4. Memory: resident memory and threads of a runtime firing 10,000 and 100,000
   schedules (the thread count must not change with the schedule count).
5. SQL alone (SQLite): every statement a catch-up burst issued, replayed by
   itself on a copy of the starting database. What our rows cost with no
   Python around them: the ceiling for the catch-up ratio with this schema.

Per-tick log lines are rendered as JSON to /dev/null, so their cost counts.
Run: python -m benchmarks.scheduler [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import structlog
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    event,
    insert,
    text,
    update,
)

from benchmarks._common import (
    fresh_database,
    last_position,
    locked_log_head,
    print_table,
    raw_engine,
)
from headgate import AttemptResult, EnqueueHook, Headgate, RuntimeConfig, TickContext
from headgate._domain.events import ScheduleDefined
from headgate._domain.options import ScheduleDefinition
from headgate._domain.streams import schedule_stream
from headgate._store.port import NO_STREAM, StreamAppend
from headgate.testing import FakeClock

START_MS = 1_704_067_200_000
RAW_BATCH = 500
CATCH_UP_TARGETS = {"sqlite": 0.2, "postgresql": 0.5}
"""The catch-up burst's least ratio to the raw loop, by backend (issue 38)."""
STEADY_P99_TARGET_MS = 250
"""The steady state's largest p99 lateness, with nothing lost (issue 38)."""


def quiet_json_logs() -> None:
    sink = open(os.devnull, "w")  # noqa: SIM115
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        logger_factory=structlog.WriteLoggerFactory(sink),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )


def define_many(hg: Headgate, count: int, spec: str, next_run_ms: int, prefix: str = "s") -> None:
    for start in range(0, count, 1000):
        units = [
            [
                StreamAppend(
                    schedule_stream(f"{prefix}{n}"),
                    NO_STREAM,
                    (
                        ScheduleDefined(
                            f"{prefix}{n}",
                            ScheduleDefinition(spec=spec, kind="report.build", payload={"n": n}),
                            next_run_ms,
                        ),
                    ),
                )
            ]
            for n in range(start, min(start + 1000, count))
        ]
        hg._core.store.log.append_units(units)


def raw_loop(url: str, count: int) -> float:
    """The baseline: the same three writes per schedule, 500 schedules per transaction."""

    metadata = MetaData()
    jobs = Table(
        "raw_jobs",
        metadata,
        Column("job_id", String(64), primary_key=True),
        Column("schedule_id", String(64)),
        Column("tick_ms", BigInteger),
        Column("kind", String(64)),
        Column("payload", Text),
    )
    audit = Table(
        "raw_audit",
        metadata,
        Column("event_id", Integer, primary_key=True, autoincrement=True),
        Column("schedule_id", String(64)),
        Column("tick_ms", BigInteger),
        Column("job_id", String(64)),
        Column("outcome", String(16)),
        Column("reason", String(64)),
        Column("recorded_at_ms", BigInteger),
    )
    schedules = Table(
        "raw_schedules",
        metadata,
        Column("schedule_id", String(64), primary_key=True),
        Column("next_run_ms", BigInteger),
        Column("version", Integer),
    )
    engine = raw_engine(url)
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(
            insert(schedules),
            [{"schedule_id": f"s{n}", "next_run_ms": START_MS, "version": 1} for n in range(count)],
        )
    cas = (
        update(schedules)
        .where(
            schedules.c.schedule_id == bindparam("b_id"),
            schedules.c.version == bindparam("b_version"),
        )
        .values(next_run_ms=bindparam("b_next"), version=bindparam("b_version") + 1)
    )
    began = time.perf_counter()
    for start in range(0, count, RAW_BATCH):
        ids = [f"s{n}" for n in range(start, min(start + RAW_BATCH, count))]
        with engine.begin() as connection:
            connection.execute(
                insert(jobs),
                [
                    {
                        "job_id": f"{i}-{START_MS}",
                        "schedule_id": i,
                        "tick_ms": START_MS,
                        "kind": "report.build",
                        "payload": "{}",
                    }
                    for i in ids
                ],
            )
            connection.execute(
                insert(audit),
                [
                    {
                        "schedule_id": i,
                        "tick_ms": START_MS,
                        "job_id": f"{i}-{START_MS}",
                        "outcome": "enqueued",
                        "reason": "accepted",
                        "recorded_at_ms": START_MS,
                    }
                    for i in ids
                ],
            )
            connection.execute(
                cas, [{"b_id": i, "b_version": 1, "b_next": START_MS + 60_000} for i in ids]
            )
    elapsed = time.perf_counter() - began
    engine.dispose()
    return count / elapsed


def regression(message: str) -> None:
    """A result below its target, said loudly in the output (and on stderr), so a
    run that fell behind cannot be read as a pass."""
    line = f"REGRESSION: {message}"
    print(line, flush=True)
    print(line, file=sys.stderr, flush=True)


def catch_up(backend: str, count: int, trials: int) -> list[object]:
    """Ours, the raw loop and our rows' floor alternately, `trials` times each;
    the medians and their ratios (one slow trial, on a noisy machine, moves none).
    A median ratio below the backend's target is a REGRESSION line."""
    ours, raw, floor = [], [], []
    for _ in range(trials):
        ours.append(catch_up_ours(backend, count))
        with fresh_database(backend) as url:
            raw.append(raw_loop(url, count))
        floor.append(our_rows_loop(backend, count))
    ours_median, raw_median = statistics.median(ours), statistics.median(raw)
    floor_median = statistics.median(floor)
    ratio, target = ours_median / raw_median, CATCH_UP_TARGETS[backend]
    if ratio < target:
        regression(
            f"catch-up burst of {count:,} on {backend}: {ratio:.3f}x the raw loop "
            f"(ours {ours_median:,.0f}/s, raw {raw_median:,.0f}/s), target >= {target}x"
        )
    return [
        backend,
        f"{count:,}",
        f"{ours_median:,.0f}",
        f"{raw_median:,.0f}",
        f"{ours_median / raw_median:.2f}",
        f"{min(o / r for o, r in zip(ours, raw, strict=True)):.2f}-"
        f"{max(o / r for o, r in zip(ours, raw, strict=True)):.2f}",
        f"{floor_median:,.0f}",
        f"{floor_median / raw_median:.2f}",
    ]


def our_rows_loop(backend: str, count: int) -> float:
    """The floor of this event model: what every tick must write here, by a raw
    loop like the baseline's, 500 ticks per transaction, on a store Headgate
    made (its schema and indexes): the job's event and row, the attempt's event
    and history row, the schedule's compare-and-set update, and the log head."""

    from headgate._domain.streams import job_stream
    from headgate._store.sql.schema import LIVE, events, log_head

    jobs, history, schedules = LIVE.jobs, LIVE.enqueue_history, LIVE.schedules
    with fresh_database(backend) as url:
        hg = Headgate(url, clock=FakeClock(START_MS - 1))
        define_many(hg, count, "@every:60000", START_MS)
        hg.close()
        engine = raw_engine(url)
        cas = (
            update(schedules)
            .where(
                schedules.c.schedule_id == bindparam("b_id"),
                schedules.c.version == bindparam("b_version"),
            )
            .values(
                next_run_ms=bindparam("b_next"),
                due_at_ms=bindparam("b_next"),
                last_enqueued_ms=START_MS,
                version=bindparam("b_version") + 1,
                updated_at_ms=START_MS,
            )
        )
        head_query = locked_log_head(engine)
        began = time.perf_counter()
        for start in range(0, count, RAW_BATCH):
            with engine.begin() as connection:
                head = last_position(connection, head_query)
                event_rows, job_rows, history_rows = [], [], []
                for n in range(start, min(start + RAW_BATCH, count)):
                    schedule_id, job_id = f"s{n}", f"s{n}-{START_MS}"
                    job = {
                        "job_id": job_id,
                        "kind": "report.build",
                        "queue": "default",
                        "payload": f'{{"n":{n}}}',
                        "state": "pending",
                        "unique_key": f"tick:{schedule_id}:{START_MS}",
                        "created_at_ms": START_MS,
                        "updated_at_ms": START_MS,
                        "periodic_schedule_id": schedule_id,
                        "periodic_tick_ms": START_MS,
                    }
                    attempt = {
                        "schedule_id": schedule_id,
                        "tick_ms": START_MS,
                        "job_id": job_id,
                        "outcome": "enqueued",
                        "reason": "accepted",
                        "attempt": 1,
                        "recorded_at_ms": START_MS,
                    }
                    event_rows.append(_event(head + 1, job_stream(job_id), 1, "JobEnqueued", job))
                    event_rows.append(
                        _event(
                            head + 2, schedule_stream(schedule_id), 2, "EnqueueAttempted", attempt
                        )
                    )
                    job_rows.append(job)
                    history_rows.append({**attempt, "event_id": head + 2})
                    head += 2
                connection.execute(insert(events), event_rows)
                connection.execute(insert(jobs), job_rows)
                connection.execute(insert(history), history_rows)
                connection.execute(
                    cas,
                    [
                        {"b_id": row["schedule_id"], "b_version": 1, "b_next": START_MS + 60_000}
                        for row in history_rows
                    ],
                )
                connection.execute(update(log_head).values(position=head))
        elapsed = time.perf_counter() - began
        with engine.connect() as connection:
            advanced = connection.execute(
                text("SELECT COUNT(*) FROM headgate_schedules WHERE next_run_ms > :t"),
                {"t": START_MS},
            ).scalar_one()
            records = connection.execute(
                text("SELECT COUNT(*) FROM headgate_enqueue_history")
            ).scalar_one()
        assert advanced == records == count, (advanced, records)
        engine.dispose()
    return count / elapsed


def _event(position: int, stream_id: str, version: int, type_name: str, body: Any) -> Any:
    return {
        "position": position,
        "stream_id": stream_id,
        "version": version,
        "type": type_name,
        "schema_version": 1,
        "body": json.dumps(body, sort_keys=True, separators=(",", ":")),
        "recorded_at_ms": START_MS,
    }


def catch_up_ours(backend: str, count: int) -> float:
    with fresh_database(backend) as url:
        clock = FakeClock(START_MS - 1)
        hg = Headgate(url, clock=clock, config=RuntimeConfig(lease_ttl_ms=3_600_000))
        define_many(hg, count, "@every:60000", START_MS)
        clock.set(START_MS + 1)
        began = time.perf_counter()  # start() itself claims the lease and sends the first batch
        hg.start()
        assert hg.fire_due_ticks(timeout=600)
        elapsed = time.perf_counter() - began
        with hg._core.store.engine.connect() as connection:
            jobs = connection.execute(text("SELECT COUNT(*) FROM headgate_jobs")).scalar_one()
            advanced = connection.execute(
                text("SELECT COUNT(*) FROM headgate_schedules WHERE next_run_ms > :t"),
                {"t": START_MS},
            ).scalar_one()
            records = connection.execute(
                text("SELECT COUNT(*) FROM headgate_enqueue_history")
            ).scalar_one()
        assert jobs == advanced == records == count, (jobs, advanced, records)
        hg.close()
        return count / elapsed


def sql_alone(count: int) -> list[object]:
    with fresh_database("sqlite") as url:
        path = url.removeprefix("sqlite:///")
        clock = FakeClock(START_MS - 1)
        hg = Headgate(url, clock=clock, config=RuntimeConfig(lease_ttl_ms=3_600_000))
        define_many(hg, count, "@every:60000", START_MS)
        hg._core.store.log.checkpoint()
        shutil.copy(path, f"{path}.start")
        issued: list[tuple[str, Any, bool]] = []

        def capture(*args: Any) -> None:
            _connection, _cursor, statement, parameters, _context, many = args
            issued.append((statement, parameters, many))

        event.listen(Engine, "before_cursor_execute", capture)
        clock.set(START_MS + 1)
        hg.start()
        began = time.perf_counter()
        assert hg.fire_due_ticks(timeout=600)
        ours = count / (time.perf_counter() - began)
        event.remove(Engine, "before_cursor_execute", capture)
        hg.close()
        replay = sqlite3.connect(f"{path}.start", isolation_level=None)
        replay.execute("PRAGMA journal_mode=WAL")
        replay.execute("PRAGMA synchronous=FULL")
        began = time.perf_counter()
        for statement, parameters, many in issued:
            if statement.startswith("BEGIN") and replay.in_transaction:
                replay.execute("COMMIT")  # commits are not statements; each BEGIN ends one
            if many:
                replay.executemany(statement, parameters)
            else:
                replay.execute(statement, parameters).fetchall()
        if replay.in_transaction:
            replay.execute("COMMIT")
        alone = count / (time.perf_counter() - began)
        replay.close()
    with fresh_database("sqlite") as url:
        raw = raw_loop(url, count)
    return [
        f"{count:,}",
        f"{ours:,.0f}",
        f"{alone:,.0f}",
        f"{raw:,.0f}",
        f"{ours / raw:.2f}",
        f"{alone / raw:.2f}",
    ]


class Lateness(EnqueueHook):
    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.samples: list[int] = []
        self.lock = threading.Lock()

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        assert result.committed_at_ms is not None
        with self.lock:
            self.samples.append(result.committed_at_ms - context.tick_ms)


def steady_state(backend: str, schedules: int, seconds: int) -> list[object]:
    with fresh_database(backend) as url:
        from headgate import SystemClock

        clock = SystemClock()
        lateness = Lateness(clock)
        hg = Headgate(url, clock=clock, hooks=[lateness])
        first_tick = (clock.now_ms() // 1000 + 4) * 1000  # after the set-up, even on a busy machine
        define_many(hg, schedules, "@every:1000", first_tick)
        hg.start()
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        stop_probing = threading.Event()
        probe = threading.Thread(target=probe_writes, args=(hg, stop_probing, api_latency := []))
        probe.start()
        time.sleep(seconds + (first_tick - clock.now_ms()) / 1000)
        stop_probing.set()
        probe.join()
        cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
        # Every tick due well before the stop (a batch commits within ~20 ms of its
        # instant) must have a job, for every schedule; one that has none was lost,
        # or merged away by the skip policy under overload.
        last_due = (clock.now_ms() - 200) // 1000 * 1000
        hg.stop()
        with hg._core.store.engine.connect() as connection:
            jobs = connection.execute(
                text("SELECT COUNT(*) FROM headgate_jobs WHERE periodic_schedule_id IS NOT NULL")
            ).scalar_one()
            fired = connection.execute(
                text("SELECT COUNT(*) FROM headgate_jobs WHERE periodic_tick_ms <= :last"),
                {"last": last_due},
            ).scalar_one()
        seconds_ticked = (last_due - first_tick) // 1000 + 1
        lost = schedules * seconds_ticked - fired
        hg.close()
        samples = sorted(lateness.samples)
        p99 = samples[int(len(samples) * 0.99) - 1]
        if p99 > STEADY_P99_TARGET_MS or lost:
            regression(
                f"steady state of {schedules:,} at one instant on {backend}: p99 lateness "
                f"{p99} ms, {lost:,} lost; target p99 <= {STEADY_P99_TARGET_MS} ms, 0 lost"
            )
        api_latency.sort()
        return [
            backend,
            f"{schedules:,}",
            f"{fired / seconds_ticked:,.0f}",
            f"{jobs:,}",
            f"{lost:,}",
            f"{statistics.median(samples):.0f}",
            f"{p99}",
            f"{samples[-1]}",
            f"{cpu / wall:.0%}",
            f"{api_latency[int(len(api_latency) * 0.99) - 1]:.0f} / {api_latency[-1]:.0f}",
        ]


def probe_writes(hg: Headgate, stop: threading.Event, latency_ms: list[float]) -> None:
    """An API client beside the scheduler: an ordinary enqueue every 20 ms, timed."""
    while not stop.wait(0.02):
        began = time.perf_counter()
        hg.enqueue(kind="api.probe", payload={"at": began})
        latency_ms.append((time.perf_counter() - began) * 1000)


FAILOVER_CHILD = textwrap.dedent(
    """
    import sys, time
    from headgate import Headgate, RuntimeConfig
    hg = Headgate(sys.argv[1], config=RuntimeConfig(lease_ttl_ms=int(sys.argv[2])))
    hg.start()
    while True:
        time.sleep(1)
    """
)


def failover(backend: str, trials: int = 3, ttl_ms: int = 1500) -> list[list[object]]:
    rows = []
    with fresh_database(backend) as url:
        observer = Headgate(url, config=RuntimeConfig(min_interval_ms=100))
        observer.schedules.put("pulse", spec="@every:100", kind="k")
        children = [
            subprocess.Popen(
                [sys.executable, "-c", FAILOVER_CHILD, url, str(ttl_ms)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(trials + 1)
        ]
        try:
            for trial in range(trials):
                while (status := observer.runtime.lease()) is None:
                    time.sleep(0.05)
                time.sleep(1.0)
                killed_ms = observer.clock.now_ms()
                os.kill(status.pid, signal.SIGKILL)
                while True:
                    with observer._core.store.engine.connect() as connection:
                        # A tick after the kill can only have been fired by another
                        # process; timed when seen (up to one poll late: conservative).
                        fired = connection.execute(
                            text("SELECT 1 FROM headgate_jobs WHERE periodic_tick_ms > :k LIMIT 1"),
                            {"k": killed_ms},
                        ).first()
                    if fired is not None:
                        seen_ms = observer.clock.now_ms()
                        break
                    time.sleep(0.02)
                rows.append(
                    [
                        backend,
                        str(trial + 1),
                        f"{(seen_ms - killed_ms) / 1000:.2f}",
                        f"{ttl_ms / 1000:.1f}",
                    ]
                )
        finally:
            for child in children:
                child.kill()
                child.wait()
            observer.close()
    return rows


MEMORY_CHILD = textwrap.dedent(
    """
    import resource, sys, threading
    from headgate import Headgate, RuntimeConfig
    from headgate.testing import FakeClock
    from benchmarks.scheduler import START_MS, quiet_json_logs
    quiet_json_logs()
    clock = FakeClock(START_MS + 1)
    hg = Headgate(sys.argv[1], clock=clock, config=RuntimeConfig(lease_ttl_ms=3_600_000))
    hg.start()
    assert hg.fire_due_ticks(timeout=1200)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, threading.active_count(), flush=True)
    hg.close()
    """
)


def memory(backend: str, count: int) -> list[object]:
    with fresh_database(backend) as url:
        hg = Headgate(url, clock=FakeClock(START_MS - 1))
        define_many(hg, count, "@every:60000", START_MS)
        hg.close()
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, url],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.getcwd(),
        )
        rss_kb, threads = result.stdout.split()
    return [backend, f"{count:,}", f"{int(rss_kb) / 1024:.0f}", threads]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--only",
        choices=["catchup", "steady", "failover", "memory", "sql"],
        action="append",
    )
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    only = set(args.only or ["catchup", "steady", "failover", "memory", "sql"])
    quiet_json_logs()
    if "catchup" in only:
        sizes = [1000, 10_000]
        trials = 1 if args.quick else 3
        rows = [catch_up(backend, size, trials) for backend in backends for size in sizes]
        print_table(
            f"Catch-up burst (schedules/s, median of {trials} alternating trials; "
            "ratio = ours / raw loop, same run; floor = our rows by a raw loop; "
            "target ratio: SQLite >= 0.2, PostgreSQL >= 0.5)",
            [
                "backend",
                "schedules",
                "ours/s",
                "raw/s",
                "ratio",
                "per-trial ratios",
                "floor/s",
                "floor/raw",
            ],
            rows,
        )
    if "steady" in only:
        seconds = 5 if args.quick else 30
        sizes = [4000] if args.quick else [1000, 4000]
        rows = [steady_state(backend, size, seconds) for backend in backends for size in sizes]
        print_table(
            f"Steady state: schedules at @every:1000 for {seconds} s, all due at the "
            f"same instants (lateness in ms; target: 4,000 at p99 <= {STEADY_P99_TARGET_MS}, "
            "0 lost)",
            [
                "backend",
                "schedules",
                "jobs/s",
                "jobs",
                "lost",
                "p50",
                "p99",
                "max",
                "CPU",
                "API write p99/max",
            ],
            rows,
        )
    if "failover" in only:
        rows = [row for backend in backends for row in failover(backend, 1 if args.quick else 3)]
        print_table(
            "Failover: SIGKILL of the holder -> next tick enqueued elsewhere",
            ["backend", "trial", "seconds", "lease TTL s"],
            rows,
        )
    if "memory" in only:
        counts = [1_000, 10_000] if args.quick else [10_000, 100_000]
        rows = [memory(backend, count) for backend in backends for count in counts]
        print_table(
            "Memory of a runtime firing every schedule once",
            ["backend", "schedules", "max RSS MB", "threads"],
            rows,
        )

    if "sql" in only and "sqlite" in backends:
        count = 1000 if args.quick else 10_000
        print_table(
            "SQLite catch-up: our statements replayed alone (no Python) vs the raw loop",
            ["schedules", "ours/s", "SQL alone/s", "raw/s", "ours/raw", "SQL alone/raw"],
            [sql_alone(count)],
        )


if __name__ == "__main__":
    main()
