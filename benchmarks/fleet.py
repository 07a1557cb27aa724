"""A fleet on one PostgreSQL database: 1, 2 and 4 worker processes draining one
shared backlog of no-op jobs (issue 38, "scale past one host, measured").

Each process is its own `Headgate` on the same store URL, with its own
connections, running `hg.start()` with a no-op handler at capacity C (default
10) on the queue; all start together on a backlog of N jobs (default 20,000;
`--quick` 4,000) enqueued beforehand. Reported per fleet size:
* total jobs/s (from the start signal to the N-th completion reported by the
  workers) and its ratio to one process, in the same run;
* exactly once: every job id was run by exactly one handler call in the fleet,
  the pools' succeeded counts sum to N, and the store counts N completed jobs;
* lock waits: a separate connection samples `pg_stat_activity` and `pg_locks`
  every few milliseconds for the fleet's backends (marked by their
  application_name): the share of samples in which any of them waited on a
  heavyweight lock, and what they waited on (lock type and mode, the relation,
  the advisory key, the waiting statement and its blocker's). LWLock and IO
  waits are counted apart: those are the server's contention, not a writer
  waiting on another writer's transaction;
* CPU: each worker process's user+system time over the run, their PostgreSQL
  backends' (read from /proc, the server being local), and how busy the whole
  machine was (/proc/stat; other users' work included). On a 2-core machine
  more processes compete for the same cores as the server: a ratio below the
  process count with the machine near 100% busy is CPU saturation; lock-wait
  samples that grow with the process count are contention on the design.

Target (issue 38): no lock wait between unrelated writers (no heavyweight-lock
waiter in any sample), and jobs/s growing with the processes where the CPU
allows.

Run: python -m benchmarks.fleet [--quick] [--jobs N] [--capacity C]
     [--processes 1,2,4] [--sample-ms 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psycopg
from sqlalchemy.engine import make_url

from benchmarks._common import fresh_database, print_table
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate, JobContext, WorkerConfig
from headgate._errors import ConstraintViolation

ROOT = Path(__file__).resolve().parents[1]
KIND = "noop"
SETUP_CHUNK = 500
PROGRESS_S = 0.02
"""How often a worker reports its pool's succeeded count."""
TOP_WAITS = 6
STATEMENT_SHOWN = 52


def _worker(url: str, capacity: int, ids_path: str) -> None:
    """One process of the fleet: ready, then run on "go" until "stop"; its report
    (succeeded, CPU seconds) as the last line; the job ids it ran in `ids_path`."""
    quiet_json_logs()
    hg = Headgate(url)
    ran: list[str] = []

    @hg.handler(KIND)
    def noop(job: JobContext) -> None:
        ran.append(job.id)

    stopping = threading.Event()
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"

    def stop_when_told() -> None:
        sys.stdin.readline()
        stopping.set()

    threading.Thread(target=stop_when_told, daemon=True).start()
    before = os.times()
    start_races = 0
    while True:
        try:
            hg.start(WorkerConfig(queues={"default": capacity}), scheduler=False)
            break
        except ConstraintViolation:
            # Processes starting together race to record the same handler
            # declarations (read, then INSERT) on PostgreSQL: the loser's
            # start fails. A product bug, reported apart; start again.
            start_races += 1
            if start_races > 5:
                raise
    pool = hg._core.pool
    assert pool is not None
    while not stopping.wait(PROGRESS_S):
        print(f"progress {pool.stats.succeeded}", flush=True)
    hg.stop()
    after = os.times()
    succeeded = pool.stats.succeeded
    hg.close()
    Path(ids_path).write_text("\n".join(ran))
    cpu = (after.user - before.user) + (after.system - before.system)
    report = {"succeeded": succeeded, "ran": len(ran), "cpu_s": cpu, "start_races": start_races}
    print(json.dumps(report), flush=True)


