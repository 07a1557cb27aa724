"""Fitting the host, on SQLite and PostgreSQL, printed as tables.

1. Bulk enqueue: `hg.enqueue_many` of N jobs (500 per transaction), against the
   floor: the same rows it wrote (each job's JobEnqueued event and its job
   row), read back and inserted the raw way into an empty store of the same
   schema, 500 per transaction, with SQLAlchemy Core. Target (issue 23):
   >= 20,000 jobs/s on PostgreSQL.
2. Transactional enqueue: a host transaction that inserts an order row and
   commits, without a job (the floor), with `enqueue(..., connection=)` in it,
   and with the order's own transaction then a plain `enqueue` after it; and
   what the log head held by a host costs others: plain enqueues from another
   thread while hosts hold their transactions 10 ms after enqueueing.
3. An async host: a FastAPI app served by uvicorn (in a child process) whose
   `/ping` is timed every 10 ms, idle and while 2 clients post, one request
   after another, to a route that enqueues 20 jobs: awaiting `hg.aenqueue` for
   each, awaiting one `hg.aenqueue_many`, or calling `hg.enqueue` in its
   `async def` (what the issue found blocking the loop). Target: ping p99
   within a few ms of idle.
4. The process executor: how late a 1 s schedule's ticks commit while four
   CPU-bound sync handlers run (none, as threads, as `executor="process"`
   children); and 2,000 no-op jobs claimed, run and completed by 4 slots,
   as threads and in children (the cost of the hop to a child).

Run: python -m benchmarks.host_fit [--backend sqlite|postgresql] [--quick]
     [--only bulk|tx|async|process]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import httpx
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select

from benchmarks._common import fresh_database, print_table, raw_engine
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate, JobContext, WorkerConfig
from headgate._operator import operator_of
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from headgate._store.sql.schema import LIVE, events

CHUNK = 500
CLIENTS = 2
HOST = MetaData()
orders = Table("orders", HOST, Column("id", Integer, primary_key=True), Column("item", String(40)))


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(int(len(ordered) * share) - 1, 0)]


# 1. Bulk enqueue ------------------------------------------------------------


def bulk(backend: str, count: int) -> list[object]:
    items = [{"kind": "import.row", "payload": {"row": n, "file": "a.csv"}} for n in range(count)]
    with fresh_database(backend) as url:
        hg = Headgate(url)
        hg.enqueue_many(items[:CHUNK])  # warm: connections, statements
        began = time.perf_counter()
        hg.enqueue_many(items)
        ours = time.perf_counter() - began
        engine = raw_engine(url)
        with engine.connect() as connection:
            event_rows = [dict(row._mapping) for row in connection.execute(select(events))]
            job_rows = [dict(row._mapping) for row in connection.execute(select(LIVE.jobs))]
        hg.close()
        engine.dispose()
    with fresh_database(backend) as url:
        Headgate(url).close()  # the same schema, empty
        engine = raw_engine(url)
        began = time.perf_counter()
        for start in range(0, len(job_rows), CHUNK):
            with engine.begin() as connection:
                connection.execute(insert(events), event_rows[start : start + CHUNK])
                connection.execute(insert(LIVE.jobs), job_rows[start : start + CHUNK])
        floor = time.perf_counter() - began
        engine.dispose()
    written = len(job_rows)
    return [
        backend,
        f"{count:,}",
        f"{count / ours:,.0f}",
        f"{written / floor:,.0f}",
        f"{(count / ours) / (written / floor):.2f}",
    ]


# 2. Transactional enqueue ---------------------------------------------------


def transactional(backend: str, count: int) -> tuple[list[object], list[object]]:
    with fresh_database(backend) as url:
        hg = Headgate(url)
        host = raw_engine(url)
        HOST.create_all(host)
        next_id = iter(range(1, 10_000_000))

        def order_only() -> None:
            with host.begin() as connection:
                connection.execute(orders.insert().values(id=next(next_id), item="book"))

        def order_with_job() -> None:
            with host.begin() as connection:
                order = next(next_id)
                connection.execute(orders.insert().values(id=order, item="book"))
                hg.enqueue("order.ship", {"order": order}, connection=connection)

        def order_then_job() -> None:
            order = next(next_id)
            with host.begin() as connection:
                connection.execute(orders.insert().values(id=order, item="book"))
            hg.enqueue("order.ship", {"order": order})

        medians = {}
        for name, call in (
            ("floor", order_only),
            ("in", order_with_job),
            ("after", order_then_job),
        ):
            for _ in range(20):
                call()
            samples = []
            for _ in range(count):
                began = time.perf_counter()
                call()
                samples.append((time.perf_counter() - began) * 1000)
            medians[name] = statistics.median(samples)
        latency: list[object] = [
            backend,
            f"{medians['floor']:.2f}",
            f"{medians['in']:.2f}",
            f"{medians['after']:.2f}",
            f"{medians['in'] / medians['floor']:.2f}",
            f"{medians['in'] / medians['after']:.2f}",
        ]
        alone = _plain_rate(hg, 1.5)
        holding = threading.Event()
        stop = threading.Event()

        def hold() -> None:
            while not stop.is_set():
                with host.begin() as connection:
                    order = next(next_id)
                    connection.execute(orders.insert().values(id=order, item="book"))
                    hg.enqueue("order.ship", {"order": order}, connection=connection)
                    holding.set()
                    time.sleep(0.010)
                time.sleep(0.010)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait()
        beside = _plain_rate(hg, 1.5)
        stop.set()
        holder.join()
        hg.close()
        host.dispose()
    held: list[object] = [backend, f"{alone:,.0f}", f"{beside:,.0f}", f"{beside / alone:.2f}"]
    return latency, held


def _plain_rate(hg: Headgate, seconds: float) -> float:
    done = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        hg.enqueue("mail.send", {"n": done})
        done += 1
    return done / (time.perf_counter() - began)


# 3. An async host -----------------------------------------------------------

_APP = textwrap.dedent(
    """
    import sys
    from fastapi import FastAPI
    from headgate import Headgate

    hg = Headgate(sys.argv[1])
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> str:
        return "pong"

    @app.post("/enqueue")
    async def enqueue_async() -> int:
        for n in range(20):
            await hg.aenqueue("order.ship", {"order": n})
        return 20

    @app.post("/enqueue-many")
    async def enqueue_many_async() -> int:
        jobs = [{"kind": "order.ship", "payload": {"order": n}} for n in range(20)]
        return len(await hg.aenqueue_many(jobs))

    @app.post("/enqueue-blocking")
    async def enqueue_blocking() -> int:
        for n in range(20):
            hg.enqueue("order.ship", {"order": n})
        return 20

    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    """
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _served(url: str) -> Iterator[str]:
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", _APP, url, str(port)],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/ping", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base
    finally:
        child.terminate()
        child.wait(timeout=10)


async def _pings(base: str, route: str | None, seconds: float) -> tuple[list[float], int]:
    stop = asyncio.Event()
    enqueued = 0
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def load() -> None:
            nonlocal enqueued
            while not stop.is_set():
                enqueued += int((await client.post(route or "")).json())

        loaders = [asyncio.create_task(load()) for _ in range(CLIENTS if route else 0)]
        samples: list[float] = []
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            sent = time.perf_counter()
            await client.get("/ping")
            samples.append((time.perf_counter() - sent) * 1000)
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*loaders)
    return samples, enqueued


def async_host(backend: str, seconds: float) -> list[list[object]]:
    rows: list[list[object]] = []
    with fresh_database(backend) as url:
        Headgate(url).close()
        with _served(url) as base:
            idle, _ = asyncio.run(_pings(base, None, seconds))
            idle_p99 = _percentile(idle, 0.99)
            for name, route in (
                ("idle", None),
                ("20 x await hg.aenqueue", "/enqueue"),
                ("await hg.aenqueue_many of 20", "/enqueue-many"),
                ("20 x hg.enqueue in async def", "/enqueue-blocking"),
            ):
                samples, enqueued = (
                    (idle, 0) if route is None else asyncio.run(_pings(base, route, seconds))
                )
                p99 = _percentile(samples, 0.99)
                rows.append(
                    [
                        backend,
                        name,
                        f"{enqueued / seconds:,.0f}",
                        f"{statistics.median(samples):.1f}",
                        f"{p99:.1f}",
                        f"{max(samples):.1f}",
                        f"{p99 - idle_p99:+.1f}",
                    ]
                )
    return rows


# 4. The process executor ----------------------------------------------------------


def burn(job: JobContext) -> int:
    """Pure Python for `payload["s"]` seconds: it holds its interpreter's GIL."""
    ends = time.monotonic() + float(job.payload["s"])  # type: ignore[index, arg-type]
    count = 0
    while time.monotonic() < ends:
        count += 1
    return count


