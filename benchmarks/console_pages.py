"""The console's pages and the API's main lists at 10,000 schedules and
1,000,000 jobs, on SQLite and/or PostgreSQL (--backend), printed as a table.

Seeding: the 10,000 schedules are defined through the store (ScheduleDefined
events, as `benchmarks.scheduler.define_many` does). The jobs are inserted
straight into the projections' tables (`headgate_jobs`, `headgate_job_attempts`,
`headgate_enqueue_history`, `headgate_schedule_runs`, `headgate_quarantine`), in
rows of the shape the app writes (every column of `JobRow` and the others, with the values a job's
events fold to), in batches: a million jobs through the event log would take
the benchmark most of an hour and measure the enqueue path, which other
benchmarks do. The log holds none of these jobs' events, so this store is not
one to verify or rebuild. PostgreSQL's tables are analysed after the load.

The jobs: 85% completed, 5% failed, 2% cancelled, 1% expired, 6% pending, 0.5%
running, 0.5% quarantined; 20 kinds of about equal share and one rare kind
(about 100 jobs); a unique key on every tenth; the first half made by the
schedules' ticks (50 a schedule), each with its enqueue record and its run
(what the schedule list's health and the schedule page's runs read); an
attempt row for every completed and failed job.

Each page and API list is then read in-process (FastAPI's TestClient against
the ASGI app, no server, no network): WARMUP reads, then SAMPLES timed, p50
and p95 in ms. Target (issue 37): p95 <= 200 ms each.

Run: python -m benchmarks.console_pages [--jobs N] [--schedules N]
                                       [--backend sqlite|postgresql|both]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, Table, create_engine, event, text

from benchmarks._common import fresh_database, print_table
from benchmarks.scheduler import define_many, quiet_json_logs
from headgate import Headgate
from headgate._domain.ids import fingerprint_of_text
from headgate._projections import JobRow
from headgate._store.sql.schema import LIVE
from headgate.web import create_app

WARMUP = 3
SAMPLES = 30
BATCH = 20_000
START_MS = 1_767_225_600_000  # 2026-01-01 00:00 UTC
KINDS = 20
STATES = (
    (170, "completed"),
    (10, "failed"),
    (4, "cancelled"),
    (2, "expired"),
    (12, "pending"),
    (1, "running"),
    (1, "quarantined"),
)
"""Out of every 200 jobs, how many end in each state."""
QUARANTINED_FINGERPRINTS = 50
ATTEMPT_EVENT_IDS = 10**12
HISTORY_EVENT_IDS = 2 * 10**12
RUN_POSITIONS = 3 * 10**12
"""Row keys far past any log position this store reaches (the rows have no events)."""


def _state_of(n: int) -> str:
    slot = n % 200
    for share, state in STATES:
        if slot < share:
            return state
        slot -= share
    raise AssertionError(slot)


def _held_payload(n: int) -> str:
    """A quarantined job's payload: one of QUARANTINED_FINGERPRINTS, each shared by many."""
    return f'{{"held":{(n // 200) % QUARANTINED_FINGERPRINTS}}}'


def _kind_of(n: int) -> str:
    return "rare.kind" if n % 10_007 == 0 else f"kind.{n // 7 % KINDS}"


def job_row(n: int, schedules: int, periodic_jobs: int) -> dict[str, Any]:
    """Job `n` as its events fold it: `JobRow`'s every field."""
    state = _state_of(n)
    created = START_MS + n * 50
    periodic = n < periodic_jobs
    finished_attempts = 1 if state in {"completed", "failed"} else 0
    row = JobRow(
        job_id=f"job-{n:07d}",
        kind=_kind_of(n),
        queue="default" if n % 4 else f"q{n % 5}",
        payload=_held_payload(n) if state == "quarantined" else f'{{"n":{n}}}',
        state=state,
        unique_key=f"order-{n}" if n % 10 == 0 else None,
        created_at_ms=created,
        updated_at_ms=created + 1_000,
        periodic_schedule_id=f"s{n % schedules}" if periodic else None,
        periodic_tick_ms=created if periodic else None,
        attempts=finished_attempts,
        crash_count=3 if state == "quarantined" else 0,
        run_at_ms=created,
        max_attempts=None,
        timeout_ms=None,
        worker_id="w-bench" if state == "running" else None,
        deadline_ms=created + 60_000 if state == "running" else None,
        version=1 + finished_attempts * 2 + (state in {"cancelled", "expired", "quarantined"}),
        result='{"ok":true}' if state == "completed" else None,
        error_type="TimeoutError" if state == "failed" else None,
        error_message="upstream took too long" if state == "failed" else None,
        run_now_schedule_id=None,
    )
    return {field.name: getattr(row, field.name) for field in fields(JobRow)}


