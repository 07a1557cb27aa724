"""Flow-control benchmarks, on SQLite and PostgreSQL, printed as tables.

1. What limits cost: claim + run + complete of no-op jobs from a backlog, one
   process, a worker pool of capacity C on one queue, in three set-ups side
   by side in one run and database server:
   * none: no limits, no partition keys (the claim is one UPDATE per queue);
   * one limit: a fleet-wide limit of C on the queue (never binding: the pool
     runs at most C; so every claim counts what runs and walks its candidates);
   * 100 partitions: the jobs spread over 100 partition keys, each with the
     fair turn the admission gate would give a backlog enqueued at once (the
     k-th job of a key takes turn k), under a per-partition limit of 2 (so
     claims skip full partitions).
   The issue's rule (the original's, for its gate): limits cost at most 15%.
2. Fairness: a large partition's 10,000-job backlog waits (handlers of 2 ms
   on 8 threads) while a small partition enqueues a job every 50 ms; the
   start latency (enqueue -> handler start) of the small partition's jobs,
   with partition keys (fair share) and without (one FIFO queue), in the
   same run.

Run: python -m benchmarks.flow_control [--backend sqlite|postgresql] [--quick]
     [--only cost|fairness]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from benchmarks._common import fresh_database, print_table
from benchmarks.scheduler import quiet_json_logs
from headgate import EACH_PARTITION, Headgate, JobContext, WorkerConfig
from headgate._domain.events import JobEnqueued
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream
from headgate._store.port import NO_STREAM, StreamAppend

SETUP_BATCH = 500
KIND = "noop"


def _backlog(hg: Headgate, count: int, partitions: int, *, first: int = 0) -> None:
    """`count` pending jobs, as enqueues before any claim leave them: with
    `partitions` keys, job n of key n % partitions takes turn n // partitions."""
    for start in range(first, first + count, SETUP_BATCH):
        units = []
        for n in range(start, min(start + SETUP_BATCH, first + count)):
            key = f"tenant-{n % partitions:03d}" if partitions else None
            options = JobOptions.restored(queue="default", partition_key=key)
            turn = (n - first) // partitions if partitions else 0
            event = JobEnqueued(f"j{n:06d}", KIND, {"n": n}, options, fair_turn=turn)
            units.append([StreamAppend(job_stream(event.job_id), NO_STREAM, (event,))])
        hg._core.store.log.append_units(units)


def _throughput(backend: str, setup: str, count: int, capacity: int) -> float:
    with fresh_database(backend) as url:
        hg = Headgate(url)
        hg.handler(KIND)(lambda job: None)
        if setup == "one limit":
            hg.limits.set(queue="default", limit=capacity)
        elif setup == "100 partitions":
            hg.limits.set(partition_key=EACH_PARTITION, limit=2)
        _backlog(hg, count, 100 if setup == "100 partitions" else 0)
        began = time.perf_counter()
        hg.start(WorkerConfig(queues={"default": capacity}), scheduler=False)
        pool = hg._core.pool
        assert pool is not None
        while pool.stats.succeeded < count:
            time.sleep(0.005)
        elapsed = time.perf_counter() - began
        hg.close()
    return count / elapsed


SETUPS = ("none", "one limit", "100 partitions")


def cost(backend: str, count: int, capacity: int) -> list[object]:
    rates = {setup: _throughput(backend, setup, count, capacity) for setup in SETUPS}
    base = rates["none"]
    return [
        backend,
        capacity,
        *(f"{rates[setup]:,.0f}" for setup in SETUPS),
        f"{rates['one limit'] / base:.2f}",
        f"{rates['100 partitions'] / base:.2f}",
    ]


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


def fairness(backend: str, backlog: int, small_jobs: int, *, partitioned: bool) -> list[object]:
    with fresh_database(backend) as url:
        hg = Headgate(url)
        enqueued_at: dict[int, float] = {}
        started_at: dict[int, float] = {}
        lock = threading.Lock()

        @hg.handler(KIND)
        def work(job: JobContext) -> None:
            payload = job.payload
            if isinstance(payload, dict) and "small" in payload:
                with lock:
                    started_at[int(str(payload["small"]))] = time.perf_counter()
            else:
                time.sleep(0.002)

        _backlog(hg, backlog, 1 if partitioned else 0)
        hg.start(WorkerConfig(queues={"default": 8}), scheduler=False)
        time.sleep(0.3)  # the backlog is under way
        for n in range(small_jobs):
            with lock:
                enqueued_at[n] = time.perf_counter()
            hg.enqueue(KIND, {"small": n}, partition_key="small" if partitioned else None)
            time.sleep(0.05)
        deadline = time.monotonic() + 600
        while len(started_at) < small_jobs and time.monotonic() < deadline:
            time.sleep(0.01)
        pool = hg._core.pool
        assert pool is not None
        backlog_left = backlog - max(pool.stats.succeeded - len(started_at), 0)
        hg.close()
    waits = [(started_at[n] - enqueued_at[n]) * 1000 for n in started_at]
    return [
        backend,
        "partition keys (fair share)" if partitioned else "no partition keys (FIFO)",
        len(waits),
        f"{statistics.median(waits):.1f}",
        f"{_percentile(waits, 0.99):.1f}",
        f"{max(waits):.1f}",
        backlog_left,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", choices=["cost", "fairness"], action="append")
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    only = set(args.only or ["cost", "fairness"])
    quiet_json_logs()
    if "cost" in only:
        count = 2_000 if args.quick else 10_000
        rows = [cost(backend, count, capacity) for backend in backends for capacity in (10, 50)]
        print_table(
            f"Claim + run + complete, {count:,} no-op jobs, pool capacity C (jobs/s). Target:"
            " limits cost at most 15% (ratio >= 0.85)",
            ["backend", "C", *SETUPS, "one limit/none", "100 partitions/none"],
            rows,
        )
    if "fairness" in only:
        backlog = 2_000 if args.quick else 10_000
        small = 20 if args.quick else 60
        rows = [
            fairness(backend, backlog, small, partitioned=partitioned)
            for backend in backends
            for partitioned in (True, False)
        ]
        print_table(
            f"Start latency of a small partition's jobs (one every 50 ms) while a large"
            f" partition's {backlog:,}-job backlog runs (8 threads, 2 ms handlers), ms",
            ["backend", "jobs", "small jobs", "p50", "p99", "max", "backlog left at the end"],
            rows,
        )


if __name__ == "__main__":
    main()
