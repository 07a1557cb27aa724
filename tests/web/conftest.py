"""The ASGI app on each backend, through the test client."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from headgate import Headgate, RuntimeConfig
from headgate.testing import FakeClock
from headgate.web import create_app
from headgate.web._throttle import FailureThrottle

START_MS = 1_704_067_200_000
LOCAL = "http://127.0.0.1"
"""The test client's base URL: a loopback name, which the Host check accepts by
default (the client's own default, `testserver`, it refuses)."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def hg(store_url: str, clock: FakeClock) -> Iterator[Headgate]:
    headgate = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=3_600_000))
    yield headgate
    headgate.close()


@functools.cache
def _served_app() -> FastAPI:
    """One app with the default settings, for every test of this process that
    takes `client`: FastAPI builds an app's routes at its first request (a
    quarter of a second each, which was most of the fast half's time), and an
    app holds nothing of its Headgate but `state`, which `client` sets."""
    with Headgate("memory://") as placeholder:
        return create_app(placeholder, api_token="")


@pytest.fixture
def client(hg: Headgate) -> Iterator[TestClient]:
    """The app of `create_app(hg, api_token="")`, through the test client."""
    app = _served_app()
    app.state.headgate = hg
    app.state.login_throttle = FailureThrottle(hg.clock)
    with TestClient(app, base_url=LOCAL) as test_client:
        yield test_client
    app.state.headgate = None
