"""The ASGI app on each backend, through the test client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, RuntimeConfig
from headgate.testing import FakeClock
from headgate.web import create_app

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


@pytest.fixture
def client(hg: Headgate) -> Iterator[TestClient]:
    with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as test_client:
        yield test_client