def _attempt_row(job: dict[str, Any], n: int) -> dict[str, Any]:
    started = job["created_at_ms"] + 10
    failed = job["state"] == "failed"
    return {
        "event_id": ATTEMPT_EVENT_IDS + n,
        "job_id": job["job_id"],
        "attempt": 1,
        "outcome": "failed" if failed else "succeeded",
        "worker_id": "w-bench",
        "started_at_ms": started,
        "ended_at_ms": started + 50 + n % 900,
        "error_type": job["error_type"],
        "error_message": job["error_message"],
        "traceback": None,
    }


def _history_row(job: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "event_id": HISTORY_EVENT_IDS + n,
        "schedule_id": job["periodic_schedule_id"],
        "tick_ms": job["periodic_tick_ms"],
        "job_id": job["job_id"],
        "outcome": "enqueued",
        "reason": "accepted",
        "attempt": 1,
        "recorded_at_ms": job["created_at_ms"],
    }


_RUN_STATES = {
    "completed": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "expired",
    "quarantined": "quarantined",
}


def _run_row(job: dict[str, Any], n: int) -> dict[str, Any]:
    """The job's run as `projections.schedule_runs` folds it."""
    started = job["created_at_ms"] + 10
    settled = job["state"] in _RUN_STATES
    ran = job["state"] in {"completed", "failed"}
    return {
        "job_id": job["job_id"],
        "schedule_id": job["periodic_schedule_id"],
        "position": RUN_POSITIONS + n,
        "tick_ms": job["periodic_tick_ms"],
        "manual": False,
        "enqueued_at_ms": job["created_at_ms"],
        "state": _RUN_STATES.get(job["state"], "enqueued"),
        "attempts": job["attempts"],
        "started_at_ms": started if ran else None,
        "finished_at_ms": started + 50 + n % 900 if settled else None,
        "error_type": job["error_type"],
        "updated_at_ms": job["updated_at_ms"],
    }


