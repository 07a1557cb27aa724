"""Store time: hosts sharing PostgreSQL agree on one clock, the database server's."""

from __future__ import annotations

import threading
import time

import pytest

from headgate import Headgate, LeaseStatus, RuntimeConfig, StoreClock, SystemClock
from tests.runtime.conftest import jobs_for

SKEW_MS = 3_000
CONFIG = RuntimeConfig(lease_ttl_ms=1_500, min_interval_ms=200)  # a pulse of 200 ms


class HostClock(SystemClock):
    """This host's clock: `shift_ms` off true time, and steppable at any moment
    (an operator, NTP)."""

    def __init__(self, shift_ms: int = 0) -> None:
        self.shift_ms = shift_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.shift_ms

    def sleep_until(self, deadline_ms: int, interrupt: threading.Event) -> None:
        remaining = deadline_ms - self.now_ms()
        if remaining > 0:
            interrupt.wait(remaining / 1000)


def _lease_taken_by(hg: Headgate) -> LeaseStatus:
    deadline = time.monotonic() + 10
    while (status := hg.runtime.lease()) is None:
        assert time.monotonic() < deadline, "the runtime never took the lease"
        time.sleep(0.02)
    return status


@pytest.fixture
def postgres_url(store_url: str) -> str:
    if not store_url.startswith("postgresql"):
        pytest.skip("one SQLite store is one host: its clock is the store's")
    return store_url


def test_a_skewed_host_reads_the_servers_time(postgres_url: str) -> None:
    clock = StoreClock(HostClock(SKEW_MS))
    hg = Headgate(postgres_url, clock=clock, config=CONFIG)
    try:
        assert abs(clock.offset_ms + SKEW_MS) < 500
        assert abs(clock.now_ms() - SystemClock().now_ms()) < 500
    finally:
        hg.close()


def test_a_host_whose_clock_runs_ahead_cannot_take_a_live_lease(postgres_url: str) -> None:
    holder = Headgate(postgres_url, config=CONFIG)
    ahead = Headgate(postgres_url, clock=StoreClock(HostClock(SKEW_MS)), config=CONFIG)
    try:
        holder.start()
        first = _lease_taken_by(holder)
        ahead.start()
        time.sleep(2 * CONFIG.lease_ttl_ms / 1000)
        now = holder.runtime.lease()
        assert now is not None and (now.holder, now.term) == (first.holder, first.term), (
            "the host with a fast clock took the lease from a live holder"
        )
    finally:
        ahead.close()
        holder.close()


def test_a_step_of_the_hosts_clock_does_not_stop_the_scheduler(postgres_url: str) -> None:
    local = HostClock()
    hg = Headgate(postgres_url, clock=StoreClock(local), config=CONFIG)
    try:
        hg.schedules.put("pulse", spec="@every:200", kind="k")
        hg.start()
        time.sleep(1.0)
        for step_ms in (20_000, -60_000):
            local.shift_ms += step_ms
            fired_before = len(jobs_for(hg, "pulse"))
            time.sleep(1.0)
            fired = jobs_for(hg, "pulse")
            assert len(fired) >= fired_before + 3, f"ticks stopped after a {step_ms} ms step"
            assert abs(fired[-1] - SystemClock().now_ms()) < 1_000, "ticks follow the store's time"
    finally:
        hg.close()


def test_a_clock_stepped_back_keeps_the_holder_and_its_term(store_url: str) -> None:
    """On SQLite the step reaches store time at the next renewal; the holder must
    carry on with the corrected time, not drop the lease it just renewed."""
    local = HostClock()
    hg = Headgate(store_url, clock=StoreClock(local), config=CONFIG)
    try:
        hg.start()
        first = _lease_taken_by(hg)
        local.shift_ms -= 10_000
        time.sleep(2 * CONFIG.lease_ttl_ms / 1000)  # past the expiry of the renewal before
        now = hg.runtime.lease()
        assert now is not None and now.term == first.term, "the holder lost its own lease"
    finally:
        hg.close()


def test_a_process_that_never_schedules_still_rereads_the_stores_clock(
    store_url: str,
) -> None:
    """An API-only process (no lease renewals) reads the store's clock in a write
    once its reading is old: SQLite's clock is this host's, PostgreSQL's the server's."""
    local = HostClock()
    clock = StoreClock(local, read_every_s=0.0)
    hg = Headgate(store_url, clock=clock, config=CONFIG)
    try:
        local.shift_ms = 5_000  # this host's clock is stepped
        hg.enqueue("api.job")
        expected_shift = 0 if hg._core.store.backend.name == "postgresql" else 5_000
        assert abs(clock.now_ms() - SystemClock().now_ms() - expected_shift) < 500
    finally:
        hg.close()
