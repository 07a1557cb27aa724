"""Forked workers (gunicorn, uwsgi): a Headgate made, even started, before the
fork must work in every child, whatever the parent's threads were doing."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from headgate import FakeClock, Headgate
from tests.runtime.conftest import fire

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
    hg.put_schedule("s", spec="@every:60000", kind="k")
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
    assert hg.enqueue_events("s").events[0].outcome == "enqueued"
    jobs = [e.event for e in hg.store.read_all(0, 100_000) if e.type == "JobEnqueued"]
    assert sum(1 for job in jobs if job.kind == "worker.job") == CHILDREN  # type: ignore[attr-defined]
    assert writes > 0
