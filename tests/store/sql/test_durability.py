"""An acknowledged append survives the writer being killed, on both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock

pytestmark = pytest.mark.processes

WRITER = textwrap.dedent(
    """
    import sys
    from headgate._clock import SystemClock
    from headgate._store.port import NO_STREAM
    from headgate._store.sql.store import SqlStore
    from headgate._domain.events import ScheduleDeleted
    store = SqlStore(sys.argv[1], SystemClock())
    n = 0
    while True:
        n += 1
        store.log.append(f"schedule-{n}", NO_STREAM, [ScheduleDeleted(str(n))])
        print(n, flush=True)
    """
)


def test_acknowledged_appends_survive_sigkill(store_url: str) -> None:
    SqlStore(store_url, FakeClock()).close()  # schema first, so the child only appends
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, store_url], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    acknowledged = 0
    for line in child.stdout:
        acknowledged = int(line)
        if acknowledged >= 50:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    store = SqlStore(store_url, FakeClock())
    try:
        streams = {entry.stream_id for entry in store.log.read_all(0, 10_000)}
        assert {f"schedule-{n}" for n in range(1, acknowledged + 1)} <= streams
        assert [e.position for e in store.log.read_all(0, 10_000)] == list(
            range(1, store.log.head() + 1)
        )
    finally:
        store.close()