def nothing(job: JobContext) -> None:
    return None


class _CommitTimes(EnqueueHook):
    def __init__(self) -> None:
        self.late_ms: list[int] = []

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        if result.committed_at_ms is not None:
            self.late_ms.append(result.committed_at_ms - context.tick_ms)


def tick_lateness(backend: str, executor: str | None, seconds: float) -> list[object]:
    commits = _CommitTimes()
    with fresh_database(backend) as url:
        hg = Headgate(url, hooks=[commits])
        try:
            hg.handler("burn", executor=executor or "thread", timeout_s=600)(burn)
            hg.start(WorkerConfig(queues={"default": 4}, poll_interval_ms=50))
            if executor is not None:
                for each in range(4):
                    hg.enqueue("burn", {"s": seconds + 2, "n": each})
                time.sleep(1.0)
            hg.schedules.put("tick", spec="@every:1000", kind="tick", queue="ticks")
            time.sleep(seconds)
        finally:
            hg.close()
    late = commits.late_ms or [0]
    return [
        backend,
        "none" if executor is None else f"4 x {executor}",
        len(commits.late_ms),
        statistics.median(late),
        max(late),
    ]


def hop_cost(backend: str, count: int) -> list[object]:
    rates = []
    for executor in ("thread", "process"):
        with fresh_database(backend) as url:
            hg = Headgate(url)
            try:
                hg.handler("nothing", executor=executor)(nothing)  # type: ignore[arg-type]
                hg.enqueue_many([{"kind": "nothing"}] * 4)
                hg.start(WorkerConfig(queues={"default": 4}, poll_interval_ms=50))
                _wait_idle(hg)  # the children are started
                hg.enqueue_many([{"kind": "nothing"}] * count)
                began = time.perf_counter()
                _wait_idle(hg)
                rates.append(count / (time.perf_counter() - began))
            finally:
                hg.close()
    return [backend, count, round(rates[0]), round(rates[1]), f"{rates[1] / rates[0]:.2f}"]


