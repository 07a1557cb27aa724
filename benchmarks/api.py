"""The control API under load, on SQLite and PostgreSQL, printed as a table.

`headgate serve` runs in its own process on a fresh store holding 200 schedules
at @every:1000 (the scheduler fires them throughout). 32 clients (4 processes of
8 threads, one keep-alive connection each) then loop for the measured seconds,
each alternating a write and a read: the writes are PUT /api/v1/periodic/{id}
(each client replacing schedules of its own) and POST .../run (a manual run,
with a new Idempotency-Key each time); the reads are GET /api/v1/periodic/{id}
and GET /api/v1/jobs?limit=20. Every response is checked: an error is any
status but the one the call documents.

Beside it, in the same run: the HTTP stack's own floor, the same clients
calling GET /healthz (which touches no store) in place of both calls; and the
same writes and reads made by 32 threads
through the Python API of one process (`hg.schedules.put`, `hg.schedules.enqueue_now`,
`hg.schedules.get` with `hg.schedules.health_of`, `hg.jobs.list`: what each route
reads) with its scheduler firing the same 200
schedules: the store's own bound, with no HTTP, JSON or server around it.
"vs Python" is the API's writes/s against it; "vs /healthz" is each row's
writes/s against the /healthz run's pairs/s (a pair: the two GETs a client
makes in place of a write and a read), both from the same run.

The 200 ticking schedules alone reach the default tick ceiling (200 ticks/s),
so the server and the in-process Headgate run with TICK_CEILING: the clients'
own schedules (@every:3600000) would otherwise be refused with a 422.

Targets: issue 21, >= 2,000 writes/s at write p99 <= 50 ms, read p99 <= 20 ms,
0 errors; issue 38, writes/s >= 0.5x the same server's /healthz pairs/s.

Run: python -m benchmarks.api [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import multiprocessing
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks._common import fresh_database, print_table
from benchmarks.scheduler import define_many, quiet_json_logs
from headgate import Headgate, RuntimeConfig

PROCESSES = 4
THREADS_PER_PROCESS = 8
TICKING_SCHEDULES = 200
KIND = "bench.api"
TICK_CEILING = 1000
"""max_ticks_per_s for the run: room for the clients' schedules beside the ticking ones."""


@dataclass
class Samples:
    """Latencies (ms) by call, and the errors seen, of one client or of them all."""

    writes: list[float] = field(default_factory=list)
    reads: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def extend(self, other: Samples) -> None:
        self.writes.extend(other.writes)
        self.reads.extend(other.reads)
        self.errors.extend(other.errors)


