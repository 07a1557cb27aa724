"""Overlap policies across real host processes on the real clock: two hosts
share the store, each with workers, one of them the scheduler; what ran when
is written by the handlers themselves and the jobs' states are read from the
store."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from headgate import Headgate, RuntimeConfig

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
HOST = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from headgate import Headgate, RuntimeConfig, WorkerConfig

    url, runs, policy = sys.argv[1], sys.argv[2], sys.argv[3]
    hg = Headgate(url, config=RuntimeConfig(lease_ttl_ms=1500, min_interval_ms=100))

    def note(*words):
        with open(runs, "a") as out:
            out.write(" ".join(str(w) for w in words) + "\\n")

    @hg.handler("work")
    def work(job):
        tick = job.periodic_origin.tick_ms
        note("start", tick, time.time())
        if policy == "skip":
            time.sleep(0.5)
        elif job.cancelled.wait(5):
            note("told", tick, time.time())
        note("end", tick, time.time())

    def stop(*_):
        hg.close()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    hg.start(WorkerConfig(queues={"default": 4}, poll_interval_ms=20, heartbeat_ttl_ms=1000))
    print("ready", flush=True)
    threading.Event().wait()
    """
)


def _eventually(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)


def _run_hosts(url: str, tmp_path: Path, policy: str, seconds: float) -> list[list[str]]:
    """Two hosts run the schedule for `seconds`; the handlers' notes, in order."""
    runs = tmp_path / "runs.txt"
    runs.touch()
    hosts = []
    try:
        for number in range(2):
            output = tmp_path / f"host{number}.txt"
            host = subprocess.Popen(
                [sys.executable, "-c", HOST, url, str(runs), policy],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=output.open("w"),
                stderr=subprocess.STDOUT,
            )
            hosts.append(host)
            _eventually(
                lambda o=output, h=host: "ready" in o.read_text() or h.poll() is not None,
                30,
                "a host",
            )
            assert host.poll() is None, output.read_text()
        time.sleep(seconds)
    finally:
        for host in hosts:
            host.send_signal(signal.SIGTERM)
        for host in hosts:
            host.wait(30)
    return [line.split() for line in runs.read_text().splitlines()]


def test_skip_never_lets_two_runs_of_one_schedule_overlap(store_url: str, tmp_path: Path) -> None:
    with Headgate(store_url, config=RuntimeConfig(min_interval_ms=100)) as hg:
        hg.schedules.put("slow", spec="@every:200", kind="work", overlap="skip")
    notes = _run_hosts(store_url, tmp_path, "skip", 4.0)
    starts = {int(n[1]): float(n[2]) for n in notes if n[0] == "start"}
    ends = {int(n[1]): float(n[2]) for n in notes if n[0] == "end"}
    runs = sorted((starts[tick], ends.get(tick, float("inf"))) for tick in starts)
    assert len(runs) >= 4, notes
    for (_, ended), (started, _) in itertools.pairwise(runs):
        assert started >= ended, f"two runs overlapped: {runs}"
    with Headgate(store_url) as hg:
        reasons = {e.reason for e in hg.schedules.enqueue_events("slow", limit=100).events}
    assert "overlap" in reasons, "ticks came due while a run was under way, and were skipped"


def test_cancel_previous_cancels_exactly_the_previous_run(store_url: str, tmp_path: Path) -> None:
    with Headgate(store_url, config=RuntimeConfig(min_interval_ms=100)) as hg:
        hg.schedules.put("latest", spec="@every:700", kind="work", overlap="cancel_previous")
    notes = _run_hosts(store_url, tmp_path, "cancel_previous", 4.0)
    with Headgate(store_url) as hg:
        jobs = sorted(
            hg.jobs.list(schedule_id="latest", limit=100).jobs,
            key=lambda job: job.periodic_origin.tick_ms if job.periodic_origin else 0,
        )
        events = hg.schedules.enqueue_events("latest", limit=100).events
    assert len(jobs) >= 4, notes
    assert {e.outcome for e in events} == {"enqueued"}, "no tick is skipped: each replaces"
    *earlier, last = jobs
    assert {job.state for job in earlier} == {"cancelled"}
    assert last.state != "cancelled", "the newest run is not cancelled"
    told = {int(n[1]) for n in notes if n[0] == "told"}
    started = {int(n[1]) for n in notes if n[0] == "start"}
    earlier_ticks = {job.periodic_origin.tick_ms for job in earlier if job.periodic_origin}
    assert told & earlier_ticks == started & earlier_ticks, "every cancelled run was told"
