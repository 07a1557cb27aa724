"""Worker benchmarks, on SQLite and PostgreSQL, printed as tables.

1. Claim + run + complete of no-op jobs from a 20,000-job backlog, one
   process. Ours: a worker pool (capacity C on one queue) and, beside it,
   `drain()` (claims 100 at a time, runs them inline). Compared, in the same
   run and database, with
   * a raw SQLAlchemy loop on a plain table: claim C rows in one statement
     (`UPDATE ... WHERE job_id IN (SELECT ... LIMIT C [FOR UPDATE SKIP
     LOCKED]) RETURNING`), call the no-op, complete them (one executemany
     UPDATE), two transactions per batch;
   * this design's floor: the rows it must write per job, written the raw
     way in the same two transactions per batch (the claim: the rows made
     running through the claim index under the log head's lock; then the
     JobSucceeded event, the row's update and the attempt's history row,
     and the log head), with no decisions, objects or logging.
2. Pickup latency on an idle queue: the enqueue call's start to the
   handler's start (so the enqueue's own commit counts), in this process and
   in another process (PostgreSQL wakes it by NOTIFY, SQLite by the file's
   data version; in the same process the enqueue wakes it directly), beside
   a raw SKIP LOCKED loop (`benchmarks.raw_pickup`) sampled in turn with it.
   Target (issue 38): p50 and p99 <= the raw loop's x 1.3 on PostgreSQL.
3. Scheduler undisturbed: 1,000 schedules at @every:1000 with this
   process's workers saturated by the jobs they make (each handler sleeps
   50 ms on 20 threads, below the 1,000 jobs/s the schedules make): lost
   ticks and lateness as in benchmarks.scheduler's steady state.
4. Rescue time: a worker process SIGKILLed mid-job, default settings
   (heartbeat TTL 10 s, rescue every 5 s): the kill to the job's rescue and
   to its completion by this process.

Run: python -m benchmarks.workers [--backend sqlite|postgresql] [--quick]
     [--only throughput|pickup|steady|rescue]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Engine,
    MetaData,
    bindparam,
    insert,
    select,
    text,
    update,
)

from benchmarks import raw_pickup
from benchmarks._common import (
    bytes_written,
    fresh_database,
    last_position,
    locked_log_head,
    print_table,
    raw_engine,
    raw_jobs_table,
)
from benchmarks.scheduler import Lateness, define_many, quiet_json_logs
from headgate import Headgate, JobContext, SystemClock, WorkerConfig
from headgate._domain.events import JobEnqueued
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream
from headgate._store.port import NO_STREAM, StreamAppend

ROOT = Path(__file__).resolve().parents[1]
SETUP_BATCH = 500
KIND = "noop"
DEFAULT_OPTIONS = JobOptions(queue="default")


def _noop(job: JobContext) -> None:
    return None


def _enqueue_backlog(hg: Headgate, count: int) -> None:
    """`count` pending jobs, written as an enqueue writes them, 500 per transaction."""
    for start in range(0, count, SETUP_BATCH):
        hg._core.store.log.append_units(
            [
                [
                    StreamAppend(
                        job_stream(f"j{n:06d}"),
                        NO_STREAM,
                        (JobEnqueued(f"j{n:06d}", KIND, {"n": n}, DEFAULT_OPTIONS),),
                    )
                ]
                for n in range(start, min(start + SETUP_BATCH, count))
            ]
        )


def _completed(engine: Engine, table: str) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                text(f"SELECT COUNT(*) FROM {table} WHERE state = 'completed'")
            ).scalar_one()
        )


def ours_pool(backend: str, count: int, capacity: int) -> tuple[float, float]:
    """Jobs per second, and bytes written per job (`bytes_written`)."""
    with fresh_database(backend) as url:
        hg = Headgate(url)
        hg.handler(KIND)(_noop)
        _enqueue_backlog(hg, count)
        with bytes_written(url) as written:
            began = time.perf_counter()
            hg.start(WorkerConfig(queues={"default": capacity}), scheduler=False)
            pool = hg._core.pool
            assert pool is not None
            while pool.stats.succeeded < count:
                time.sleep(0.005)
            elapsed = time.perf_counter() - began
            hg.stop()
            per_job = written() / count
        assert _completed(hg._core.store.engine, "headgate_jobs") == count
        hg.close()
    return count / elapsed, per_job


def ours_drain(backend: str, count: int) -> float:
    with fresh_database(backend) as url:
        hg = Headgate(url)
        hg.handler(KIND)(_noop)
        _enqueue_backlog(hg, count)
        began = time.perf_counter()
        summary = hg.drain(timeout=3600)
        elapsed = time.perf_counter() - began
        assert summary.succeeded == count, summary
        hg.close()
    return count / elapsed


def raw_loop(backend: str, count: int, batch: int) -> tuple[float, float]:
    """Jobs per second, and bytes written per job (`bytes_written`)."""
    with fresh_database(backend) as url:
        engine = raw_engine(url)
        metadata = MetaData()
        jobs = raw_jobs_table(metadata)
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "CREATE INDEX ix_raw_jobs_claimable ON raw_jobs (queue, run_at_ms, job_id)"
                    " WHERE state = 'pending'"
                )
            )
            connection.execute(
                insert(jobs),
                [
                    {
                        "job_id": f"j{n:06d}",
                        "queue": "default",
                        "kind": KIND,
                        "payload": json.dumps({"n": n}),
                        "state": "pending",
                        "run_at_ms": n,
                        "attempts": 0,
                    }
                    for n in range(count)
                ],
            )
        skip_locked = " FOR UPDATE SKIP LOCKED" if engine.dialect.name == "postgresql" else ""
        claim = text(
            "UPDATE raw_jobs SET state = 'running', attempts = attempts + 1,"
            " worker_id = :worker, deadline_ms = :deadline"
            " WHERE job_id IN (SELECT job_id FROM raw_jobs"
            "  WHERE state = 'pending' AND queue = 'default' AND run_at_ms <= :now"
            f"  ORDER BY run_at_ms, job_id LIMIT :batch{skip_locked})"
            " RETURNING job_id, payload"
        )
        complete = (
            update(jobs)
            .where(jobs.c.job_id == bindparam("b_id"))
            .values(
                state="completed", result=bindparam("b_result"), worker_id=None, deadline_ms=None
            )
        )
        done = 0
        written = bytes_written(url)
        since = written.__enter__()
        began = time.perf_counter()
        while True:
            now = int(time.time() * 1000)
            with engine.begin() as connection:
                claimed = connection.execute(
                    claim,
                    {"worker": "raw", "deadline": now + 60_000, "now": now + count, "batch": batch},
                ).all()
            if not claimed:
                break
            ends = []
            for job_id, payload in claimed:
                json.loads(payload)
                ends.append({"b_id": job_id, "b_result": json.dumps(None)})
            with engine.begin() as connection:
                connection.execute(complete, ends)
            done += len(ends)
        elapsed = time.perf_counter() - began
        per_job = since() / count
        written.__exit__(None, None, None)
        assert done == count and _completed(engine, "raw_jobs") == count
        engine.dispose()
    return count / elapsed, per_job


def _event(
    position: int, stream: str, version: int, type_name: str, body: dict[str, Any], *, at: int
) -> dict[str, Any]:
    return {
        "position": position,
        "stream_id": stream,
        "version": version,
        "type": type_name,
        "schema_version": 1,
        "body": json.dumps(body, sort_keys=True, separators=(",", ":")),
        "recorded_at_ms": at,
    }


def floor_loop(backend: str, count: int, batch: int) -> float:
    """The rows this design writes per job, by a raw loop, on a store Headgate
    made (its schema and indexes) with the backlog Headgate enqueued: the claim
    (the job rows made running, under the log head's lock), then the end (the
    JobSucceeded event, the row's update at its version, the attempt's history
    row, the log head), in two transactions per batch as the raw loop."""
    from headgate._store.sql.predicates import CLAIMABLE_WHERE
    from headgate._store.sql.schema import LIVE, events, log_head

    jobs, attempts = LIVE.jobs, LIVE.job_attempts
    with fresh_database(backend) as url:
        hg = Headgate(url)
        _enqueue_backlog(hg, count)
        hg.close()
        engine = raw_engine(url)
        head_query = locked_log_head(engine)
        due = (
            select(jobs.c.job_id)
            .where(
                text(CLAIMABLE_WHERE),
                jobs.c.queue == "default",
                jobs.c.run_at_ms <= bindparam("now"),
            )
            .order_by(jobs.c.run_at_ms, jobs.c.job_id)
            .limit(batch)
        )
        claim = (
            update(jobs)
            .where(jobs.c.job_id.in_(due.scalar_subquery()))
            .values(
                state="running",
                worker_id="w",
                deadline_ms=bindparam("now") + 60_000,
                updated_at_ms=bindparam("now"),
            )
            .returning(jobs.c.job_id, jobs.c.payload, jobs.c.version, jobs.c.attempts)
        )
        cas = (
            update(jobs)
            .where(jobs.c.job_id == bindparam("b_id"), jobs.c.version == bindparam("b_version"))
            .values(
                state="completed",
                worker_id=None,
                deadline_ms=None,
                attempts=bindparam("b_attempts"),
                result="null",
                version=bindparam("b_version") + 1,
                updated_at_ms=bindparam("b_at"),
            )
        )
        done = 0
        began = time.perf_counter()
        while True:
            now = int(time.time() * 1000)
            with engine.begin() as connection:
                connection.execute(head_query).scalar_one()
                rows = connection.execute(claim, {"now": now}).all()
            if not rows:
                break
            for _, payload, _, _ in rows:
                json.loads(payload)
            end = int(time.time() * 1000)
            with engine.begin() as connection:
                head = last_position(connection, head_query)
                end_events, end_updates, history = [], [], []
                for job_id, _payload, version, tried in rows:
                    head += 1
                    body = {
                        "attempt": tried + 1,
                        "job_id": job_id,
                        "result": None,
                        "started_at_ms": now,
                        "worker_id": "w",
                    }
                    end_events.append(
                        _event(head, job_stream(job_id), version + 1, "JobSucceeded", body, at=end)
                    )
                    end_updates.append(
                        {"b_id": job_id, "b_version": version, "b_attempts": tried + 1, "b_at": end}
                    )
                    history.append(
                        {
                            "event_id": head,
                            "job_id": job_id,
                            "attempt": tried + 1,
                            "outcome": "succeeded",
                            "worker_id": "w",
                            "started_at_ms": now,
                            "ended_at_ms": end,
                            "error_type": None,
                            "error_message": None,
                        }
                    )
                connection.execute(insert(events), end_events)
                connection.execute(cas, end_updates)
                connection.execute(insert(attempts), history)
                connection.execute(update(log_head).values(position=head))
            done += len(rows)
        elapsed = time.perf_counter() - began
        assert done == count and _completed(engine, "headgate_jobs") == count
        engine.dispose()
    return count / elapsed


def throughput(backend: str, count: int, capacity: int) -> list[object]:
    raw, raw_bytes = raw_loop(backend, count, capacity)
    floor = floor_loop(backend, count, capacity)
    pool, pool_bytes = ours_pool(backend, count, capacity)
    drained = ours_drain(backend, count)
    return [
        backend,
        capacity,
        f"{pool:,.0f}",
        f"{drained:,.0f}",
        f"{raw:,.0f}",
        f"{floor:,.0f}",
        f"{pool / floor:.2f}",
        f"{pool / raw:.2f}",
        f"{drained / floor:.2f}",
        f"{floor / raw:.2f}",
        f"{pool_bytes / 1024:.1f}",
        f"{raw_bytes / 1024:.1f}",
    ]


PICKUP_HOST = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate, WorkerConfig
    hg = Headgate(sys.argv[1])

    @hg.handler("stamp")
    def stamp(job):
        print(f"started {job.id} {time.time()!r}", flush=True)

    hg.start(WorkerConfig(queues={"default": 4}), scheduler=False)
    print("ready", flush=True)
    threading.Event().wait()
    """
)
RAW_HOST = "from benchmarks.raw_pickup import main; main()"


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(int(len(ordered) * share) - 1, 0)]