@dataclass
class _Process:
    popen: subprocess.Popen[str]
    ids_path: str
    done: int = 0
    report: dict[str, Any] = field(default_factory=dict)

    def follow(self) -> None:
        """Read its progress lines, then its report."""
        stdout: IO[str] | None = self.popen.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith("progress "):
                self.done = int(line.split()[1])
            elif line.startswith("{"):
                self.report = json.loads(line)

    def send(self, word: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(word + "\n")
        self.popen.stdin.flush()


_SAMPLE = """
SELECT a.pid, a.wait_event_type, a.wait_event, left(regexp_replace(a.query, '\\s+', ' ', 'g'), 70),
       l.locktype, l.mode, l.relation::regclass::text, l.classid, l.objid, l.objsubid,
       (SELECT left(regexp_replace(b.query, '\\s+', ' ', 'g'), 70) FROM pg_stat_activity b
        WHERE b.pid = (pg_blocking_pids(a.pid))[1])
FROM pg_stat_activity a
LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
WHERE a.application_name = %s AND a.state = 'active'
"""


@dataclass
class LockSamples:
    samples: int = 0
    with_lock_waiter: int = 0
    lock_waiters: int = 0
    with_lwlock_or_io: int = 0
    active: int = 0
    kinds: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(lock type, mode and relation or advisory key; the waiting statement; its
    blocker's current statement) -> samples (a sample counts each once)."""
    other_waits: Counter[str] = field(default_factory=Counter)
    """LWLock, IO and other wait events of active backends -> samples."""
    pids: set[int] = field(default_factory=set)


class LockSampler:
    """Samples the fleet's backends from a connection of its own, on a thread."""

    def __init__(self, conninfo: dict[str, Any], application: str, interval_s: float) -> None:
        self.connection = psycopg.connect(**conninfo, autocommit=True)
        self.application = application
        self.interval_s = interval_s
        self.result = LockSamples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> LockSamples:
        self._stop.set()
        self._thread.join()
        self.connection.close()
        return self.result

    def backends(self) -> set[int]:
        rows = self.connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.application,)
        ).fetchall()
        return {pid for (pid,) in rows}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample(self.connection.execute(_SAMPLE, (self.application,)).fetchall())

    def _sample(self, rows: Sequence[tuple[Any, ...]]) -> None:
        result = self.result
        result.samples += 1
        kinds: set[tuple[str, str, str]] = set()
        others: set[str] = set()
        waiters = 0
        for (
            pid,
            event_type,
            event,
            query,
            locktype,
            mode,
            relation,
            classid,
            objid,
            sub,
            blocker,
        ) in rows:
            result.pids.add(pid)
            result.active += 1
            if event_type == "Lock":
                waiters += 1
                on = (relation or "").rsplit(".", 1)[-1] or (
                    f"key ({classid}, {objid}, {sub})" if locktype == "advisory" else ""
                )
                lock = " ".join(part for part in (locktype or event, mode, on) if part)
                kinds.add((lock, _shape(query), _shape(blocker)))
            elif event_type is not None and event_type not in ("Client", "Activity"):
                others.add(f"{event_type}:{event}")
        result.lock_waiters += waiters
        result.with_lock_waiter += waiters > 0
        result.with_lwlock_or_io += bool(others)
        result.kinds.update(kinds)
        result.other_waits.update(others)


def _shape(statement: str | None) -> str:
    """A statement's first words, its transaction's BEGIN left out."""
    if statement is None:
        return "-"
    return statement.removeprefix("BEGIN; ")[:STATEMENT_SHOWN]