def _wait_idle(hg: Headgate) -> None:
    while True:
        status = operator_of(hg).queue_status("default")
        if status.pending == status.running == 0:
            return
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["bulk", "tx", "async", "process"])
    args = parser.parse_args()
    quiet_json_logs()
    backends = [args.backend] if args.backend else ["sqlite", "postgresql"]
    if args.only in (None, "bulk"):
        count = 5_000 if args.quick else 50_000
        print_table(
            f"Bulk enqueue of {count:,} jobs, 500 per transaction (jobs/s). Target: >= 20,000/s "
            "on PostgreSQL",
            ["backend", "jobs", "enqueue_many", "floor (same rows, raw)", "ours/floor"],
            [bulk(backend, count) for backend in backends],
        )
    if args.only in (None, "tx"):
        count = 100 if args.quick else 500
        results = [transactional(backend, count) for backend in backends]
        print_table(
            "A host's order and its job, per order (ms, p50)",
            [
                "backend",
                "order alone (floor)",
                "job in its transaction",
                "order, then a plain enqueue",
                "in/floor",
                "in/after",
            ],
            [latency for latency, _ in results],
        )
        print_table(
            "Plain enqueues/s from another thread, alone and while hosts hold the log head "
            "10 ms of every 20 ms",
            ["backend", "alone", "beside holding hosts", "beside/alone"],
            [held for _, held in results],
        )
    if args.only in (None, "async"):
        seconds = 3.0 if args.quick else 10.0
        print_table(
            f"FastAPI /ping every 10 ms while {CLIENTS} clients each post requests that enqueue "
            "20 jobs, one after another (ms)",
            [
                "backend",
                "enqueue route",
                "enqueues/s",
                "ping p50",
                "ping p99",
                "ping max",
                "p99 - idle p99",
            ],
            [row for backend in backends for row in async_host(backend, seconds)],
        )
    if args.only in (None, "process"):
        seconds = 4.0 if args.quick else 10.0
        print_table(
            "Lateness of a 1 s schedule's ticks (commit - tick, ms) beside four CPU-bound "
            "sync handlers",
            ["backend", "handlers running", "ticks", "p50", "max"],
            [
                tick_lateness(backend, executor, seconds)
                for backend in backends
                for executor in (None, "thread", "process")
            ],
        )
        count = 500 if args.quick else 2_000
        print_table(
            "No-op jobs claimed, run and completed by 4 slots (jobs/s)",
            ["backend", "jobs", "threads", "children", "children/threads"],
            [hop_cost(backend, count) for backend in backends],
        )


if __name__ == "__main__":
    main()