Enqueue = Callable[[], str]


def _pickup_samples(
    samples: int, enqueues: dict[str, Enqueue], started: dict[str, float]
) -> dict[str, list[float]]:
    """Each sample enqueues one job on each worker in turn (so both see the same
    machine), on an idle queue each time; the enqueue call's start to its
    handler's start, per worker (and, as `<name> enqueue`, to the call's return)."""
    latencies: dict[str, list[float]] = {}
    for _ in range(samples):
        for name, enqueue in enqueues.items():
            time.sleep(0.05)  # an idle queue each time
            sent = time.time()
            job_id = enqueue()
            returned = time.time()
            deadline = time.monotonic() + 10
            while (at := started.get(job_id)) is None:
                assert time.monotonic() < deadline, f"{name}: a job was not picked up in 10 s"
                time.sleep(0.0002)
            latencies.setdefault(name, []).append((at - sent) * 1000)
            latencies.setdefault(f"{name} enqueue", []).append((returned - sent) * 1000)
    return latencies


def _host(code: str, url: str, started: dict[str, float]) -> subprocess.Popen[str]:
    """A worker process; its `started <id> <time>` lines land in `started`."""
    host = subprocess.Popen(
        [sys.executable, "-c", code, url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert host.stdout is not None and host.stdout.readline().strip() == "ready"
    out = host.stdout

    def read() -> None:
        for line in out:
            word, job_id, at = line.split()
            if word == "started":
                started[job_id] = float(at)

    threading.Thread(target=read, daemon=True).start()
    return host


def pickup(backend: str, samples: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with fresh_database(backend) as url:
        engine = raw_engine(url)
        raw_pickup.create_table(engine)
        hg = Headgate(url)
        started: dict[str, float] = {}

        @hg.handler("stamp")
        def stamp(job: JobContext) -> None:
            started[job.id] = time.time()

        def stamp_raw(job_id: str) -> None:
            started[job_id] = time.time()

        def ours() -> str:
            return hg.enqueue("stamp").id

        def raw() -> str:
            return raw_pickup.enqueue(engine)

        hg.start(WorkerConfig(queues={"default": 4}), scheduler=False)
        raw_worker = raw_pickup.RawWorker(url, stamp_raw)
        raw_worker.start()
        try:
            same = _pickup_samples(samples, {"ours": ours, "raw": raw}, started)
        finally:
            raw_worker.stop()
            hg.close()
        rows.append(_pickup_row(backend, "same process", same))

        observer = Headgate(url)
        hosts = [_host(PICKUP_HOST, url, started), _host(RAW_HOST, url, started)]
        try:
            time.sleep(0.5)
            other = _pickup_samples(
                samples, {"ours": lambda: observer.enqueue("stamp").id, "raw": raw}, started
            )
        finally:
            for host in hosts:
                host.send_signal(signal.SIGTERM)
                host.wait(timeout=30)
            observer.close()
            engine.dispose()
        rows.append(_pickup_row(backend, "other process", other))
    return rows


def _pickup_row(backend: str, where: str, latencies: dict[str, list[float]]) -> list[object]:
    ours, raw = latencies["ours"], latencies["raw"]
    p50, raw_p50 = statistics.median(ours), statistics.median(raw)
    p99, raw_p99 = _percentile(ours, 0.99), _percentile(raw, 0.99)
    return [
        backend,
        where,
        len(ours),
        f"{p50:.1f}",
        f"{p99:.1f}",
        f"{max(ours):.1f}",
        f"{raw_p50:.1f}",
        f"{raw_p99:.1f}",
        f"{p50 / raw_p50:.2f}",
        f"{p99 / raw_p99:.2f}",
        f"{statistics.median(latencies['ours enqueue']):.1f}",
        f"{statistics.median(latencies['raw enqueue']):.1f}",
    ]


def steady_with_workers(backend: str, schedules: int, seconds: int) -> list[object]:
    with fresh_database(backend) as url:
        clock = SystemClock()
        lateness = Lateness(clock)
        hg = Headgate(url, clock=clock, hooks=[lateness])
        ran = [0]

        @hg.handler("report.build")
        def build(job: JobContext) -> None:
            time.sleep(0.05)
            ran[0] += 1

        first_tick = (clock.now_ms() // 1000 + 2) * 1000
        define_many(hg, schedules, "@every:1000", first_tick)
        hg.start(WorkerConfig(queues={"default": 20}))
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        time.sleep(seconds + (first_tick - clock.now_ms()) / 1000)
        cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
        last_due = (clock.now_ms() - 200) // 1000 * 1000
        hg.stop()
        with hg._core.store.engine.connect() as connection:
            fired = connection.execute(
                text("SELECT COUNT(*) FROM headgate_jobs WHERE periodic_tick_ms <= :last"),
                {"last": last_due},
            ).scalar_one()
            running_or_pending = connection.execute(
                text("SELECT COUNT(*) FROM headgate_jobs WHERE state IN ('pending', 'running')")
            ).scalar_one()
        seconds_ticked = (last_due - first_tick) // 1000 + 1
        lost = schedules * seconds_ticked - fired
        hg.close()
        samples = sorted(lateness.samples)
        return [
            backend,
            f"{fired / seconds_ticked:,.0f}",
            f"{lost:,}",
            f"{statistics.median(samples):.0f}",
            f"{_percentile([float(s) for s in samples], 0.99):.0f}",
            f"{samples[-1]}",
            f"{ran[0] / wall:,.0f}",
            f"{running_or_pending:,}",
            f"{cpu / wall:.0%}",
        ]


RESCUE_HOST = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate, WorkerConfig
    hg = Headgate(sys.argv[1])

    @hg.handler("long", queue="long")
    def long(job):
        print("running", flush=True)
        time.sleep(600)

    hg.start(WorkerConfig(queues={"long": 1}), scheduler=False)
    threading.Event().wait()
    """
)


def rescue(backend: str, trials: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for trial in range(1, trials + 1):
        with fresh_database(backend) as url:
            hg = Headgate(url)
            done = threading.Event()
            hg.handler("long", queue="long")(lambda job, done=done: done.set())

            job = hg.enqueue("long", queue="long")
            host = subprocess.Popen(
                [sys.executable, "-c", RESCUE_HOST, url],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=subprocess.PIPE,
                text=True,
            )
            assert host.stdout is not None and host.stdout.readline().strip() == "running"
            hg.start(WorkerConfig(queues={"other": 1}), scheduler=False)
            time.sleep(trial)  # kill at different points of the heartbeat's period
            host.kill()
            host.wait(timeout=10)
            killed = time.monotonic()
            while hg.jobs.get(job.id).state == "running":
                time.sleep(0.01)
            rescued = time.monotonic() - killed
            hg.stop()
            hg.start(WorkerConfig(queues={"long": 1}), scheduler=False)
            assert done.wait(60)
            completed = time.monotonic() - killed
            assert hg.jobs.get(job.id).crash_count == 1
            hg.close()
        rows.append([backend, trial, f"{rescued:.1f}", f"{completed:.1f}", "10 + 5", "<= 20"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--only", choices=["throughput", "pickup", "steady", "rescue"], action="append"
    )
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    only = set(args.only or ["throughput", "pickup", "steady", "rescue"])
    quiet_json_logs()
    if "throughput" in only:
        count = 2_000 if args.quick else 20_000
        rows = [
            throughput(backend, count, capacity) for backend in backends for capacity in (10, 100)
        ]
        print_table(
            f"Claim + run + complete, {count:,} no-op jobs (jobs/s; C = pool capacity and the"
            " raw loop's and floor's batch; drain claims 100 at a time; KB written per job:"
            " PostgreSQL's WAL, SQLite's writes to storage). Targets: pool/raw >= 0.6 at"
            " C=10 and >= 0.7 at C=100 on PostgreSQL, >= 0.35 at C=10 on SQLite;"
            " <= 2 KB of WAL per job on PostgreSQL, <= 10 KB written per job on SQLite",
            [
                "backend",
                "C",
                "pool/s",
                "drain/s",
                "raw/s",
                "floor/s",
                "pool/floor",
                "pool/raw",
                "drain/floor",
                "floor/raw",
                "KB/job",
                "raw KB/job",
            ],
            rows,
        )
    if "pickup" in only:
        samples = 50 if args.quick else 300
        rows = [row for backend in backends for row in pickup(backend, samples)]
        print_table(
            "Pickup latency on an idle queue: enqueue call -> handler start (ms), ours and"
            " the raw SKIP LOCKED loop's (benchmarks.raw_pickup), sampled in turn; of it,"
            " the enqueue call's own."
            " Target: ours <= raw x 1.3 at p50 and p99 on PostgreSQL",
            [
                "backend",
                "worker",
                "samples",
                "p50",
                "p99",
                "max",
                "raw p50",
                "raw p99",
                "p50/raw",
                "p99/raw",
                "enqueue p50",
                "raw enqueue p50",
            ],
            rows,
        )
    if "steady" in only:
        seconds = 5 if args.quick else 30
        rows = [steady_with_workers(backend, 1000, seconds) for backend in backends]
        print_table(
            f"Scheduler with its workers saturated: 1,000 schedules at @every:1000 for {seconds} s"
            " (lateness in ms; handlers sleep 50 ms on 20 threads)",
            ["backend", "ticks/s", "lost", "p50", "p99", "max", "jobs run/s", "unfinished", "CPU"],
            rows,
        )
    if "rescue" in only:
        rows = [row for backend in backends for row in rescue(backend, 1 if args.quick else 3)]
        print_table(
            "Rescue after SIGKILL of a worker mid-job, default settings (seconds from the kill)",
            ["backend", "trial", "rescued", "completed", "TTL + interval", "target"],
            rows,
        )


if __name__ == "__main__":
    main()
