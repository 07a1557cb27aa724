"""Three runtimes sharing one store, on the real clock: one scheduler at a time,
failover after SIGKILL, a SIGSTOPped holder fenced out, and every tick fired once."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from headgate import Headgate, RuntimeConfig
from headgate._domain.streams import schedule_stream
from headgate._runtime.duties import MAINTENANCE_LEASE
from headgate._store.port import LeaseHolder
from headgate._store.sql.backends.postgresql import IDLE_IN_TRANSACTION_MS

pytestmark = pytest.mark.processes

TTL_MS = 1_500
INTERVAL_MS = 200
CONFIG = RuntimeConfig(lease_ttl_ms=TTL_MS, min_interval_ms=INTERVAL_MS)
TAKEOVER_LIMIT_S = (TTL_MS + CONFIG.renew_every_ms) / 1000 + 0.5  # TTL + one renewal + slack
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from headgate import Headgate, RuntimeConfig
    from headgate._logs import configure_logging
    configure_logging(json_lines=True)
    hg = Headgate(sys.argv[1], config=RuntimeConfig(lease_ttl_ms=int(sys.argv[2])))
    def stop(*_):
        hg.close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    hg.start()
    print("started", flush=True)
    while True:
        time.sleep(0.5)
    """
)


def _log(output: Path) -> list[dict[str, Any]]:
    lines = output.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _at(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["timestamp"]).timestamp()


def _wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_three_runtimes_one_scheduler_failover_and_fencing(store_url: str, tmp_path: Path) -> None:
    observer = Headgate(store_url, config=CONFIG)
    observer.schedules.put(
        "pulse", spec=f"@every:{INTERVAL_MS}", kind="k", on_missed="backfill", backfill_max=1000
    )
    outputs = [tmp_path / f"runtime{n}.log" for n in range(3)]
    children = {}
    try:
        for output in outputs:
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, store_url, str(TTL_MS)],
                stdout=output.open("w"),
                stderr=subprocess.STDOUT,
            )
            children[child.pid] = (child, output)

        def holder_pid() -> int | None:
            status = observer.runtime.lease()
            return status.pid if status is not None and status.pid in children else None

        first = _wait_for(holder_pid, 30, "a first scheduler")
        time.sleep(1.5)
        acquired = {
            pid: sum(e["event"].startswith("lease acquired") for e in _log(output))
            for pid, (_, output) in children.items()
        }
        assert [pid for pid, count in acquired.items() if count] == [first], "exactly one scheduler"

        os.kill(first, signal.SIGKILL)
        killed_at = time.monotonic()
        second = _wait_for(
            lambda: holder_pid() not in (None, first) and holder_pid(), 10, "a takeover"
        )
        assert time.monotonic() - killed_at <= TAKEOVER_LIMIT_S

        time.sleep(1.0)
        stale = second
        if observer._core.store.backend.name == "postgresql":
            # A process frozen inside a transaction keeps its row locks until the
            # server ends its session (idle_in_transaction_session_timeout), so
            # the takeover may take that long. SQLite has no such timeout (a
            # frozen writer stalls the file until it resumes), so this part of
            # the scenario runs on PostgreSQL, the multi-host engine.
            os.kill(second, signal.SIGSTOP)
            third = _wait_for(
                lambda: holder_pid() not in (None, second) and holder_pid(),
                IDLE_IN_TRANSACTION_MS / 1000 + TAKEOVER_LIMIT_S + 2,
                "a takeover from the stopped holder",
            )
            assert third != first
            time.sleep(1.0)
            resumed_at = time.time()
            os.kill(second, signal.SIGCONT)  # wakes believing it still leads
            time.sleep(2.0)
            assert holder_pid() == third, "the resumed process did not take the lease back"

        for pid, (child, _) in children.items():
            if pid != first:
                child.send_signal(signal.SIGTERM)
        for pid, (child, _) in children.items():
            child.wait(timeout=30)
            assert pid == first or child.returncode == 0
        assert observer.runtime.lease() is None, "a clean stop releases the lease"

        with observer._core.store.engine.connect() as connection:
            ticks = [
                int(t)
                for (t,) in connection.execute(
                    text(
                        "SELECT periodic_tick_ms FROM headgate_jobs WHERE periodic_schedule_id = 'pulse' ORDER BY 1"
                    )
                )
            ]
        assert len(ticks) >= 20
        expected = list(range(ticks[0], ticks[-1] + INTERVAL_MS, INTERVAL_MS))
        assert ticks == expected, "every tick from first to last has exactly one job"
        records = Counter(
            e.event.tick_ms  # type: ignore[attr-defined]
            for e in observer._core.store.log.read_all(0, 1_000_000)
            if e.type == "EnqueueAttempted" and e.event.outcome == "enqueued"  # type: ignore[attr-defined]
        )
        assert sorted(records) == ticks and set(records.values()) == {1}, (
            "each tick has exactly one audit record"
        )
        logs = {pid: _log(output) for pid, (_, output) in children.items()}
        fired = [e for entries in logs.values() for e in entries if e["event"] == "enqueue attempt"]
        assert len(fired) >= 20, "the runtimes' JSON logs show their ticks"
        for pid, entries in logs.items():
            if not any(e["event"].startswith("lease acquired") for e in entries):
                assert not [e for e in entries if e["event"] == "enqueue attempt"], (
                    f"process {pid} never held the lease, yet fired ticks"
                )
        if observer._core.store.backend.name == "postgresql":
            after_resume = [
                e for e in logs[stale] if e["event"] == "enqueue attempt" and _at(e) > resumed_at
            ]
            assert not after_resume, "the resumed holder wrote under its stale term"
            assert any(e["event"].startswith(("lease lost", "no longer held")) for e in logs[stale])
    finally:
        for child, _ in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGCONT)
                child.kill()
                child.wait(timeout=10)
        observer.close()


