"""Compaction inside a running runtime: it must never hold up ticks or the lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from headgate import FakeClock, Headgate, RuntimeConfig
from headgate.runtime import actors
from headgate.store.compaction import CompactionReport
from tests.runtime.conftest import START_MS, fire, jobs_for

MINUTE = 60_000


def test_ticks_fire_while_a_compaction_runs_and_stop_cuts_it_short(
    make_headgate: Callable[..., Headgate], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()

    def slow_compact(
        store: object, policy: object = None, cancel: threading.Event | None = None
    ) -> CompactionReport:
        started.set()
        assert cancel is not None and cancel.wait(30), "stop() did not cut the run short"
        return CompactionReport(0, 0, 0)

    monkeypatch.setattr(actors, "compact", slow_compact)
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=10 * MINUTE, compaction_interval_ms=MINUTE))
    hg.put_schedule("s", spec="@every:60000", kind="k")
    fire(hg)
    clock.advance(MINUTE)
    fire(hg)  # a compaction is due: it starts, and the tick fires
    assert started.wait(10)
    for _ in range(3):
        clock.advance(MINUTE)
        fire(hg)  # the compaction is still running
    assert jobs_for(hg, "s") == [START_MS + n * MINUTE for n in range(1, 5)]
    began = time.monotonic()
    hg.stop()
    assert time.monotonic() - began < 10
