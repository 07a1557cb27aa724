"""What each step of a job's life writes, per job, on SQLite and PostgreSQL: the
"before and after" picture of issue 38's "fewer rows and statements per job".

Steps, each measured on its own around the real API (no-op jobs):
  enqueue          `hg.enqueue` one job at a time
  enqueue_many     `hg.enqueue_many` of 100 jobs a call
  claim C=100      a WorkerPool (capacity 100 on its queue) claims 100 jobs that
                   come due at once; their handler holds them, so nothing ends
  complete C=100   the held handlers let go: the pool records the 100 ends
  drain            `hg.drain()` over the enqueued backlog (claim + run + complete,
                   100 at a time)
  pool C=10        a WorkerPool of capacity 10 over a backlog (its start left out)
Beside each, a raw SQLAlchemy loop on a plain jobs table does the same work:
INSERT + COMMIT; one executemany INSERT of 100; `UPDATE ... WHERE job_id IN
(SELECT ... LIMIT C [FOR UPDATE SKIP LOCKED]) RETURNING`; one executemany UPDATE
completing a batch (drain and pool: that claim and completion in a loop, batch
100 and 10).

Per job: statements sent (without transaction control; writes, reads and the
parameter sets of executemany and COPY apart), write transactions committed,
rows inserted, updated and deleted (summed over the tables, then table by
table), and the log bytes written (PostgreSQL: WAL of the store's relations and
its commits, full-page images apart; SQLite: WAL frames). How each is counted:
benchmarks/_write_meter.py. The counts do not depend on the machine's speed,
except the background duties' share (heartbeats, polls) in the windows that
wait, which are a few rows per window.

Target (issue 38): fewer rows, statements and WAL bytes per job than this
baseline; the raw loop's are the floor no design of the same durability beats.

Run: python -m benchmarks.write_cost [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    Engine,
    MetaData,
    bindparam,
    insert,
    text,
    update,
)

from benchmarks._common import fresh_database, print_table, raw_engine, raw_jobs_table
from benchmarks._write_meter import Cost, Meter, install
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate, JobContext, WorkerConfig
from headgate._runtime.worker_pool import WorkerPool

KIND = "noop"
HELD_KIND = "held"
STEADY_KIND = "steady"
BATCH = 100
SPLIT_CAPACITY = 100
POOL_CAPACITY = 10
SETUP_CHUNK = 500
SHAPES_SHOWN = 8


@dataclass(frozen=True)
class Sizes:
    enqueue: int
    enqueue_many: int
    split_rounds: int
    pool: int


QUICK = Sizes(enqueue=200, enqueue_many=1_000, split_rounds=2, pool=1_000)
FULL = Sizes(enqueue=1_000, enqueue_many=5_000, split_rounds=5, pool=5_000)

Steps = dict[str, tuple[int, Cost]]
"""step -> (jobs, what they wrote)"""


def _noop(job: JobContext) -> None:
    return None


class _Held:
    """A handler that holds its jobs until released, counting them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.release = threading.Event()

    def __call__(self, job: JobContext) -> None:
        with self.lock:
            self.running += 1
        if not self.release.wait(120):
            raise TimeoutError("held job never released")