def _percentile(samples: list[float], share: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[max(int(len(ordered) * share) - 1, 0)]


def _schedule_body(client: int, turn: int) -> bytes:
    return json.dumps(
        {"spec": "@every:3600000", "kind": KIND, "payload": {"client": client, "turn": turn}}
    ).encode()


class _Client:
    """One keep-alive connection, alternating a write and a read."""

    def __init__(self, port: int, client: int, floor: bool) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.client = client
        self.turn = 0
        self.floor = floor
        """Every call is GET /healthz: the server's cost without the store."""

    def call(
        self, method: str, path: str, body: bytes | None, expected: tuple[int, ...]
    ) -> str | None:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if method == "POST" and path.endswith("/run"):
            headers["Idempotency-Key"] = uuid.uuid4().hex
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        text = response.read()
        if response.status not in expected:
            return f"{method} {path}: {response.status} {text[:200]!r}"
        return None

    def one_round(self, samples: Samples) -> None:
        schedule_id = f"c{self.client}-{self.turn // 2 % 5}"  # put, then run
        self.turn += 1
        write: tuple[str, str, bytes | None, tuple[int, ...]] = (
            (
                "PUT",
                f"/api/v1/periodic/{schedule_id}",
                _schedule_body(self.client, self.turn),
                (200, 201),
            )
            if self.turn % 2
            else ("POST", f"/api/v1/periodic/{schedule_id}/run", None, (202,))
        )
        if self.floor:
            write = ("GET", "/healthz", None, (200,))
        began = time.perf_counter()
        error = self.call(*write)
        samples.writes.append((time.perf_counter() - began) * 1000)
        if error is not None:
            samples.errors.append(error)
        read = (
            ("GET", f"/api/v1/periodic/{schedule_id}", None)
            if self.turn % 4 < 2
            else ("GET", "/api/v1/jobs?limit=20", None)
        )
        if self.floor:
            read = ("GET", "/healthz", None)
        began = time.perf_counter()
        error = self.call(*read, (200,))
        samples.reads.append((time.perf_counter() - began) * 1000)
        if error is not None:
            samples.errors.append(error)


def _client_process(  # noqa: PLR0917 (a process's arguments)
    port: int, first_client: int, window: Any, ready: Any, floor: bool, out: Any
) -> None:
    """THREADS_PER_PROCESS clients; what each measured in the window (start, stop)
    the parent sets once every client process has said it is ready."""
    results: list[Samples] = []
    ready.put(first_client)

    def run(client: int) -> None:
        connection = _Client(port, client, floor)
        start_at, stop_at = window.get()
        warm = Samples()
        while time.time() < start_at:
            connection.one_round(warm)
        measured = Samples(errors=warm.errors)
        while time.time() < stop_at:
            connection.one_round(measured)
        results.append(measured)

    threads = [
        threading.Thread(target=run, args=(first_client + index,))
        for index in range(THREADS_PER_PROCESS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = Samples()
    for result in results:
        total.extend(result)
    out.put((total.writes, total.reads, total.errors))


WARM_UP_S = 2.0
"""Each client's calls before the measured window (connections made, caches warm)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_up(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"headgate serve exited with {server.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/api/v1/periodic?limit=1")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("headgate serve did not answer within 60 s")


def through_http(url: str, seconds: float, *, floor: bool = False) -> Samples:
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "headgate",
            "serve",
            "--db",
            url,
            "--port",
            str(port),
            "--max-ticks-per-s",
            str(TICK_CEILING),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(port, server)
        context = multiprocessing.get_context("spawn")
        out, ready, window = context.Queue(), context.Queue(), context.Queue()
        clients = [
            context.Process(
                target=_client_process,
                args=(port, index * THREADS_PER_PROCESS, window, ready, floor, out),
            )
            for index in range(PROCESSES)
        ]
        for client in clients:
            client.start()
        # The window opens once every process is up: on a busy machine starting
        # them may take longer than a fixed delay, which measured fewer clients.
        for _ in clients:
            ready.get(timeout=120)
        start_at = time.time() + WARM_UP_S
        for _ in range(PROCESSES * THREADS_PER_PROCESS):
            window.put((start_at, start_at + seconds))
        total = Samples()
        for _ in clients:
            writes, reads, errors = out.get(timeout=seconds + 120)
            total.extend(Samples(writes, reads, errors))
        for client in clients:
            client.join()
        return total
    finally:
        server.terminate()
        server.wait(timeout=30)


def _schedule_with_health(hg: Headgate, schedule_id: str) -> object:
    """What GET /api/v1/periodic/{id} reads: the schedule, and its health."""
    schedule = hg.schedules.get(schedule_id)
    return schedule, hg.schedules.health_of([schedule])


def in_process(url: str, seconds: float) -> Samples:
    """The same calls on the Python API, 32 threads in the process that schedules."""
    hg = Headgate(url, config=RuntimeConfig(max_ticks_per_s=TICK_CEILING))
    hg.start()
    start_at = time.time() + 3
    stop_at = start_at + seconds
    results: list[Samples] = []

    def run(client: int) -> None:
        measured = Samples()
        turn = 0
        while time.time() < stop_at:
            samples = measured if time.time() >= start_at else Samples()
            schedule_id = f"p{client}-{turn // 2 % 5}"  # put, then run
            turn += 1
            write: Callable[[], object] = (
                functools.partial(hg.schedules.put, schedule_id, spec="@every:3600000", kind=KIND)
                if turn % 2
                else functools.partial(
                    hg.schedules.enqueue_now, schedule_id, idempotency_key=uuid.uuid4().hex
                )
            )
            read: Callable[[], object] = (
                functools.partial(_schedule_with_health, hg, schedule_id)
                if turn % 4 < 2
                else functools.partial(hg.jobs.list, limit=20)
            )
            for call, into in ((write, samples.writes), (read, samples.reads)):
                began = time.perf_counter()
                try:
                    call()
                except Exception as error:  # counted, as the HTTP run counts a bad status
                    samples.errors.append(f"{type(error).__name__}: {error}")
                into.append((time.perf_counter() - began) * 1000)
        results.append(measured)

    threads = [
        threading.Thread(target=run, args=(index,))
        for index in range(PROCESSES * THREADS_PER_PROCESS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    hg.close()
    total = Samples()
    for result in results:
        total.extend(result)
    return total


def _row(  # noqa: PLR0917 (one table row's figures)
    backend: str, how: str, samples: Samples, seconds: float, bound: float, healthz: float
) -> list[object]:
    writes_per_s = len(samples.writes) / seconds
    return [
        backend,
        how,
        f"{writes_per_s:,.0f}",
        f"{_percentile(samples.writes, 0.5):.1f}",
        f"{_percentile(samples.writes, 0.99):.1f}",
        f"{len(samples.reads) / seconds:,.0f}",
        f"{_percentile(samples.reads, 0.5):.1f}",
        f"{_percentile(samples.reads, 0.99):.1f}",
        len(samples.errors),
        f"{writes_per_s / bound:.2f}" if bound else "1",
        f"{writes_per_s / healthz:.2f}",
    ]


@contextlib.contextmanager
def _ticking_store(backend: str) -> Iterator[str]:
    """A fresh store's URL, holding TICKING_SCHEDULES schedules at @every:1000."""
    with fresh_database(backend) as url:
        hg = Headgate(url)
        first_tick = (int(time.time() * 1000) // 1000 + 2) * 1000
        define_many(hg, TICKING_SCHEDULES, "@every:1000", first_tick)
        hg.close()
        yield url


def rows_for(backend: str, seconds: float) -> list[list[object]]:
    with _ticking_store(backend) as url:
        api = through_http(url, seconds)
        http_floor = through_http(url, seconds, floor=True)
    with _ticking_store(backend) as url:
        python = in_process(url, seconds)
    bound = len(python.writes) / seconds
    healthz = len(http_floor.writes) / seconds
    for error in (api.errors + python.errors + http_floor.errors)[:3]:
        print(f"  {backend} error: {error}", file=sys.stderr)
    return [
        _row(backend, "headgate serve", api, seconds, bound, healthz),
        _row(backend, "Python API", python, seconds, 0, healthz),
        _row(backend, "HTTP alone (/healthz)", http_floor, seconds, 0, healthz),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="5 s instead of 20 s")
    args = parser.parse_args()
    quiet_json_logs()
    seconds = 5.0 if args.quick else 20.0
    rows = [
        row
        for backend in args.backend or ["sqlite", "postgresql"]
        for row in rows_for(backend, seconds)
    ]
    print_table(
        f"API under load: 32 clients, 200 schedules ticking, {seconds:.0f} s (ms; writes/s "
        "against the Python API's and against the /healthz run's pairs/s; targets: "
        "vs /healthz >= 0.5, write p99 <= 50, read p99 <= 20, 0 errors)",
        [
            "backend",
            "through",
            "writes/s",
            "write p50",
            "write p99",
            "reads/s",
            "read p50",
            "read p99",
            "errors",
            "vs Python",
            "vs /healthz",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