COMPACTING_CHILD = textwrap.dedent(
    """
    import contextlib, os, signal, sys, threading, time
    from headgate import Headgate, RuntimeConfig, WorkerConfig
    from headgate._logs import configure_logging
    configure_logging(json_lines=True)
    hg = Headgate(
        sys.argv[1],
        config=RuntimeConfig(lease_ttl_ms=int(sys.argv[2]), compaction_interval_ms=200),
    )

    @hg.handler("noop")
    def noop(job):
        pass
    store, real_write = hg._core.store, hg._core.store.log.write
    compaction_writes = 0
    continued = threading.Event()
    signal.signal(signal.SIGCONT, lambda *_: continued.set())

    @contextlib.contextmanager
    def write(fence=None, **options):
        # Freeze this whole process between the compaction's first transaction
        # and its second, as a pause of the host would (GC, a VM migration, a
        # SIGSTOP). Holding the process's write lock until SIGCONT makes sure
        # no other thread of it is inside a write when it stops (the stop may
        # reach the process a moment after kill() returns).
        global compaction_writes
        if threading.current_thread().name == "headgate-compaction":
            compaction_writes += 1
            if compaction_writes == 2:
                with store.database._write_lock.held():
                    print(f"pausing at term {fence.term}", flush=True)
                    os.kill(os.getpid(), signal.SIGSTOP)
                    continued.wait()
                print("resumed", flush=True)
        with real_write(fence, **options) as transaction:
            yield transaction

    store.log.write = write
    def stop(*_):
        hg.close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    # The maintenance lease lasts three rescue intervals: the TTL given.
    hg.start(workers=WorkerConfig(rescue_interval_ms=int(sys.argv[2]) // 3))
    while True:
        time.sleep(0.5)
    """
)


