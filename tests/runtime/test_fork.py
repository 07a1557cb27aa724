"""Forked workers (gunicorn, uwsgi): a Headgate made, even started, before the
fork must work in every child, whatever the parent's threads were doing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from headgate import Headgate
from headgate.testing import FakeClock
from tests.runtime.conftest import fire

pytestmark = pytest.mark.processes

CHILDREN = 4


def _in_child(hg: Headgate) -> int:
    """What a forked worker does; its exit status says whether all of it worked."""
    try:
        if hg.running:
            return 2  # the parent's actor threads did not come along
        hg.start()
        hg.enqueue("worker.job", {"pid": os.getpid()})
        hg.stop()
        return 0
    except BaseException:
        return 1


def _wait(pid: int, seconds: float) -> int | None:
    """The child's exit status, or None (after killing it) if it hangs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def test_workers_forked_from_a_busy_running_runtime_work(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate()
    hg.schedules.put("s", spec="@every:60000", kind="k")
    hg.start()
    stop = threading.Event()
    writes = 0

    def keep_writing() -> None:  # another thread of the parent, always mid-write
        nonlocal writes
        while not stop.is_set():
            hg.enqueue("parent.job")
            writes += 1

    writer = threading.Thread(target=keep_writing)
    writer.start()
    children = []
    try:
        for _ in range(CHILDREN):
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:
                os._exit(_in_child(hg))
            children.append(pid)
    finally:
        stop.set()
        writer.join()
    assert [_wait(pid, 30) for pid in children] == [0] * CHILDREN
    clock.advance(60_000)
    fire(hg)  # the parent's runtime carries on
    assert hg.schedules.enqueue_events("s").events[0].outcome == "enqueued"
    jobs = [e.event for e in hg._core.store.log.read_all(0, 100_000) if e.type == "JobEnqueued"]
    assert sum(1 for job in jobs if job.kind == "worker.job") == CHILDREN  # type: ignore[attr-defined]
    assert writes > 0


FORK_SCRIPT = """
import os, sys, threading, time
import structlog
from headgate import Headgate

# A host logging with structlog to stderr: its PrintLogger holds a lock per file.
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
hg = Headgate(sys.argv[1])
scenario = sys.argv[2]
log = structlog.get_logger("parent")
stop = threading.Event()

def chatter():  # a parent thread always in the middle of a log line
    while not stop.is_set():
        log.info("parent busy", detail="x" * 200)

def fork_child(work):
    pid = os.fork()
    if pid == 0:
        try:
            work()
        finally:
            os._exit(0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
        time.sleep(0.01)
    os.kill(pid, 9)
    return False

if scenario == "logging":
    thread = threading.Thread(target=chatter)
    thread.start()
    ok = all(fork_child(lambda: log.info("child up")) for _ in range(20))
    stop.set()
    thread.join()
else:  # forking from inside this thread's own write must not wait for itself
    with hg._core.store.log.write():
        ok = fork_child(lambda: None)
hg.close()
print("ok" if ok else "a child hung", file=sys.__stdout__)
"""


@pytest.mark.parametrize("scenario", ["logging", "inside_a_write"])
def test_forks_never_wait_forever(store_url: str, scenario: str) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, store_url, scenario],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.stdout.strip() == "ok", finished.stdout + finished.stderr[-2000:]
