"""Smoke test of an installed Headgate: what a user gets from the wheel.

Run by `.ci/package` with the Python of a fresh venv that has only the wheel
installed, from an empty directory, so nothing of the source tree can be
imported. It checks the version and the package data, then serves: a schedule
created over the API ticks, the console and Swagger UI answer, a worker runs
the tick's job with a handler, and a PostgreSQL URL without the extra says
which extra to install. Each wait has a deadline; the first failure exits 1.
A server that does not come up in time is made to print every thread's stack
(faulthandler, on SIGABRT) before the failure is reported, with what it wrote
and what else kept the machine busy, so that a slow start can be told from a
hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from importlib import metadata, resources
from pathlib import Path
from typing import Any

DEADLINE_S = 30.0
START_DEADLINE_S = 90.0
"""For serve to listen: a fresh venv's first start on a loaded machine."""
SERVING_LINE = re.compile(r"headgate: serving .* on (http://\S+)/\n")
HANDLER_MODULE = """\
from pathlib import Path

from headgate import Headgate, JobContext

hg = Headgate("sqlite:///{db}")


@hg.handler("smoke.ping")
def ping(job: JobContext) -> dict[str, int]:
    Path("ran-" + job.id).touch()
    return {{"tick_ms": job.periodic_origin.tick_ms if job.periodic_origin else -1}}
"""


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"smoke: FAILED: {what}")
    print(f"smoke: ok: {what}")


class TimedOut(Exception):
    pass


def wait_for(what: str, probe: Callable[[], Any], deadline_s: float = DEADLINE_S) -> Any:
    started = time.monotonic()
    while time.monotonic() < started + deadline_s:
        found = probe()
        if found:
            print(f"smoke: ok: {what} ({time.monotonic() - started:.1f} s)")
            return found
        time.sleep(0.2)
    raise TimedOut(f"{what} (not within {deadline_s:.0f} s)")


def request(url: str, method: str = "GET", body: object = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    sent = urllib.request.Request(url, data=data, method=method)
    sent.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(sent, timeout=10) as response:
        return int(response.status), response.read()


def get_json(url: str) -> Any:
    return json.loads(request(url)[1])


def check_installed() -> None:
    import headgate  # noqa: PLC0415 (after the checks of where we run)

    where = Path(headgate.__file__).resolve()
    check(Path(sys.prefix).resolve() in where.parents, f"headgate imported from the venv ({where})")
    version = metadata.version("headgate-jobs")
    check(headgate.__version__ == version, f"headgate.__version__ is the metadata's ({version})")
    shown = subprocess.run(
        [Path(sys.executable).with_name("headgate"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    check(shown == f"headgate {version}\n", f"headgate --version prints it ({shown.strip()})")
    package = resources.files("headgate")
    for data in (
        "py.typed",
        "_store/sql/migrations/script.py.mako",
        "_store/sql/migrations/versions/v0001_headgate_schema.py",
        "web/templates/base.html",
        "web/static/console.js",
        "_projections/schedules.py",
    ):
        check(package.joinpath(data).is_file(), f"package data {data}")
    import headgate._projections as projections  # noqa: PLC0415

    check(Path(projections.__file__).parent.is_dir(), "headgate._projections is a package")


def check_postgresql_needs_its_extra(directory: Path) -> None:
    shown = subprocess.run(
        [Path(sys.executable).with_name("headgate"), "schedules", "list"],
        capture_output=True,
        text=True,
        cwd=directory,
        env={"HEADGATE_DB": "postgresql://app@127.0.0.1:1/app", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    check(
        shown.returncode == 2 and "pip install 'headgate-jobs[postgresql]'" in shown.stderr,
        f"a PostgreSQL URL without the extra names it: {shown.stderr.strip()}",
    )


def start_serving(directory: Path, db: str) -> subprocess.Popen[bytes]:
    with (directory / "serve.err").open("wb") as stderr:
        return subprocess.Popen(
            [Path(sys.executable).with_name("headgate"), "serve", "--port", "0", "--db", db],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )


def serving_address(process: subprocess.Popen[bytes], directory: Path) -> str:
    err = directory / "serve.err"

    def printed() -> str | None:
        if process.poll() is not None:
            sys.exit(f"smoke: FAILED: serve exited {process.returncode}: {err.read_text()}")
        found = SERVING_LINE.search(err.read_text())
        return found[1] if found else None

    try:
        address: str = wait_for("headgate serve listens", printed, START_DEADLINE_S)
    except TimedOut:
        process.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        raise
    return address


def print_machine_load() -> None:
    print(f"smoke: load average {os.getloadavg()}", file=sys.stderr)
    busiest = subprocess.run(
        ["ps", "-eo", "pid,ppid,pcpu,etime,args", "--sort=-pcpu"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    print("\n".join(busiest.splitlines()[:15]), file=sys.stderr)


def check_serving(directory: Path) -> None:
    db = f"sqlite:///{directory / 'smoke.db'}"
    server = start_serving(directory, db)
    worker: subprocess.Popen[bytes] | None = None
    try:
        base = serving_address(server, directory)
        status, _ = request(
            f"{base}/api/v1/periodic/smoke",
            "PUT",
            {"spec": "@every:1s", "kind": "smoke.ping", "payload": {"from": "ci"}},
        )
        check(status in (200, 201), f"PUT /api/v1/periodic/smoke answered {status}")
        events = f"{base}/api/v1/periodic/smoke/enqueue-events"
        ticked = wait_for(
            "a tick recorded as enqueued",
            lambda: [e for e in get_json(events)["events"] if e["outcome"] == "enqueued"],
        )
        status, page = request(f"{base}/")
        check(status == 200 and b"smoke" in page, "the console lists the schedule")
        status, page = request(f"{base}/docs")
        check(status == 200 and b"swagger-ui-bundle.js" in page, "/docs is Swagger UI")
        assets = re.findall(rb'src="([^"]*swagger-ui-bundle\.js)"', page)
        status, script = request(base + assets[0].decode())
        check(status == 200 and len(script) > 100_000, "Swagger UI's script is served locally")
        (directory / "smoke_jobs.py").write_text(HANDLER_MODULE.format(db=directory / "smoke.db"))
        worker = subprocess.Popen(
            [Path(sys.executable).with_name("headgate"), "worker", "--app", "smoke_jobs:hg"],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=(directory / "worker.err").open("wb"),
        )
        job_url = f"{base}/api/v1/jobs/{ticked[0]['job_id']}"
        done = wait_for(
            "the worker ran the tick's job with its handler",
            lambda: (job := get_json(job_url))["state"] == "completed" and job,
        )
        check(done["result"] == {"tick_ms": ticked[0]["tick_ms"]}, "the job's result is stored")
        check((directory / f"ran-{done['id']}").exists(), "the handler ran in the worker")
        for process, name in ((worker, "worker"), (server, "serve")):
            process.send_signal(signal.SIGTERM)
            check(process.wait(timeout=DEADLINE_S) == 0, f"{name} stops cleanly on SIGTERM")
    finally:
        for left in (worker, server):
            if left is not None and left.poll() is None:
                left.kill()
                left.wait()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="headgate-smoke-") as scratch:
        directory = Path(scratch)
        check_installed()
        check_postgresql_needs_its_extra(directory)
        try:
            check_serving(directory)
        except TimedOut as timed_out:
            for written in sorted(directory.glob("*.err")):
                print(f"smoke: {written.name}:\n{written.read_text()[-4000:]}", file=sys.stderr)
            print_machine_load()
            sys.exit(f"smoke: FAILED: {timed_out}")
    print("smoke: passed")


if __name__ == "__main__":
    main()
