"""What recording each schedule's runs costs on the job path, on SQLite and
PostgreSQL, printed as a table.

The same backlog of no-op jobs is run twice in one process and one database
kind, alternately: as ordinary jobs (no schedule: their events fold into no
run history) and as a schedule's runs (each job an Enqueue now of one of 100
schedules: each settling event carries the schedule and updates its run
row, in the same projector pass). Both through `drain()` (claims 100 at a
time, runs them inline, one write per batch) and through a worker pool of
capacity 10; both on the success path and on the failure path (the handler
raises once, max_attempts=1: the traceback is recorded on both sides). The
ratio is ordinary / runs: 1.00 is free; the target (issue 37) is <= 5 %
slower (>= 0.95).

Run: python -m benchmarks.run_records [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks._common import fresh_database, print_table
from headgate import Headgate, JobContext, WorkerConfig
from headgate._domain.events import JobEnqueued
from headgate._domain.options import JobOptions
from headgate._domain.streams import job_stream
from headgate._store.port import NO_STREAM, StreamAppend

SETUP_BATCH = 500
SCHEDULES = 100
OPTIONS = JobOptions(queue="default")


def _noop(job: JobContext) -> None:
    return None


def _fails(job: JobContext) -> None:
    raise ValueError("the report database is down")


def _backlog(hg: Headgate, count: int, kind: str, *, runs: bool) -> None:
    for start in range(0, count, SETUP_BATCH):
        units = []
        for n in range(start, min(start + SETUP_BATCH, count)):
            schedule = f"s{n % SCHEDULES:03d}" if runs else None
            job = JobEnqueued(f"j{n:06d}", kind, {"n": n}, OPTIONS, run_now_schedule_id=schedule)
            units.append([StreamAppend(job_stream(job.job_id), NO_STREAM, (job,))])
        hg._core.store.log.append_units(units)


def _once(backend: str, count: int, *, runs: bool, failing: bool, pool: bool) -> float:
    kind = "fails" if failing else "noop"
    with fresh_database(backend) as url:
        hg = Headgate(url)
        hg.handler(kind, max_attempts=1)(_fails if failing else _noop)
        for n in range(SCHEDULES):
            hg.schedules.put(f"s{n:03d}", spec="@every:3600000", kind=kind, paused=True)
        _backlog(hg, count, kind, runs=runs)
        began = time.perf_counter()
        if pool:
            hg.start(WorkerConfig(queues={"default": 10}), scheduler=False)
            running = hg._core.pool
            assert running is not None
            while running.stats.succeeded + running.stats.failed < count:
                time.sleep(0.005)
            elapsed = time.perf_counter() - began
            hg.stop()
        else:
            summary = hg.drain(timeout=3600)
            elapsed = time.perf_counter() - began
            assert summary.succeeded + summary.failed == count, summary
        if runs:
            assert len(hg.schedules.runs("s000", 100).runs) == min(100, count // SCHEDULES)
        hg.close()
    return count / elapsed


def compare(backend: str, count: int, rounds: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for pool in (False, True):
        for failing in (False, True):
            plain: list[float] = []
            recorded: list[float] = []
            for _ in range(rounds):
                plain.append(_once(backend, count, runs=False, failing=failing, pool=pool))
                recorded.append(_once(backend, count, runs=True, failing=failing, pool=pool))
            ordinary, runs = statistics.median(plain), statistics.median(recorded)
            rows.append(
                [
                    backend,
                    "pool C=10" if pool else "drain",
                    "fails (traceback)" if failing else "succeeds",
                    f"{ordinary:,.0f}",
                    f"{runs:,.0f}",
                    f"{runs / ordinary:.2f}",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    count, rounds = (2_000, 1) if args.quick else (10_000, 3)
    rows: list[list[object]] = []
    for backend in args.backend or ["sqlite", "postgresql"]:
        rows.extend(compare(backend, count, rounds))
    print_table(
        f"Recording schedule runs: {count:,} jobs, median of {rounds} rounds each",
        [
            "backend",
            "path",
            "handler",
            "ordinary jobs/s",
            "schedule runs jobs/s",
            "runs / ordinary",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
