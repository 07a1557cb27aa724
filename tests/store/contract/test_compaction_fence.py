"""Compaction is a duty of the scheduler lease: run with the lease's fence, each of
its transactions checks the term, so a holder whose lease moved on or expired
deletes nothing. Without a fence it is an operator's run and needs no lease."""

from __future__ import annotations

import pytest

from headgate._domain.streams import schedule_stream
from headgate._errors import LeaseLost
from headgate._store.port import NO_STREAM, Claimant, Fence, Store
from headgate.testing import FakeClock
from tests.store.builders import defined

TTL = 1_000
HOLDER = Claimant("holder", "host-a", 1)
NEXT = Claimant("next", "host-b", 2)


def _redefined_schedules(store: Store, count: int = 3) -> None:
    """Schedules defined twice: compaction trims each to its latest definition."""
    for n in range(count):
        stream = schedule_stream(f"s{n}")
        store.log.append(stream, NO_STREAM, [defined(f"s{n}")])
        store.log.append(stream, 1, [defined(f"s{n}", payload={"team": 8})])


def _event_count(store: Store) -> int:
    return len(store.log.read_all(0, 10_000))


def test_a_fenced_run_under_a_lease_taken_over_writes_nothing(
    store: Store, clock: FakeClock
) -> None:
    held = store.leases.acquire("scheduler", HOLDER, TTL)
    assert held is not None
    _redefined_schedules(store)
    before = _event_count(store)
    clock.advance(TTL)
    taken = store.leases.acquire("scheduler", NEXT, TTL)
    assert taken is not None and taken.term == held.term + 1
    with pytest.raises(LeaseLost, match="lease 'scheduler' is no longer held at term 1"):
        store.compact(fence=Fence("scheduler", held.term))
    assert _event_count(store) == before
    report = store.compact(fence=Fence("scheduler", taken.term))  # the new holder's run
    assert (report.streams_examined, report.events_deleted) == (3, 3)


def test_a_fenced_run_past_the_leases_expiry_writes_nothing(store: Store, clock: FakeClock) -> None:
    """Nobody took the lease over, but it expired: the paused holder may no longer
    act on it (a takeover could commit at any moment)."""
    held = store.leases.acquire("scheduler", HOLDER, TTL)
    assert held is not None
    _redefined_schedules(store)
    before = _event_count(store)
    clock.advance(TTL)
    with pytest.raises(LeaseLost):
        store.compact(fence=Fence("scheduler", held.term))
    assert _event_count(store) == before


def test_an_operators_run_needs_no_lease(store: Store, clock: FakeClock) -> None:
    _redefined_schedules(store)
    assert store.leases.acquire("scheduler", HOLDER, TTL) is not None  # held by someone else
    report = store.compact()
    assert (report.streams_examined, report.events_deleted) == (3, 3)
    assert _event_count(store) == 3
