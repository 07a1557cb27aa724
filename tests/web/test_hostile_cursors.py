"""Crafted paging cursors on every paged list, through the API, the console and
the CLI: each is a 422 (exit 2 in the CLI) naming `cursor`, never a 500.

A cursor is opaque base64url JSON; the hostile ones here are what an attacker
builds by decoding one: a time of "²" (a digit to `str.isdigit`, not to `int`),
2**63 (more than a database's integer holds), negative, not base64 at all.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headgate import Headgate, RuntimeConfig
from headgate._domain.cursors import (
    HISTORY_CURSOR,
    JOBS_CURSOR,
    QUARANTINE_CURSOR,
    SCHEDULES_CURSOR,
    encode_cursor,
)
from headgate.cli import main
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL, START_MS

API_ROUTES = [
    ("/api/v1/periodic", SCHEDULES_CURSOR),
    ("/api/v1/periodic/s/enqueue-events", HISTORY_CURSOR),
    ("/api/v1/periodic/s/manual-runs", JOBS_CURSOR),
    ("/api/v1/jobs", JOBS_CURSOR),
    ("/api/v1/quarantine", QUARANTINE_CURSOR),
]
CONSOLE_ROUTES = [
    ("/", SCHEDULES_CURSOR),
    ("/schedules/s", HISTORY_CURSOR),
    ("/jobs", JOBS_CURSOR),
    ("/quarantine", QUARANTINE_CURSOR),
]
CLI_LISTS = [
    (["schedules", "list"], SCHEDULES_CURSOR),
    (["jobs", "list"], JOBS_CURSOR),
    (["quarantine", "list"], QUARANTINE_CURSOR),
]
RULE = "cursor: is not a cursor returned by this list; pass next_cursor back unchanged"


def _crafted(kind: str, position: object) -> str:
    raw = json.dumps([kind, position]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _named(kind: str) -> list[str]:
    """The hostile cursors of the issue, made for the list of `kind` itself (a
    schedule's id may be any text, so the schedules list takes those as ids)."""
    timed = ["²:x", f"{2**63}:x", f"{10**30}:x", "-5:x", "١٢:x", "12", "12:"]
    return [
        "²",
        "-1",
        "%%%not base64",
        "AAAA",
        *([] if kind == SCHEDULES_CURSOR else [_crafted(kind, text) for text in timed]),
        _crafted(kind, 2**63),
        _crafted(kind, -1),
        _crafted(kind, "\udc80"),
        _crafted(kind, [1, 2]),
        base64.urlsafe_b64encode(b"\xff\xfe[").decode(),
        base64.urlsafe_b64encode(b"[" * 300).decode()[:512],
    ]


# What a client could craft: a position in JSON for the list's own kind (any
# scalar, above all "time:id" with any time), or any text at all.
_TIMES = st.one_of(
    st.text(max_size=25),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=25),
    st.integers(-(2**70), 2**70),
    st.integers(2**63 - 2, 2**64),
)
_POSITIONS = st.one_of(
    st.builds(lambda t, k: f"{t}:{k}", _TIMES, st.text(max_size=5)),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=30),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
HOSTILE = st.one_of(
    st.builds(lambda position: lambda kind: _crafted(kind, position), _POSITIONS),
    st.builds(lambda text: lambda kind: text, st.text(min_size=1, max_size=40)),
)
"""A cursor for a list of a given kind."""


@pytest.fixture(params=["sqlite", "postgresql", "memory"])
def crafted_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Headgate]:
    from tests.conftest import empty_store_url

    for url in empty_store_url(request.param, request, tmp_path):
        headgate = Headgate(
            url, clock=FakeClock(START_MS), config=RuntimeConfig(lease_ttl_ms=3_600_000)
        )
        headgate.schedules.put("s", spec="@every:60000", kind="k")
        headgate.enqueue("k", {"n": 1})
        yield headgate
        headgate.close()


@pytest.fixture
def web(crafted_store: Headgate) -> Iterator[TestClient]:
    with TestClient(create_app(crafted_store, api_token=""), base_url=LOCAL) as client:
        yield client


def _assert_api_refuses_or_pages(client: TestClient, path: str, cursor: str) -> None:
    response = client.get(path, params={"cursor": cursor})
    assert response.status_code in (200, 422), (path, cursor, response.text)
    if response.status_code == 422:
        assert response.json()["error"].startswith("cursor: "), response.text


def _assert_console_refuses_or_pages(client: TestClient, path: str, cursor: str) -> None:
    response = client.get(path, params={"cursor": cursor})
    assert response.status_code in (200, 422), (path, cursor, response.text[:300])
    if response.status_code == 422:
        assert "cursor" in response.text and "Traceback" not in response.text


def test_the_named_hostile_cursors_are_422_on_every_api_and_console_list(
    web: TestClient,
) -> None:
    for path, kind in API_ROUTES:
        for cursor in _named(kind):
            response = web.get(path, params={"cursor": cursor})
            assert response.status_code == 422, (path, cursor, response.text)
            assert response.json() == {"error": RULE}
    for path, kind in CONSOLE_ROUTES:
        for cursor in _named(kind):
            response = web.get(path, params={"cursor": cursor})
            assert response.status_code == 422, (path, cursor, response.text[:300])
            assert "cursor: is not a cursor returned by this list" in response.text


def test_a_cursor_each_list_made_still_pages(web: TestClient) -> None:
    """The stricter check keeps the lists' own cursors (a real time, a real id)."""
    for path, kind in API_ROUTES:
        position: int | str = 1 if kind == HISTORY_CURSOR else f"{START_MS}:x"
        if kind == SCHEDULES_CURSOR:
            position = "a"
        response = web.get(path, params={"cursor": encode_cursor(kind, position)})
        assert response.status_code == 200, (path, response.text)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cursor_for=HOSTILE)
def test_any_crafted_cursor_is_a_page_or_a_422_naming_it(
    web: TestClient, cursor_for: Callable[[str], str]
) -> None:
    for path, kind in API_ROUTES:
        _assert_api_refuses_or_pages(web, path, cursor_for(kind))
    for path, kind in CONSOLE_ROUTES:
        _assert_console_refuses_or_pages(web, path, cursor_for(kind))


@pytest.mark.parametrize(("argv", "kind"), CLI_LISTS)
def test_the_cli_lists_refuse_a_crafted_cursor_with_exit_2(
    argv: list[str], kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Headgate(url) as headgate:
        headgate.enqueue("k", {"n": 1})
    for cursor in _named(kind):
        status = main([*argv, "--db", url, "--cursor", cursor])
        _, err = capsys.readouterr()
        assert status == 2, (argv, cursor, err)
        assert "cursor" in err and "Traceback" not in err