def _batches(jobs: int, schedules: int) -> Iterator[dict[Table, list[dict[str, Any]]]]:
    periodic_jobs = min(jobs // 2, schedules * 50)
    for start in range(0, jobs, BATCH):
        rows: dict[Table, list[dict[str, Any]]] = {
            LIVE.jobs: [],
            LIVE.job_attempts: [],
            LIVE.enqueue_history: [],
            LIVE.schedule_runs: [],
        }
        for n in range(start, min(start + BATCH, jobs)):
            job = job_row(n, schedules, periodic_jobs)
            rows[LIVE.jobs].append(job)
            if job["state"] in {"completed", "failed"}:
                rows[LIVE.job_attempts].append(_attempt_row(job, n))
            if job["periodic_schedule_id"] is not None:
                rows[LIVE.enqueue_history].append(_history_row(job, n))
                rows[LIVE.schedule_runs].append(_run_row(job, n))
        yield rows


def _loading_engine(url: str) -> Engine:
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _fast(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
            dbapi_connection.execute("PRAGMA synchronous=OFF")

    return engine


def seed(hg: Headgate, url: str, jobs: int, schedules: int) -> float:
    """Fill the store; returns the seconds it took."""
    began = time.perf_counter()
    define_many(hg, schedules, "@every:3600000", START_MS + 3_600_000)
    engine = _loading_engine(url)
    try:
        for rows in _batches(jobs, schedules):
            with engine.begin() as connection:
                for table, batch in rows.items():
                    if batch:
                        connection.execute(table.insert(), batch)
        held = [
            {
                "fingerprint": fingerprint_of_text(_kind_of(n), _held_payload(n)),
                "note": f"crashed its workers 3 times (job job-{n:07d})",
                "quarantined_at_ms": START_MS + n * 50,
            }
            for n in range(199, 200 * QUARANTINED_FINGERPRINTS, 200)
        ]
        with engine.begin() as connection:
            connection.execute(LIVE.quarantine.insert(), held)
            connection.execute(text("ANALYZE"))  # statistics as a live store's would be
    finally:
        engine.dispose()
    return time.perf_counter() - began


def targets(jobs: int, schedules: int) -> list[tuple[str, str]]:
    """(what, path) of every page and list measured."""
    middle = jobs // 2 + 3  # a failed job of the unscheduled half
    schedule = f"s{schedules // 2}"
    pages = [
        ("overview", "/overview"),
        ("jobs: all", "/jobs"),
        *((f"jobs: {state}", f"/jobs?state={state}") for _, state in STATES),
        ("jobs: search unique key", f"/jobs?search=order-{jobs // 3 // 10 * 10}"),
        ("jobs: search job id", f"/jobs?search=job-{middle:07d}"),
        ("jobs: kind (common)", "/jobs?kind=kind.3"),
        ("jobs: kind (rare)", "/jobs?kind=rare.kind"),
        ("jobs: kind + failed", "/jobs?kind=kind.3&state=failed"),
        ("jobs: schedule", f"/jobs?schedule_id={schedule}"),
        ("jobs: queue + pending", "/jobs?queue=q1&state=pending"),
        ("schedules", "/"),
        ("schedules: search", "/?search=s99"),
        ("schedules: failing", "/?health=failing"),
        ("schedule page", f"/schedules/{schedule}"),
        ("job page", f"/jobs/job-{middle:07d}"),
        ("workers", "/workers"),
        ("quarantine", "/quarantine"),
        ("queues", "/queues"),
    ]
    api = [
        ("API jobs", "/api/v1/jobs"),
        ("API jobs failed", "/api/v1/jobs?state=failed"),
        ("API jobs:count", "/api/v1/jobs:count"),
        ("API jobs:count kind", "/api/v1/jobs:count?kind=kind.3"),
        ("API periodic", "/api/v1/periodic"),
        ("API periodic/{id}", f"/api/v1/periodic/{schedule}"),
        ("API periodic?health=failing", "/api/v1/periodic?health=failing"),
        ("API periodic/{id}/runs", f"/api/v1/periodic/{schedule}/runs"),
        ("API job", f"/api/v1/jobs/job-{middle:07d}"),
        ("API quarantine", "/api/v1/quarantine"),
        ("API workers", "/api/v1/workers"),
    ]
    return pages + api


def measure(client: TestClient, path: str) -> tuple[float, float]:
    for _ in range(WARMUP):
        assert client.get(path).status_code == 200, path
    samples = []
    for _ in range(SAMPLES):
        began = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(int(len(ordered) * 0.95) - 1, 0)]


def run(backend: str, jobs: int, schedules: int) -> None:
    with fresh_database(backend) as url:
        with Headgate(url) as hg:
            seconds = seed(hg, url, jobs, schedules)
            seeded = f"{schedules:,} schedules and {jobs:,} jobs"
            print(f"\n{backend}: seeded {seeded} in {seconds:.0f} s")
            with TestClient(create_app(hg, api_token=""), base_url="http://localhost") as client:
                rows = []
                for what, path in targets(jobs, schedules):
                    p50, p95 = measure(client, path)
                    rows.append(
                        (what, path, f"{p50:.1f}", f"{p95:.1f}", "ok" if p95 <= 200 else "MISS")
                    )
        print_table(
            f"Console pages and API lists, {backend}, {schedules:,} schedules, {jobs:,} jobs "
            f"(ms, {SAMPLES} reads each)",
            ("page", "path", "p50", "p95", "<= 200 ms"),
            rows,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql", "both"),
        default="sqlite",
        help="PostgreSQL at $HEADGATE_BENCH_POSTGRES_URL (a database of its own is made)",
    )
    args = parser.parse_args()
    quiet_json_logs()
    for backend in ("sqlite", "postgresql") if args.backend == "both" else (args.backend,):
        run(backend, args.jobs, args.schedules)


if __name__ == "__main__":
    main()
