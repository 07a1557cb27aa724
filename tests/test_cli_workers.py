"""The command line runs a host's handlers, as Celery's -A and Procrastinate's
--app do: `headgate worker --app module:hg` and `headgate serve --app`."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest

from headgate import Headgate
from tests.processes import process_running
from tests.web.serving import headgate_command, serving, wait_until_answering

pytestmark = pytest.mark.processes

APP = textwrap.dedent(
    """
    from pathlib import Path
    from headgate import Headgate, JobContext

    hg = Headgate("sqlite:///{database}")

    @hg.handler("write", queue="files")
    def write(job: JobContext) -> str:
        Path(job.payload["path"]).write_text("ran")
        return "written"

    @hg.handler("wait", queue="files")
    def wait(job: JobContext) -> None:
        Path(job.payload["path"]).write_text("started")
        job.cancelled.wait(60)

    @hg.handler("pid", queue="files", executor="process")
    def pid(job: JobContext) -> int:
        import os
        return os.getpid()

    @hg.handler("nap", queue="files", executor="process", timeout_ms=60_000)
    def nap(job: JobContext) -> str:
        import os, time
        Path(job.payload["path"]).write_text(str(os.getpid()))
        time.sleep(job.payload["seconds"])
        return "slept"
    """
)


def _app(tmp_path: Path) -> Path:
    database = tmp_path / "jobs.db"
    (tmp_path / "myservice_jobs.py").write_text(APP.format(database=database))
    return database


def _wait_for(path: Path, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)


def test_a_worker_runs_the_apps_handlers_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    database = _app(tmp_path)
    worker = subprocess.Popen(
        [headgate_command(), "worker", "--app", "myservice_jobs:hg", "--queue", "files=2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with Headgate(f"sqlite:///{database}") as client:
            job = client.enqueue("write", {"path": str(tmp_path / "out.txt")}, queue="files")
            _wait_for(tmp_path / "out.txt")
            deadline = time.monotonic() + 10
            while client.jobs.get(job.id).state != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert client.jobs.get(job.id).result == "written"
            assert [w.queues for w in client.runtime.workers()] == [{"files": 2}]
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=20) == 0
            assert client.runtime.workers() == [], "a clean stop removes the heartbeat"
            assert client.runtime.lease() is None, "a worker never takes the scheduler lease"
    finally:
        if worker.poll() is None:
            worker.kill()
    output = worker.stdout.read() if worker.stdout else ""
    assert "Traceback" not in output


def test_sigterm_gives_back_a_job_still_running_after_the_shutdown_timeout(
    tmp_path: Path,
) -> None:
    database = _app(tmp_path)
    worker = subprocess.Popen(
        [headgate_command(), "worker", "--app", "myservice_jobs:hg", "--shutdown-timeout", "1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with Headgate(f"sqlite:///{database}") as client:
            job = client.enqueue("wait", {"path": str(tmp_path / "started.txt")}, queue="files")
            _wait_for(tmp_path / "started.txt")
            began = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=20) == 0
            assert time.monotonic() - began < 1 + 2, "stops within the timeout and a little"
            given_back = client.jobs.get(job.id)
            assert (given_back.state, given_back.attempts, given_back.crash_count) == (
                "pending",
                0,
                0,
            ), "released, not counted as an attempt or a crash"
            assert given_back.attempt_history[0].outcome == "released"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_ctrl_c_says_what_the_stop_waits_for_and_a_second_gives_the_jobs_back_now(
    tmp_path: Path,
) -> None:
    database = _app(tmp_path)
    worker = subprocess.Popen(
        [headgate_command(), "worker", "--app", "myservice_jobs:hg"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(worker.stdout.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()

    def said(text: str, within_s: float = 10) -> None:
        deadline = time.monotonic() + within_s
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline, f"never said {text!r}: {lines}"
            time.sleep(0.02)

    try:
        with Headgate(f"sqlite:///{database}") as client:
            job = client.enqueue("wait", {"path": str(tmp_path / "started.txt")}, queue="files")
            _wait_for(tmp_path / "started.txt")
            worker.send_signal(signal.SIGINT)
            said("running jobs have up to 30 s to finish (press Ctrl-C again to give them back")
            said("waiting for running jobs to finish")
            assert worker.poll() is None, "the first Ctrl-C waits for the running job"
            began = time.monotonic()
            worker.send_signal(signal.SIGINT)
            assert worker.wait(timeout=10) == 0
            assert time.monotonic() - began < 3, "the second Ctrl-C stops at once"
            given_back = client.jobs.get(job.id)
            assert (given_back.state, given_back.attempts, given_back.crash_count) == (
                "pending",
                0,
                0,
            ), "given back, as at the end of the shutdown timeout"
    finally:
        if worker.poll() is None:
            worker.kill()
    reader.join(timeout=5)
    assert any("giving running jobs back now" in line for line in lines), lines


def test_a_worker_replaces_its_handlers_child_processes_after_max_jobs_per_child(
    tmp_path: Path,
) -> None:
    database = _app(tmp_path)
    command = [headgate_command(), "worker", "--app", "myservice_jobs:hg", "--queue", "files=1"]
    worker = subprocess.Popen(
        [*command, "--max-jobs-per-child", "2", "--child-memory-limit-mb", "1024"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with Headgate(f"sqlite:///{database}") as client:
            pids = []
            for _ in range(3):
                job = client.enqueue("pid", queue="files")
                deadline = time.monotonic() + 30
                while client.jobs.get(job.id).state != "completed":
                    assert time.monotonic() < deadline, client.jobs.get(job.id)
                    time.sleep(0.05)
                pids.append(client.jobs.get(job.id).result)
            assert pids[0] == pids[1] != pids[2], "two jobs per child, then a new child"
            assert worker.pid not in pids
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=20) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    output = worker.stdout.read() if worker.stdout else ""
    assert "Traceback" not in output


def _worker_of_naps(tmp_path: Path) -> subprocess.Popen[str]:
    """A worker leading a process group of its own, as under a supervisor."""
    return subprocess.Popen(
        [headgate_command(), "worker", "--app", "myservice_jobs:hg", "--queue", "files=1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_sigterm_to_the_workers_group_lets_a_job_in_a_child_finish(tmp_path: Path) -> None:
    # systemd, dumb-init and supervisord's stopasgroup signal the whole group at a
    # deploy: the job's child must not die of it and count a crash.
    database = _app(tmp_path)
    worker = _worker_of_naps(tmp_path)
    try:
        with Headgate(f"sqlite:///{database}") as client:
            started = tmp_path / "nap.pid"
            job = client.enqueue("nap", {"path": str(started), "seconds": 1.5}, queue="files")
            _wait_for(started)
            os.killpg(worker.pid, signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
            done = client.jobs.get(job.id)
            assert (done.state, done.result, done.crash_count) == ("completed", "slept", 0)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    output = worker.stdout.read() if worker.stdout else ""
    assert "Traceback" not in output


def test_a_child_dies_with_its_worker_so_a_rescued_job_never_runs_twice_at_once(
    tmp_path: Path,
) -> None:
    database = _app(tmp_path)
    worker = _worker_of_naps(tmp_path)
    try:
        with Headgate(f"sqlite:///{database}") as client:
            started = tmp_path / "nap.pid"
            client.enqueue("nap", {"path": str(started), "seconds": 60}, queue="files")
            _wait_for(started)
            child = int(started.read_text())
            assert child != worker.pid and process_running(child)
            worker.kill()  # SIGKILL: the worker cannot tell its child anything
            worker.wait(timeout=10)
            deadline = time.monotonic() + 5
            while process_running(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not process_running(child), "the child ran on after its worker died"
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)


def test_serve_runs_the_apps_handlers_beside_the_api(tmp_path: Path) -> None:
    database = _app(tmp_path)
    with serving(tmp_path, "--app", "myservice_jobs:hg") as (process, base):
        assert wait_until_answering(f"{base}/api/v1/periodic") < 15
        with Headgate(f"sqlite:///{database}") as client:
            client.enqueue("write", {"path": str(tmp_path / "served.txt")}, queue="files")
            _wait_for(tmp_path / "served.txt")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


@pytest.mark.parametrize(
    ("app", "says"),
    [
        ("nope", "is not MODULE:NAME"),
        ("no_such_module:hg", "cannot import 'no_such_module'"),
        ("myservice_jobs:missing", "has no 'missing'"),
        ("myservice_jobs:Path", "is a type, not a Headgate"),
    ],
)
def test_a_bad_app_is_one_clear_line(tmp_path: Path, app: str, says: str) -> None:
    _app(tmp_path)
    finished = subprocess.run(
        [headgate_command(), "worker", "--app", app],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 1
    assert says in finished.stderr and "Traceback" not in finished.stderr