def _wait(done: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not done within {timeout} s")
        time.sleep(0.002)


LEAD_MS = 1_000
"""How far ahead the held and the pool's jobs are made due: the meter starts
before their claim, and the pool's start stays out of the window."""
WINDOW_OPENS_MS = 50
"""The window opens this long before they are due (less idle polling in it)."""


def _sleep_until(hg: Headgate, instant_ms: int) -> None:
    time.sleep(max(instant_ms - hg.clock.now_ms(), 0) / 1000)


def _succeeded(pool: WorkerPool, count: int) -> Callable[[], bool]:
    return lambda: pool.stats.succeeded == count


def _merge(steps: Steps, step: str, jobs: int, cost: Cost) -> None:
    if step not in steps:
        steps[step] = (jobs, cost)
        return
    had_jobs, had = steps[step]
    had.statements.update(cost.statements)
    had.shapes.update(cost.shapes)
    for table, (ins, upd, dele) in cost.rows.items():
        a, b, c = had.rows.get(table, (0, 0, 0))
        had.rows[table] = (a + ins, b + upd, c + dele)
    had.transactions += cost.transactions
    had.wal_bytes += cost.wal_bytes
    had.full_page_bytes += cost.full_page_bytes
    for table, hot in cost.hot_updates.items():
        had.hot_updates[table] = had.hot_updates.get(table, 0) + hot
    for table, locks in cost.row_locks.items():
        had.row_locks[table] = had.row_locks.get(table, 0) + locks
    for table, size in cost.wal_by_table.items():
        had.wal_by_table[table] = had.wal_by_table.get(table, 0) + size
    if cost.server_wal_bytes is not None:
        had.server_wal_bytes = (had.server_wal_bytes or 0) + cost.server_wal_bytes
    steps[step] = (had_jobs + jobs, had)


def ours(backend: str, sizes: Sizes) -> Steps:
    steps: Steps = {}
    with fresh_database(backend) as url:
        Headgate(url).close()  # the schema exists before the meter's connections open
        install()
        meter = Meter.of(url)
        hg = Headgate(url)
        held = _Held()
        hg.handler(KIND)(_noop)
        hg.handler(HELD_KIND, queue="split")(held)
        hg.handler(STEADY_KIND, queue="steady")(_noop)
        for n in range(5):  # warm: caches, prepared statements
            hg.enqueue(KIND, {"n": -n})

        with meter.block() as cost:
            for n in range(sizes.enqueue):
                hg.enqueue(KIND, {"n": n})
        _merge(steps, "enqueue", sizes.enqueue, cost)

        with meter.block() as cost:
            for start in range(0, sizes.enqueue_many, BATCH):
                hg.enqueue_many(
                    [{"kind": KIND, "payload": {"n": n}} for n in range(start, start + BATCH)]
                )
        _merge(steps, f"enqueue_many({BATCH})", sizes.enqueue_many, cost)

        backlog = 5 + sizes.enqueue + sizes.enqueue_many
        with meter.block() as cost:
            summary = hg.drain(timeout=600, queues=["default"])
        assert summary.succeeded == backlog, summary
        _merge(steps, "drain", backlog, cost)

        hg.start(WorkerConfig(queues={"split": SPLIT_CAPACITY}), scheduler=False)
        pool = hg._core.pool
        assert pool is not None
        for round_ in range(sizes.split_rounds):
            held.release.clear()
            held.running = 0
            due = hg.clock.now_ms() + LEAD_MS
            hg.enqueue_many(
                [
                    {"kind": HELD_KIND, "payload": {"n": n}, "run_at_ms": due}
                    for n in range(SPLIT_CAPACITY)
                ]
            )
            _sleep_until(hg, due - WINDOW_OPENS_MS)
            with meter.block() as claimed:
                assert held.running == 0, "claimed before the meter started: raise LEAD_MS"
                _wait(lambda: held.running == SPLIT_CAPACITY, "the claim")
            _merge(steps, f"claim C={SPLIT_CAPACITY}", SPLIT_CAPACITY, claimed)
            ended = SPLIT_CAPACITY * (round_ + 1)
            with meter.block() as completed:
                held.release.set()
                _wait(_succeeded(pool, ended), "the completions")
            _merge(steps, f"complete C={SPLIT_CAPACITY}", SPLIT_CAPACITY, completed)
        hg.stop()

        hg.start(WorkerConfig(queues={"steady": POOL_CAPACITY}), scheduler=False)
        pool = hg._core.pool
        assert pool is not None
        due = hg.clock.now_ms() + LEAD_MS
        for start in range(0, sizes.pool, SETUP_CHUNK):
            hg.enqueue_many(
                [
                    {"kind": STEADY_KIND, "payload": {"n": n}, "run_at_ms": due}
                    for n in range(start, min(start + SETUP_CHUNK, sizes.pool))
                ]
            )
        _sleep_until(hg, due - WINDOW_OPENS_MS)
        with meter.block() as cost:
            assert pool.stats.succeeded == 0, "claimed before the meter started: raise LEAD_MS"
            _wait(lambda: pool.stats.succeeded == sizes.pool, "the pool's backlog", 600)
        _merge(steps, f"pool C={POOL_CAPACITY}", sizes.pool, cost)
        hg.close()
        meter.close()
    return steps


class _RawQueue:
    """The raw loop: a plain jobs table, written the shortest way SQLAlchemy Core allows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.jobs = raw_jobs_table(MetaData())
        self.made = 0
        skip_locked = " FOR UPDATE SKIP LOCKED" if engine.dialect.name == "postgresql" else ""
        self.claim_sql = text(
            "UPDATE raw_jobs SET state = 'running', attempts = attempts + 1,"
            " worker_id = :worker, deadline_ms = :deadline"
            " WHERE job_id IN (SELECT job_id FROM raw_jobs"
            "  WHERE state = 'pending' AND queue = 'default' AND run_at_ms <= :now"
            f"  ORDER BY run_at_ms, job_id LIMIT :batch{skip_locked})"
            " RETURNING job_id, payload"
        )
        self.complete_sql = (
            update(self.jobs)
            .where(self.jobs.c.job_id == bindparam("b_id"))
            .values(
                state="completed", result=bindparam("b_result"), worker_id=None, deadline_ms=None
            )
        )

    def _row(self) -> dict[str, object]:
        self.made += 1
        return {
            "job_id": f"j{self.made:07d}",
            "queue": "default",
            "kind": KIND,
            "payload": json.dumps({"n": self.made}),
            "state": "pending",
            "run_at_ms": int(time.time() * 1000),
            "attempts": 0,
        }

    def enqueue(self) -> None:
        with self.engine.begin() as connection:
            connection.execute(insert(self.jobs).values(**self._row()))

    def enqueue_many(self, count: int) -> None:
        with self.engine.begin() as connection:
            connection.execute(insert(self.jobs), [self._row() for _ in range(count)])

    def claim(self, batch: int) -> list[str]:
        now = int(time.time() * 1000)
        with self.engine.begin() as connection:
            rows = connection.execute(
                self.claim_sql,
                {"worker": "raw", "deadline": now + 60_000, "now": now, "batch": batch},
            ).all()
        for _, payload in rows:
            json.loads(payload)
        return [job_id for job_id, _ in rows]

    def complete(self, job_ids: list[str]) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                self.complete_sql,
                [{"b_id": job_id, "b_result": json.dumps(None)} for job_id in job_ids],
            )

    def drain(self, batch: int) -> int:
        done = 0
        while claimed := self.claim(batch):
            self.complete(claimed)
            done += len(claimed)
        return done


def raw(backend: str, sizes: Sizes) -> Steps:
    steps: Steps = {}
    with fresh_database(backend) as url:
        engine = raw_engine(url)
        metadata = MetaData()
        raw_jobs_table(metadata)
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "CREATE INDEX ix_raw_jobs_claimable ON raw_jobs (queue, run_at_ms, job_id)"
                    " WHERE state = 'pending'"
                )
            )
        engine.dispose()  # the meter watches connections opened after the table exists
        install()
        meter = Meter.of(url)
        queue = _RawQueue(engine)
        for _ in range(5):
            queue.enqueue()

        with meter.block() as cost:
            for _ in range(sizes.enqueue):
                queue.enqueue()
        _merge(steps, "enqueue", sizes.enqueue, cost)

        with meter.block() as cost:
            for _ in range(0, sizes.enqueue_many, BATCH):
                queue.enqueue_many(BATCH)
        _merge(steps, f"enqueue_many({BATCH})", sizes.enqueue_many, cost)

        backlog = 5 + sizes.enqueue + sizes.enqueue_many
        with meter.block() as cost:
            assert queue.drain(BATCH) == backlog
        _merge(steps, "drain", backlog, cost)

        for _ in range(sizes.split_rounds):
            queue.enqueue_many(SPLIT_CAPACITY)
            with meter.block() as claimed_cost:
                claimed = queue.claim(SPLIT_CAPACITY)
            assert len(claimed) == SPLIT_CAPACITY
            _merge(steps, f"claim C={SPLIT_CAPACITY}", SPLIT_CAPACITY, claimed_cost)
            with meter.block() as completed:
                queue.complete(claimed)
            _merge(steps, f"complete C={SPLIT_CAPACITY}", SPLIT_CAPACITY, completed)

        for _ in range(0, sizes.pool, SETUP_CHUNK):
            queue.enqueue_many(SETUP_CHUNK)
        with meter.block() as cost:
            assert queue.drain(POOL_CAPACITY) == sizes.pool
        _merge(steps, f"pool C={POOL_CAPACITY}", sizes.pool, cost)
        engine.dispose()
        meter.close()
    return steps


def _statements(cost: Cost) -> int:
    s = cost.statements
    return s["write"] + s["read"] + s["notify"] + s["other"]


def _per(value: float, jobs: int) -> str:
    share = value / jobs
    if share == 0:
        return "0"
    if abs(share) < 0.01:
        return f"{share:.4f}"
    return f"{share:.2f}" if abs(share) < 100 else f"{share:,.0f}"


def _ratio(ours_value: float, raw_value: float) -> str:
    return f"{ours_value / raw_value:.1f}" if raw_value else ("-" if not ours_value else "inf")


def _step_row(step: str, who: str, jobs: int, cost: Cost) -> list[object]:
    ins, upd, dele = cost.total_rows()
    locks = sum(cost.row_locks.values())
    s = cost.statements
    return [
        step,
        who,
        jobs,
        _per(_statements(cost), jobs),
        _per(s["write"], jobs),
        _per(s["read"], jobs),
        _per(s["parameter sets"], jobs),
        _per(cost.transactions, jobs),
        _per(ins, jobs),
        _per(upd, jobs),
        _per(dele, jobs),
        _per(locks, jobs) if cost.server_wal_bytes is not None else "-",
        _per(cost.wal_bytes, jobs),
        _per(cost.full_page_bytes, jobs) if cost.server_wal_bytes is not None else "-",
    ]


def report(backend: str, ours_steps: Steps, raw_steps: Steps) -> None:
    rows: list[list[object]] = []
    ratios: list[list[object]] = []
    for step, (jobs, cost) in ours_steps.items():
        raw_jobs, raw_cost = raw_steps[step]
        rows.append(_step_row(step, "ours", jobs, cost))
        rows.append(_step_row(step, "raw", raw_jobs, raw_cost))
        ours_rows, raw_rows = sum(cost.total_rows()) / jobs, sum(raw_cost.total_rows()) / raw_jobs
        ratios.append(
            [
                step,
                _ratio(ours_rows, raw_rows),
                _ratio(_statements(cost) / jobs, _statements(raw_cost) / raw_jobs),
                _ratio(cost.statements["write"] / jobs, raw_cost.statements["write"] / raw_jobs),
                _ratio(cost.transactions / jobs, raw_cost.transactions / raw_jobs),
                _ratio(cost.wal_bytes / jobs, raw_cost.wal_bytes / raw_jobs),
                _ratio(
                    (cost.wal_bytes - cost.full_page_bytes) / jobs,
                    (raw_cost.wal_bytes - raw_cost.full_page_bytes) / raw_jobs,
                ),
            ]
        )
    log_name = "WAL B" if backend == "postgresql" else "WAL B (frames)"
    print_table(
        f"{backend}: per job, by step (stmts: sent, without BEGIN/COMMIT/SAVEPOINT; sets:"
        " executemany parameter sets (COPY rows not counted); txns: write transactions committed)",
        [
            "step",
            "who",
            "jobs",
            "stmts",
            "writes",
            "reads",
            "sets",
            "txns",
            "rows ins",
            "upd",
            "del",
            "locks",
            log_name,
            "of it FPI",
        ],
        rows,
    )
    print_table(
        f"{backend}: ours / raw, per job, same run",
        ["step", "rows", "stmts", "write stmts", "txns", "log bytes", "log bytes w/o FPI"],
        ratios,
    )
    postgresql = backend == "postgresql"
    detail: list[list[object]] = []
    for step, (jobs, cost) in ours_steps.items():
        tables = sorted(set(cost.rows) | set(cost.wal_by_table) | set(cost.row_locks))
        for table in tables:
            ins, upd, dele = cost.rows.get(table, (0, 0, 0))
            wal = cost.wal_by_table.get(table)
            locks = cost.row_locks.get(table, 0)
            detail.append(
                [
                    step,
                    table,
                    _per(ins, jobs),
                    _per(upd, jobs),
                    _per(cost.hot_updates.get(table, 0), jobs) if postgresql else "-",
                    _per(dele, jobs),
                    _per(locks, jobs) if postgresql else "-",
                    _per(wal, jobs) if wal is not None else "-",
                ]
            )
    print_table(
        f"{backend}: ours, per job, table by table (PostgreSQL: row locks are FOR UPDATE"
        " locks written to the WAL; WAL B the records on the table, its indexes and TOAST)",
        ["step", "table", "ins", "upd", "of it HOT", "del", "row locks", "WAL B"],
        detail,
    )
    shapes: list[list[object]] = []
    for step, (jobs, cost) in ours_steps.items():
        for shape, count in cost.shapes.most_common(SHAPES_SHOWN):
            shapes.append([step, _per(count, jobs), shape])
    print_table(
        f"{backend}: ours, the statements sent most, per job (their first words)",
        ["step", "per job", "statement"],
        shapes,
    )
    seen = sum(c.statements["seen by SQLAlchemy"] for _, c in ours_steps.values())
    sent = sum(c.statements["sent"] for _, c in ours_steps.values())
    print(
        f"\n{backend}: SQLAlchemy's before_cursor_execute saw {seen:,} of the {sent:,} cursor"
        " executions ours sent (the rest run on the driver's cursor: prepared statements,"
        " COPY, explicit BEGIN/COMMIT)."
    )
    if backend == "postgresql":
        attributed = sum(c.wal_bytes for _, c in ours_steps.values()) + sum(
            c.wal_bytes for _, c in raw_steps.values()
        )
        server = sum(c.server_wal_bytes or 0 for _, c in ours_steps.values()) + sum(
            c.server_wal_bytes or 0 for _, c in raw_steps.values()
        )
        print(
            f"postgresql: WAL attributed to the measured schemas {attributed:,} B; the server's"
            f" LSN moved {server:,} B over the same windows (the rest: other databases, record"
            " alignment, checkpoints)."
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    sizes = QUICK if args.quick else FULL
    quiet_json_logs()
    for backend in backends:
        raw_steps = raw(backend, sizes)
        ours_steps = ours(backend, sizes)
        report(backend, ours_steps, raw_steps)


if __name__ == "__main__":
    main()