def _cpu_ticks(pid: int) -> int:
    """A process's user+system CPU in clock ticks (0 when it is gone or unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


@dataclass
class FleetRun:
    processes: int
    jobs: int
    seconds: float
    once: str
    cpu_s: list[float]
    ran: list[int]
    start_races: int
    backends_cpu_s: float
    machine_busy: float
    locks: LockSamples


def _conninfo(url: str) -> dict[str, Any]:
    parsed = make_url(url)
    return {
        "host": parsed.host or "localhost",
        "port": parsed.port or 5432,
        "user": parsed.username,
        "password": parsed.password,
        "dbname": parsed.database,
    }


def fleet(processes: int, jobs: int, capacity: int, sample_s: float) -> FleetRun:
    with fresh_database("postgresql") as url, tempfile.TemporaryDirectory() as scratch:
        setup = Headgate(url)
        for start in range(0, jobs, SETUP_CHUNK):
            setup.enqueue_many(
                [
                    {"kind": KIND, "payload": {"n": n}}
                    for n in range(start, min(start + SETUP_CHUNK, jobs))
                ]
            )
        application = f"headgate-fleet-{uuid.uuid4().hex[:8]}"
        fleet_url = (
            make_url(url)
            .update_query_dict({"application_name": application})
            .render_as_string(hide_password=False)
        )
        members = []
        for index in range(processes):
            ids_path = str(Path(scratch) / f"ids-{index}")
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.fleet",
                    "--worker",
                    fleet_url,
                    "--capacity",
                    str(capacity),
                    "--ids",
                    ids_path,
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            members.append(_Process(popen, ids_path))
        for member in members:
            assert member.popen.stdout is not None
            line = member.popen.stdout.readline().strip()
            assert line == "ready", f"a worker did not start: {line!r}"
        readers = [threading.Thread(target=m.follow, daemon=True) for m in members]
        for reader in readers:
            reader.start()
        sampler = LockSampler(_conninfo(url), application, sample_s)
        backends_before = {pid: _cpu_ticks(pid) for pid in sampler.backends()}
        machine_before = _machine_ticks()
        sampler.start()
        began = time.perf_counter()
        for member in members:
            member.send("go")
        deadline = time.monotonic() + 600
        while sum(m.done for m in members) < jobs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the fleet ran {sum(m.done for m in members)} of {jobs} jobs")
            for member in members:
                if member.popen.poll() is not None:
                    raise RuntimeError(f"a worker exited with {member.popen.returncode}")
            time.sleep(0.005)
        seconds = time.perf_counter() - began
        backends = sampler.backends() | set(backends_before)
        backends_cpu = sum(_cpu_ticks(pid) - backends_before.get(pid, 0) for pid in backends)
        machine_after = _machine_ticks()
        locks = sampler.stop()
        for member in members:
            member.send("stop")
        for member, reader in zip(members, readers, strict=True):
            member.popen.wait(timeout=60)
            reader.join(timeout=10)
        once = _exactly_once(setup, members, jobs)
        setup.close()
    busy = machine_after[0] - machine_before[0]
    total = machine_after[1] - machine_before[1]
    ticks = os.sysconf("SC_CLK_TCK")
    return FleetRun(
        processes,
        jobs,
        seconds,
        once,
        [float(m.report.get("cpu_s", 0.0)) for m in members],
        [int(m.report.get("ran", 0)) for m in members],
        sum(int(m.report.get("start_races", 0)) for m in members),
        backends_cpu / ticks,
        busy / total if total else 0.0,
        locks,
    )


def _exactly_once(observer: Headgate, members: list[_Process], jobs: int) -> str:
    """ "yes", or what went wrong: by the handlers' own record of the ids they ran,
    the pools' counts and the store's completed jobs."""
    runs: Counter[str] = Counter()
    for member in members:
        text = Path(member.ids_path).read_text() if Path(member.ids_path).exists() else ""
        runs.update(text.split())
    twice = sum(1 for count in runs.values() if count > 1)
    succeeded = sum(int(m.report.get("succeeded", 0)) for m in members)
    completed = observer._core.store.reads.job_counts().get(("default", "completed"), 0)
    problems = []
    if len(runs) != jobs:
        problems.append(f"{len(runs)} distinct jobs ran")
    if twice:
        problems.append(f"{twice} ran more than once")
    if succeeded != jobs:
        problems.append(f"pools counted {succeeded}")
    if completed != jobs:
        problems.append(f"store has {completed} completed")
    return "yes" if not problems else "NO: " + ", ".join(problems)


def report(runs: list[FleetRun], capacity: int, sample_s: float) -> None:
    one = runs[0].jobs / runs[0].seconds
    print_table(
        f"Fleet on one PostgreSQL: N worker processes (capacity {capacity} each) draining"
        f" {runs[0].jobs:,} no-op jobs; one run, same machine (shared; 2 cores)",
        [
            "processes",
            "jobs/s",
            "x 1 process",
            "seconds",
            "exactly once",
            "machine busy",
            "workers CPU s",
            "backends CPU s",
            "start races",
        ],
        [
            [
                run.processes,
                f"{run.jobs / run.seconds:,.0f}",
                f"{run.jobs / run.seconds / one:.2f}",
                f"{run.seconds:.1f}",
                run.once,
                f"{run.machine_busy:.0%}",
                f"{sum(run.cpu_s):.1f}",
                f"{run.backends_cpu_s:.1f}",
                run.start_races,
            ]
            for run in runs
        ],
    )
    print_table(
        "Per process: jobs it ran, its CPU (user+system) and CPU / wall",
        ["processes", "process", "jobs run", "CPU s", "CPU / wall"],
        [
            [run.processes, index + 1, f"{ran:,}", f"{cpu:.1f}", f"{cpu / run.seconds:.0%}"]
            for run in runs
            for index, (ran, cpu) in enumerate(zip(run.ran, run.cpu_s, strict=True))
        ],
    )
    print_table(
        f"Lock waits of the fleet's backends, sampled every {sample_s * 1000:g} ms"
        " (Lock: a heavyweight lock, a writer waiting on another's transaction;"
        " LWLock/IO: the server's own contention)",
        [
            "processes",
            "samples",
            "backends",
            "active/sample",
            "any Lock waiter",
            "Lock waiters/sample",
            "any LWLock/IO wait",
        ],
        [
            [
                run.processes,
                run.locks.samples,
                len(run.locks.pids),
                f"{run.locks.active / max(run.locks.samples, 1):.2f}",
                f"{run.locks.with_lock_waiter / max(run.locks.samples, 1):.1%}",
                f"{run.locks.lock_waiters / max(run.locks.samples, 1):.2f}",
                f"{run.locks.with_lwlock_or_io / max(run.locks.samples, 1):.1%}",
            ]
            for run in runs
        ],
    )
    print_table(
        "Top lock waits, by share of samples (lock: type, mode, relation or advisory key;"
        " the blocker's statement is the one it runs now, not necessarily the one that"
        " took the lock)",
        ["processes", "share", "lock", "waiting statement", "blocker's statement"],
        [
            [run.processes, f"{count / max(run.locks.samples, 1):.1%}", *kind]
            for run in runs
            for kind, count in run.locks.kinds.most_common(TOP_WAITS)
        ],
    )
    print_table(
        "Top other waits of active backends (LWLock, IO, IPC), by share of samples",
        ["processes", "share", "wait event"],
        [
            [run.processes, f"{count / max(run.locks.samples, 1):.1%}", kind]
            for run in runs
            for kind, count in run.locks.other_waits.most_common(TOP_WAITS)
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="4,000 jobs, for a smoke run")
    parser.add_argument("--jobs", type=int, help="backlog size (default 20,000; --quick 4,000)")
    parser.add_argument("--capacity", type=int, default=10, help="each process's pool capacity")
    parser.add_argument("--processes", default="1,2,4", help="fleet sizes, comma-separated")
    parser.add_argument("--sample-ms", type=float, default=5.0, help="lock sampling interval")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.capacity, args.ids)
        return
    quiet_json_logs()
    jobs = args.jobs or (4_000 if args.quick else 20_000)
    sample_s = args.sample_ms / 1000
    runs = [fleet(int(count), jobs, args.capacity, sample_s) for count in args.processes.split(",")]
    report(runs, args.capacity, sample_s)


if __name__ == "__main__":
    main()
