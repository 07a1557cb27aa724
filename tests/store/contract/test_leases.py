"""The lease contract: one holder at a time, terms that fence, expiry in store time."""

from __future__ import annotations

import threading

import pytest

from headgate._errors import LeaseLost, StoreClosed
from headgate._store.port import NO_STREAM, Fence, LeaseHolder, Store
from headgate.testing import FakeClock
from tests.store.builders import defined
from tests.store.contract.conftest import StoreFactory

TTL = 1_000
A = LeaseHolder("a", "host-a", 1)
B = LeaseHolder("b", "host-b", 2)


def test_a_free_lease_is_taken_at_term_1_and_renewed_at_the_same_term(
    store: Store, clock: FakeClock
) -> None:
    taken = store.leases.acquire("duty", A, TTL)
    assert taken is not None and (taken.holder, taken.term) == ("a", 1)
    assert taken.expires_at_ms == clock.now_ms() + TTL
    clock.advance(TTL // 2)
    renewed = store.leases.acquire("duty", A, TTL, current_term=1)
    assert renewed is not None and renewed.term == 1
    assert renewed.acquired_at_ms == taken.acquired_at_ms
    assert renewed.expires_at_ms == clock.now_ms() + TTL


def test_a_live_lease_is_refused_to_anyone_else(store: Store, clock: FakeClock) -> None:
    assert store.leases.acquire("duty", A, TTL) is not None
    clock.advance(TTL - 1)
    assert store.leases.acquire("duty", B, TTL) is None
    assert store.leases.acquire("duty", B, TTL, current_term=1) is None
    status = store.leases.status("duty")
    assert status is not None and status.holder == "a"


def test_an_expired_lease_is_taken_over_at_the_next_term(store: Store, clock: FakeClock) -> None:
    store.leases.acquire("duty", A, TTL)
    clock.advance(TTL)
    taken = store.leases.acquire("duty", B, TTL)
    assert taken is not None and (taken.holder, taken.term) == ("b", 2)
    # The old holder cannot renew its old term, nor take the live lease back.
    assert store.leases.acquire("duty", A, TTL, current_term=1) is None


def test_a_holder_whose_lease_expired_renews_only_by_taking_it_anew(
    store: Store, clock: FakeClock
) -> None:
    store.leases.acquire("duty", A, TTL)
    clock.advance(TTL + 1)
    again = store.leases.acquire("duty", A, TTL, current_term=1)
    assert again is not None and again.term == 2  # a takeover, so writes at term 1 stop


@pytest.mark.parametrize("current_term", [None, 7], ids=["no term", "a wrong term"])
def test_a_holder_that_lost_track_of_its_live_term_takes_the_lease_again_under_the_next(
    store: Store, clock: FakeClock, current_term: int | None
) -> None:
    """Its own, live lease: taken again at once (not after its expiry), and the
    term it lost track of writes nothing more."""
    held = store.leases.acquire("duty", A, TTL)
    assert held is not None
    clock.advance(TTL // 2)
    again = store.leases.acquire("duty", A, TTL, current_term=current_term)
    assert again is not None and again.term == held.term + 1
    assert (again.acquired_at_ms, again.expires_at_ms) == (clock.now_ms(), clock.now_ms() + TTL)
    with pytest.raises(LeaseLost):
        store.log.append("schedule-a", NO_STREAM, [defined("a")], fence=Fence("duty", held.term))
    store.log.append("schedule-a", NO_STREAM, [defined("a")], fence=Fence("duty", again.term))
    assert store.leases.acquire("duty", B, TTL) is None, "still nobody else's"


def test_release_frees_the_lease_at_once_but_only_for_its_own_term(
    store: Store, clock: FakeClock
) -> None:
    store.leases.acquire("duty", A, TTL)
    store.leases.release("duty", "b", 1)  # not b's: nothing happens
    assert store.leases.acquire("duty", B, TTL) is None
    store.leases.release("duty", "a", 1)
    taken = store.leases.acquire("duty", B, TTL)
    assert taken is not None and taken.term == 2


def test_leases_are_independent_by_name(store: Store) -> None:
    assert store.leases.acquire("one", A, TTL) is not None
    assert store.leases.acquire("two", B, TTL) is not None
    assert store.leases.status("three") is None


def test_racing_claimants_get_one_holder(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    won: list[str] = []

    def claim(index: int, store: Store) -> None:
        barrier.wait()
        if store.leases.acquire("duty", LeaseHolder(f"c{index}", "h", index), TTL) is not None:
            won.append(f"c{index}")

    threads = [threading.Thread(target=claim, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(won) == 1


@pytest.mark.parametrize("taken_over", [True, False])
def test_a_fenced_write_needs_the_lease_live_at_its_term(
    store: Store, clock: FakeClock, taken_over: bool
) -> None:
    lease = store.leases.acquire("duty", A, TTL)
    assert lease is not None
    store.log.append("schedule-a", NO_STREAM, [defined("a")], fence=Fence("duty", lease.term))
    clock.advance(TTL)  # expired: refused whether or not anyone took it since
    if taken_over:
        assert store.leases.acquire("duty", B, TTL) is not None
    with pytest.raises(LeaseLost):
        store.log.append("schedule-b", NO_STREAM, [defined("b")], fence=Fence("duty", lease.term))
    with pytest.raises(LeaseLost):
        store.log.append("schedule-c", NO_STREAM, [defined("c")], fence=Fence("never", 1))
    assert store.log.stream_version("schedule-b") == 0
    assert store.log.head() == 1


def test_a_closed_store_refuses_writes(store: Store) -> None:
    store.close()
    with pytest.raises(StoreClosed):
        store.log.append("schedule-a", NO_STREAM, [defined("a")])
    with pytest.raises(StoreClosed):
        store.leases.acquire("duty", A, TTL)
