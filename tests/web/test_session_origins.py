"""A console session is valid on the origin it was issued on alone.

A browser sends a cookie to every port of the host name it was set for, so a
console's session reaches whatever else listens on that name: another console
there, sharing the store, the token and the session secret (replicas), must
not take it, nor must this one on another of its names.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.web import create_app
from tests.web.serving import serving, wait_until_answering

TOKEN = "origin-s3cret"
SECRET = {"session_secret": "shared-by-the-replicas"}
HERE = "http://127.0.0.1:8080"
PROXY = ("127.0.0.1", 50000)
"""The test client's address: a proxy on this machine, whose forwarded headers
the apps below believe (forwarded_allow_ips)."""


def _log_in(client: TestClient) -> str:
    response = client.post(
        "/login", json={"token": TOKEN}, headers={"Origin": str(client.base_url)}
    )
    assert response.status_code == 200, response.text
    value = client.cookies.get("headgate_session")
    assert value is not None
    return value


def _app(hg: Headgate) -> FastAPI:
    return create_app(
        hg, api_token=TOKEN, allowed_hosts=["*"], forwarded_allow_ips=[PROXY[0]], **SECRET
    )


def _status(hg: Headgate, base: str, value: str, **headers: str) -> int:
    cookies = {"headgate_session": value}
    with TestClient(_app(hg), base_url=base, cookies=cookies, client=PROXY) as client:
        return client.get("/api/v1/periodic", headers=headers).status_code


@pytest.mark.parametrize(
    ("base", "headers"),
    [
        ("http://127.0.0.1:9090", {}),  # another port of the same host name
        ("http://127.0.0.1", {}),  # its default port
        ("http://localhost:8080", {}),  # another name of the same address
        ("https://127.0.0.1:8080", {}),  # another scheme
        (HERE, {"X-Forwarded-Host": "jobs.example.org"}),  # reached by a proxy's name
    ],
)
def test_a_session_is_no_session_on_another_origin(
    hg: Headgate, base: str, headers: dict[str, str]
) -> None:
    with TestClient(_app(hg), base_url=HERE, client=PROXY) as client:
        value = _log_in(client)
        assert client.get("/api/v1/periodic").status_code == 200
    assert _status(hg, HERE, value) == 200, "a replica on the same origin shares it"
    assert _status(hg, base, value, **headers) == 401


def test_behind_a_proxy_the_session_is_bound_to_the_name_it_was_reached_by(
    hg: Headgate,
) -> None:
    """Through a proxy the app trusts (`forwarded_allow_ips`): the origin is the
    one the client reached, the proxy's name, not the app's own address."""
    proxied = {"X-Forwarded-Host": "jobs.example.org", "X-Forwarded-Proto": "https"}
    with TestClient(_app(hg), base_url=HERE, client=PROXY) as client:
        response = client.post(
            "/login",
            json={"token": TOKEN},
            headers={**proxied, "Origin": "https://jobs.example.org"},
        )
        assert response.status_code == 200, response.text
        value = response.cookies["headgate_session"]
    assert _status(hg, HERE, value, **proxied) == 200
    assert _status(hg, HERE, value) == 401, "the app's own address is another origin"


def _get(url: str, value: str) -> int:
    request = urllib.request.Request(url, headers={"Cookie": f"headgate_session={value}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.processes
def test_a_second_serve_on_another_port_refuses_the_first_ones_session(tmp_path: Path) -> None:
    """Two `headgate serve` on one store, one token and one session secret, as
    two consoles (or a console and anything else) on two ports of 127.0.0.1:
    the browser would send the first one's cookie to the second; it is no
    session there."""
    environment = {"HEADGATE_API_TOKEN": TOKEN, "HEADGATE_SESSION_SECRET": "shared"}
    with (
        serving(tmp_path, environment=environment) as (_, first),
        serving(tmp_path, environment=environment) as (_, second),
    ):
        wait_until_answering(f"{first}/healthz", timeout=60)
        wait_until_answering(f"{second}/healthz", timeout=60)
        login = urllib.request.Request(
            f"{first}/login",
            data=b'{"token": "' + TOKEN.encode() + b'"}',
            headers={"Content-Type": "application/json", "Origin": first},
            method="POST",
        )
        with urllib.request.urlopen(login, timeout=10) as response:
            cookie = response.headers["Set-Cookie"]
        value = cookie.split(";", 1)[0].removeprefix("headgate_session=")
        assert _get(f"{first}/api/v1/periodic", value) == 200
        assert _get(f"{second}/api/v1/periodic", value) == 401
        assert _get(f"{second}/", value) == 401, "the console shows the login form"
