"""The duty keeper under faults, with a fake clock (milliseconds).

Every background duty is run by one keeper per runtime, holding the
maintenance lease by the scheduler's rule: a keeper stalled past its TTL has
its duty's write refused and another takes over; two keepers never run a duty
at once; a renewal too late to trust gives the term up; a duty that raises is
logged and runs again at its next interval.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from structlog.testing import capture_logs

from headgate import Headgate
from headgate._errors import LeaseLost
from headgate._runtime.duties import MAINTENANCE_LEASE, Duty, DutyKeeper
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.maintenance import Compaction
from headgate._store.port import CompactionReport, Fence, Lease, Store
from headgate.testing import FakeClock
from tests.faults import FaultyStore
from tests.runtime.conftest import FaultyHeadgate

TTL_MS = 3_000
INTERVAL_MS = 1_000


def _wait_for(condition: Callable[[], Any], what: str, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)
    return value


def _advance_until(clock: FakeClock, condition: Callable[[], bool]) -> None:
    """Move the clock on an interval at a time until `condition` holds."""
    for _ in range(20):
        clock.advance(INTERVAL_MS)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.005)
    raise AssertionError("the condition never held")


def _keeper(store: Store, clock: FakeClock, *duties: Duty) -> DutyKeeper:
    return DutyKeeper(store, clock, worker_identity(), duties, lease_ttl_ms=TTL_MS)


def _lease(store: Store) -> Lease:
    lease = store.leases.status(MAINTENANCE_LEASE)
    assert lease is not None
    return lease


@dataclass
class Recorded(Duty):
    """A fenced duty that records each run: who ran it, under which term, and
    whether another run was going on meanwhile."""

    name: ClassVar[str] = "recorded"
    fenced: ClassVar[bool] = True
    runs: list[tuple[str, int]] = field(default_factory=list)
    overlapped: list[str] = field(default_factory=list)
    who: str = ""
    shared: threading.Lock = field(default_factory=threading.Lock)

    @property
    def interval_ms(self) -> int:
        return INTERVAL_MS

    def run(self, now_ms: int, fence: Fence | None) -> None:
        assert fence is not None
        if not self.shared.acquire(blocking=False):
            self.overlapped.append(self.who)
            return
        try:
            self.runs.append((self.who, fence.term))
            time.sleep(0.002)
        finally:
            self.shared.release()


def test_a_keeper_stalled_past_its_ttl_writes_nothing_more_and_another_takes_over(
    make_faulty: Callable[..., FaultyHeadgate], clock: FakeClock
) -> None:
    """Compaction's transactions carry the fence: a keeper that stalls mid-run
    past the lease's TTL has its next write refused (LeaseLost, logged with its
    term) once another keeper took the lease, and runs nothing more."""
    hg, faults = make_faulty()
    store = hg._core.store
    held, release = threading.Event(), threading.Event()
    runs: list[CompactionReport | Exception] = []

    def stalled(run: Callable[[], CompactionReport], _: threading.Event | None) -> CompactionReport:
        if not held.is_set():
            held.set()
            assert release.wait(30), "the test never released the stalled compaction"
        try:
            runs.append(run())
        except Exception as error:
            runs.append(error)
            raise
        report = runs[-1]
        assert isinstance(report, CompactionReport)
        return report

    faults.around_compaction = stalled
    stalled_keeper = _keeper(store, clock, Compaction(store, INTERVAL_MS))
    other = _keeper(store, clock, Compaction(store, INTERVAL_MS))
    assert stalled_keeper.run_due() == []  # the lease taken; compaction first due an interval on
    old = _lease(store).term
    clock.advance(INTERVAL_MS)
    with capture_logs() as logs:
        running = threading.Thread(target=stalled_keeper.run_due)
        running.start()
        assert held.wait(10)
        clock.advance(TTL_MS + 1)  # stalled past the TTL: the lease lapses
        assert other.run_due() == [], "the other keeper takes the lease"
        assert _lease(store).term == old + 1
        clock.advance(INTERVAL_MS)
        assert other.run_due() == ["compaction"]
        release.set()
        running.join(10)
    assert isinstance(runs[0], CompactionReport)  # the other keeper's, under the new term
    assert isinstance(runs[1], LeaseLost), "the stalled keeper's write was refused"
    stopped = [
        e for e in logs if e["event"] == "lease lost; compaction stopped, nothing more written"
    ]
    assert [e["term"] for e in stopped] == [old]
    assert stalled_keeper.lease.lease is None, "the stalled keeper forgot the lost term"
    clock.advance(INTERVAL_MS)
    assert stalled_keeper.run_due() == [], "the lease is the other keeper's now"
    assert _lease(store).term == old + 1
    other.stop()
    stalled_keeper.stop()


def test_two_keepers_run_each_duty_under_one_at_a_time(hg: Headgate, clock: FakeClock) -> None:
    """Two running keepers: the duty runs under one of them, one run at a time,
    each under the term of the keeper that runs it; when that keeper stops, the
    other takes the lease at once and runs it."""
    store = hg._core.store
    first, second = Recorded(who="first"), Recorded(who="second")
    second.shared = first.shared
    runs = first.runs
    second.runs = runs
    second.overlapped = first.overlapped
    keepers = [_keeper(store, clock, first), _keeper(store, clock, second)]
    for keeper in keepers:
        keeper.start()
    try:
        for _ in range(5):
            count = len(runs)
            _advance_until(clock, lambda count=count: len(runs) > count)
        holder = runs[0][0]
        assert {who for who, _ in runs} == {holder}, "only the lease's holder ran it"
        stopping = keepers[0] if holder == "first" else keepers[1]
        stopping.stop()
        _advance_until(clock, lambda: runs[-1][0] != holder)
    finally:
        for keeper in keepers:
            keeper.stop()
    assert first.overlapped == []
    by_term: dict[int, set[str]] = {}
    for who, term in runs:
        by_term.setdefault(term, set()).add(who)
    assert all(len(whos) == 1 for whos in by_term.values()), "each term is one keeper's"


class _SlowLeases:
    """A store's leases whose next claim answers only once the fake clock moved
    past the trust margin of the expiry it grants."""

    def __init__(self, leases: Any, clock: FakeClock) -> None:
        self._leases = leases
        self._clock = clock
        self.slow_next = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._leases, name)

    def acquire(self, *args: Any, **kwargs: Any) -> Lease | None:
        lease: Lease | None = self._leases.acquire(*args, **kwargs)
        if self.slow_next and lease is not None:
            self.slow_next = False
            self._clock.set(lease.expires_at_ms - 1)
        return lease


def test_a_renewal_too_late_to_trust_gives_up_the_term(hg: Headgate, clock: FakeClock) -> None:
    """As the scheduler's: nothing runs under a term whose renewal came back too
    late; a new term is taken at once, not once the old expires."""
    store = FaultyStore(hg._core.store)
    slow = _SlowLeases(store.leases, clock)
    store.leases = slow  # type: ignore[assignment]
    duty = Recorded(who="keeper")
    keeper = _keeper(store, clock, duty)
    assert keeper.run_due() == []  # taken; first due an interval on
    clock.advance(INTERVAL_MS)
    assert keeper.run_due() == ["recorded"]
    term = _lease(store).term
    slow.slow_next = True
    clock.advance(INTERVAL_MS)  # a renewal is due (and the duty), and the renewal comes back late
    with capture_logs() as logs:
        assert keeper.run_due() == ["recorded"], "run under a new term, taken at once"
    late = [
        e for e in logs if e["event"].startswith("maintenance lease renewal came back too late")
    ]
    assert [(e["term"], e["lease"]) for e in late] == [(term, MAINTENANCE_LEASE)]
    assert _lease(store).term == term + 1
    retaken = [e for e in logs if e["event"].startswith("maintenance lease acquired again")]
    assert [(e["old_term"], e["new_term"]) for e in retaken] == [(term, term + 1)]
    assert duty.runs == [("keeper", term), ("keeper", term + 1)]
    keeper.stop()


@dataclass
class Failing(Duty):
    """An unfenced duty whose first run raises."""

    name: ClassVar[str] = "failing"
    fenced: ClassVar[bool] = False
    runs: list[int] = field(default_factory=list)

    @property
    def interval_ms(self) -> int:
        return INTERVAL_MS

    def first_due_ms(self, now_ms: int) -> int:
        return now_ms

    def run(self, now_ms: int, fence: Fence | None) -> None:
        self.runs.append(now_ms)
        if len(self.runs) == 1:
            raise RuntimeError("the duty broke")


def test_a_duty_that_raises_is_logged_and_runs_again_at_its_next_interval(
    hg: Headgate, clock: FakeClock
) -> None:
    store = hg._core.store
    failing, other = Failing(), Recorded(who="keeper")
    keeper = _keeper(store, clock, failing, other)
    with capture_logs() as logs:
        keeper.start()
        _wait_for(lambda: failing.runs, "the first run")
        _wait_for(
            lambda: [e for e in logs if e["event"].startswith("duty failed")], "the failure logged"
        )
        start = failing.runs[0]
        clock.advance(INTERVAL_MS - 1)
        time.sleep(0.05)
        assert failing.runs == [start], "not retried before its interval"
        clock.advance(1)
        _wait_for(lambda: len(failing.runs) == 2, "the run at the next interval")
        _wait_for(lambda: other.runs, "the other duty, still kept")
    keeper.stop()
    (failed,) = [e for e in logs if e["event"].startswith("duty failed")]
    assert failed["duty"] == "failing"
    assert failed["event"] == "duty failed; it runs again at its next interval"
    assert failing.runs == [start, start + INTERVAL_MS]