def _process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def test_a_holder_frozen_mid_compaction_past_its_lease_compacts_nothing_more(
    store_url: str, tmp_path: Path
) -> None:
    """The compaction is a duty of the maintenance lease: a holder frozen between
    two of its transactions, past its lease's expiry, while another process takes
    the lease, resumes and writes nothing more (its next transaction is fenced out)."""
    observer = Headgate(store_url, config=CONFIG)
    streams = 60  # more than one compaction transaction's worth (50)
    for n in range(streams):
        # Quarantined, released, quarantined again: compaction keeps the newest
        # event of each type, so the first quarantine goes.
        fingerprint = observer.quarantine.fingerprint("k", n)
        observer.quarantine.add(fingerprint, "crashed")
        observer.quarantine.release(fingerprint)
        observer.quarantine.add(fingerprint, "crashed again")
    store = observer._core.store

    def counts() -> tuple[int, int]:
        with store.engine.connect() as connection:
            events = connection.execute(text("SELECT count(*) FROM headgate_events")).scalar_one()
            examined = connection.execute(
                text("SELECT position FROM headgate_compaction_state")
            ).scalar_one()
        return int(events), int(examined)

    assert counts() == (3 * streams, 0)
    output = tmp_path / "holder.log"
    child = subprocess.Popen(
        [sys.executable, "-c", COMPACTING_CHILD, store_url, str(TTL_MS)],
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        _wait_for(lambda: "pausing at term" in output.read_text(), 30, "the first compaction")
        _wait_for(lambda: _process_state(child.pid) == "T", 5, "the holder to stop")
        frozen = counts()
        assert frozen == (3 * streams - 50, 0), "the first transaction committed, no more"
        held = store.leases.status(MAINTENANCE_LEASE)
        assert held is not None and held.pid == child.pid
        _wait_for(
            lambda: observer.clock.now_ms() > held.expires_at_ms + 50, 10, "the lease to expire"
        )
        taken = store.leases.acquire(
            MAINTENANCE_LEASE, LeaseHolder("observer", "test", os.getpid()), 60_000
        )
        assert taken is not None and taken.term == held.term + 1
        os.kill(child.pid, signal.SIGCONT)  # wakes mid-compaction, believing it holds the lease
        _wait_for(lambda: "compaction stopped" in output.read_text(), 10, "the compaction to stop")
        time.sleep(0.5)
        assert counts() == frozen, "the resumed holder's compaction wrote nothing more"
        stopped = [e for e in _log(output) if e["event"].startswith("lease lost; compaction")]
        assert [e["term"] for e in stopped] == [held.term]
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
        status = store.leases.status(MAINTENANCE_LEASE)
        assert status is not None and status.holder == "observer"
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
            child.wait(timeout=10)
        observer.close()


FROZEN_TTL_MS = 3_000
FROZEN_RENEW_MS = RuntimeConfig(lease_ttl_ms=FROZEN_TTL_MS).renew_every_ms
RESUME_LIMIT_S = 2 * FROZEN_RENEW_MS / 1000
"""Ticks resume within about one renewal interval of waking (a renewal is due at
once, and the re-sweep follows it), never a whole TTL later."""
FREEZING_CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from headgate import Headgate, RuntimeConfig
    from headgate._logs import configure_logging
    from headgate._runtime.instants import InstantTiming
    configure_logging(json_lines=True)
    hg = Headgate(sys.argv[1], config=RuntimeConfig(lease_ttl_ms=int(sys.argv[2])))
    continued = threading.Event()
    signal.signal(signal.SIGCONT, lambda *_: continued.set())
    real_wait_to_open, opened = InstantTiming.wait_to_open, 0

    def wait_to_open(self, instant_ms, units):
        # Freeze this whole process while a batch waits for its instant, as a
        # pause of the host would (GC, a VM stall), on the fifth such batch.
        global opened
        opened += 1
        if opened == 5:
            print(f"pausing before instant {instant_ms}", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
            continued.wait()
            print("resumed", flush=True)
        real_wait_to_open(self, instant_ms, units)

    InstantTiming.wait_to_open = wait_to_open
    def stop(*_):
        hg.close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    hg.start()
    while True:
        time.sleep(0.5)
    """
)


def _pulse_ticks(observer: Headgate) -> list[int]:
    with observer._core.store.engine.connect() as connection:
        return [
            int(t)
            for (t,) in connection.execute(
                text(
                    "SELECT periodic_tick_ms FROM headgate_jobs "
                    "WHERE periodic_schedule_id = 'pulse' ORDER BY 1"
                )
            )
        ]


def test_a_holder_frozen_past_its_lease_while_a_batch_waits_fires_again_at_once(
    store_url: str, tmp_path: Path
) -> None:
    """SIGSTOPped while a batch waits for its instant, past the lease's expiry, the
    holder wakes, takes the lease again under a new term, and its ticks resume
    within a renewal interval: the batch's loss of the old term does not cost the
    new one its ticks (it did, until that new term expired in turn)."""
    observer = Headgate(
        store_url, config=RuntimeConfig(lease_ttl_ms=FROZEN_TTL_MS, min_interval_ms=INTERVAL_MS)
    )
    observer.schedules.put("pulse", spec=f"@every:{INTERVAL_MS}", kind="k", on_missed="skip")
    output = tmp_path / "holder.log"
    child = subprocess.Popen(
        [sys.executable, "-c", FREEZING_CHILD, store_url, str(FROZEN_TTL_MS)],
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        _wait_for(lambda: "pausing before instant" in output.read_text(), 30, "a batch to wait")
        _wait_for(lambda: _process_state(child.pid) == "T", 5, "the holder to stop")
        held = observer.runtime.lease()
        assert held is not None and held.pid == child.pid
        before = _pulse_ticks(observer)
        assert before, "the holder fired ticks before it froze"
        _wait_for(
            lambda: observer.clock.now_ms() > held.expires_at_ms + FROZEN_RENEW_MS,
            2 * FROZEN_TTL_MS / 1000,
            "the lease to expire",
        )
        resumed_ms = observer.clock.now_ms()
        os.kill(child.pid, signal.SIGCONT)
        resumed = time.monotonic()
        _wait_for(
            lambda: _pulse_ticks(observer)[-1] >= resumed_ms - INTERVAL_MS,
            FROZEN_TTL_MS / 1000 + 2,
            "a tick after the holder woke",
        )
        took_s = time.monotonic() - resumed
        assert took_s <= RESUME_LIMIT_S, f"ticks resumed {took_s:.2f} s after the holder woke"
        time.sleep(1.0)
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
        assert child.returncode == 0, output.read_text()

        ticks = _pulse_ticks(observer)
        assert ticks[: len(before)] == before
        assert len([tick for tick in ticks if tick >= resumed_ms]) >= 3, "ticks went on firing"
        attempts = [
            (e.event.tick_ms, e.event.next_run_ms)  # type: ignore[attr-defined]
            for e in observer._core.store.log.read_stream(schedule_stream("pulse"))
            if e.type == "EnqueueAttempted"
        ]
        assert [tick for tick, _ in attempts] == ticks, "one job and one record per tick"
        for (tick, next_run), (later, _) in itertools.pairwise(attempts):
            assert tick < next_run <= later, f"advanced from {tick} to {next_run}, then {later}"
        entries = _log(output)
        retaken = [
            (e["old_term"], e["new_term"])
            for e in entries
            if e["event"].startswith("lease acquired again") and e["new_term"] > held.term
        ]
        assert retaken == [(held.term, held.term + 1)], "taken again once, on waking"
        lost = [e["term"] for e in entries if e["event"].startswith("lease lost; batch")]
        assert lost[-1:] == [held.term], "the waiting batch was refused under its old term"
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
            child.wait(timeout=10)
        observer.close()
