"""Ended login sessions: a logout recorded through one handle is seen by every
other (another process, a restart), until the session would have expired, and
expired ones are forgotten."""

from __future__ import annotations

import pytest

from headgate._errors import StoreClosed
from headgate._store.port import MAX_SESSION_ID_LENGTH
from headgate.testing import FakeClock
from tests.store.contract.conftest import StoreFactory

HOUR = 3_600_000


def test_a_revocation_holds_in_every_handle_until_the_session_expires(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one, other = make_store(), make_store()
    until = clock.now_ms() + HOUR
    assert not other.sessions.is_revoked("nonce-a")
    one.sessions.revoke("nonce-a", until)
    one.sessions.revoke("nonce-a", until)  # again: nothing changes
    assert other.sessions.is_revoked("nonce-a") and one.sessions.is_revoked("nonce-a")
    assert not other.sessions.is_revoked("nonce-b")
    restarted = make_store()
    assert restarted.sessions.is_revoked("nonce-a"), "a restart keeps it"
    clock.advance(HOUR)
    assert not restarted.sessions.is_revoked("nonce-a"), "expired: the cookie is refused anyway"


def test_expired_revocations_are_forgotten_at_the_next_logout(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    """The table holds the logouts of one session lifetime at most: a handle whose
    clock is behind (it would still honour the old entry) no longer finds it."""
    started = clock.now_ms()
    store, behind = make_store(), make_store(FakeClock(started))
    store.sessions.revoke("old", started + 1_000)
    assert behind.sessions.is_revoked("old")
    clock.advance(1_000)
    store.sessions.revoke("new", clock.now_ms() + HOUR)
    assert behind.sessions.is_revoked("new")
    assert not behind.sessions.is_revoked("old"), "forgotten once expired"


@pytest.mark.parametrize("session_id", ["", "x" * (MAX_SESSION_ID_LENGTH + 1), "é", "a\x00", "a.b"])
def test_an_id_no_session_can_have_is_never_revoked_and_cannot_be(
    make_store: StoreFactory, session_id: str
) -> None:
    store = make_store()
    assert not store.sessions.is_revoked(session_id)
    with pytest.raises(ValueError, match="session_id"):
        store.sessions.revoke(session_id, 1)


def test_a_closed_store_records_no_logout(make_store: StoreFactory, clock: FakeClock) -> None:
    store = make_store()
    store.close()
    with pytest.raises(StoreClosed):
        store.sessions.revoke("nonce", clock.now_ms() + HOUR)
