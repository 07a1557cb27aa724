"""A logout ends the session in every process on the store, and after a restart.

Replicas share the session secret (`HEADGATE_SESSION_SECRET`), so each accepts
the others' sessions; a logout through one is kept in the store, where the
others, and a process started later, read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from headgate import Headgate, StoreUnavailable
from headgate._operator import operator_of
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL

TOKEN = "replica-s3cret"
SECRET = "shared-by-the-replicas"
HOUR = 3_600_000


@pytest.fixture
def replicas(store_url: str, clock: FakeClock) -> Iterator[list[Headgate]]:
    """Two Headgates on one store, as two processes would open it."""
    opened = [Headgate(store_url, clock=clock), Headgate(store_url, clock=clock)]
    yield opened
    for headgate in opened:
        headgate.close()


def _app(hg: Headgate) -> FastAPI:
    return create_app(hg, api_token=TOKEN, session_secret=SECRET)


def _status(app: FastAPI, value: str, path: str = "/api/v1/periodic") -> int:
    with TestClient(app, base_url=LOCAL, cookies={"headgate_session": value}) as client:
        return client.get(path).status_code


def _log_in(client: TestClient) -> str:
    response = client.post("/login", json={"token": TOKEN}, headers={"Origin": LOCAL})
    assert response.status_code == 200, response.text
    return client.cookies["headgate_session"]


def _log_out(client: TestClient) -> None:
    page = client.get("/").text
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found is not None
    response = client.post("/logout", headers={"Origin": LOCAL, "X-CSRF-Token": found.group(1)})
    assert response.status_code == 200 and response.json()["logged_out"] is True


def test_a_logout_through_one_replica_ends_the_session_in_the_other_and_after_a_restart(
    replicas: list[Headgate], store_url: str, clock: FakeClock
) -> None:
    first, second = (_app(hg) for hg in replicas)
    with TestClient(first, base_url=LOCAL) as client:
        value = _log_in(client)
        assert _status(second, value) == 200, "the other replica shares the session"
        _log_out(client)
    assert _status(first, value) == 401
    assert _status(second, value) == 401, "the other replica heard of the logout"
    assert _status(second, value, "/") == 401
    with Headgate(store_url, clock=clock) as restarted:
        assert _status(_app(restarted), value) == 401, "a restart keeps the logout"
        with TestClient(_app(restarted), base_url=LOCAL) as client:
            assert _status(_app(restarted), _log_in(client)) == 200, "a new login works"


def test_the_logout_is_kept_until_the_session_would_have_expired(
    replicas: list[Headgate], clock: FakeClock
) -> None:
    first, second = (_app(hg) for hg in replicas)
    with TestClient(first, base_url=LOCAL) as client:
        value = _log_in(client)
        _log_out(client)
    clock.advance(12 * HOUR)
    assert _status(second, value) == 401, "expired by then anyway"


def test_a_store_that_cannot_say_authorises_no_cookie(
    replicas: list[Headgate], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: a session whose logout cannot be looked up is none (logged),
    and a logout the store cannot record says so, never "logged out"."""
    hg = replicas[0]
    app = _app(hg)
    with TestClient(app, base_url=LOCAL) as client:
        value = _log_in(client)

        def unavailable(*_: object) -> bool:
            raise StoreUnavailable("reading a session's logout: store unavailable: locked")

        monkeypatch.setattr(operator_of(hg), "session_revoked", unavailable)
        with capture_logs() as logs:
            assert _status(app, value) == 401
        assert any("could not be checked" in line["event"] for line in logs)
        monkeypatch.undo()
        assert _status(app, value) == 200
        monkeypatch.setattr(operator_of(hg), "revoke_session", unavailable)
        page = client.get("/").text
        found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert found is not None
        response = client.post("/logout", headers={"Origin": LOCAL, "X-CSRF-Token": found.group(1)})
        assert response.status_code == 503
        monkeypatch.undo()
        assert _status(app, value) == 200, "still logged in: the logout did not hold"
