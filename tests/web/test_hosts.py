"""The Host check (DNS rebinding): by default only loopback names are answered,
on every route family; the operator names others, or "*"; the probes answer any
Host (a kubelet sends the pod's address)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.web import create_app
from headgate.web._hosts import answered_names, named_hosts
from tests.web.conftest import LOCAL

FAMILIES = {
    "API": "/api/v1/periodic",
    "API write": "/api/v1/periodic/nightly/pause",
    "console page": "/",
    "login page": "/login",
    "docs": "/docs",
    "openapi.json": "/openapi.json",
    "metrics": "/metrics",
    "static": "/static/console.js",
    "swagger asset": "/static/swagger-ui/swagger-ui.css",
    "unknown path": "/nothing",
    "redirected slash": "/api/v1/periodic/",
}
REBOUND = (
    "attacker.example",
    "attacker.example:8080",
    "127.0.0.1.attacker.example",
    "localhost.evil",
)


@pytest.fixture
def nightly(hg: Headgate) -> Headgate:
    hg.schedules.put("nightly", spec="@every:60000", kind="report")
    return hg


def _get_or_post(client: TestClient, path: str, host: str) -> tuple[int, dict[str, str]]:
    method = "POST" if path.endswith("/pause") else "GET"
    response = client.request(method, path, headers={"Host": host}, follow_redirects=False)
    return response.status_code, response.json() if response.status_code == 400 else {}


@pytest.mark.parametrize("host", REBOUND)
def test_a_host_name_not_allowed_is_refused_on_every_route_family(
    client: TestClient, nightly: Headgate, host: str
) -> None:
    for family, path in FAMILIES.items():
        status, body = _get_or_post(client, path, host)
        assert status == 400, (family, host, status)
        message = body["error"]
        assert message.startswith(f"host: Host {host!r} is not a name this server answers to")
        assert "allowed_hosts=" in message and "--allowed-host" in message, message
    assert not nightly.schedules.get("nightly").paused


def test_a_rebound_name_is_refused_with_the_token_too(nightly: Headgate) -> None:
    with TestClient(create_app(nightly, api_token="s3cret"), base_url=LOCAL) as client:
        response = client.get(
            "/api/v1/periodic",
            headers={"Host": "attacker.example", "Authorization": "Bearer s3cret"},
        )
    assert response.status_code == 400


def test_a_missing_host_is_refused(client: TestClient) -> None:
    response = client.get("/api/v1/periodic", headers={"Host": ""})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8080",
        "LOCALHOST:1",
        "127.0.0.1",
        "127.0.0.1:9",
        "[::1]:8080",
        "[::1]",
    ],
)
def test_loopback_names_are_answered_on_any_port(
    client: TestClient, nightly: Headgate, host: str
) -> None:
    for family, path in FAMILIES.items():
        status, _ = _get_or_post(client, path, host)
        assert status != 400, (family, host)


def test_the_operator_names_other_hosts_or_any(
    hg: Headgate, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = create_app(hg, api_token="", allowed_hosts=["scheduler.internal", "[fd00::1]"])
    with TestClient(named, base_url=LOCAL) as client:
        for host in ("scheduler.internal", "Scheduler.Internal:8443", "[fd00::1]:80", "localhost"):
            assert client.get("/api/v1/periodic", headers={"Host": host}).status_code == 200, host
        assert client.get("/api/v1/periodic", headers={"Host": "other.internal"}).status_code == 400
    with TestClient(create_app(hg, api_token="", allowed_hosts=["*"]), base_url=LOCAL) as client:
        assert client.get("/api/v1/periodic", headers={"Host": "anything"}).status_code == 200
    monkeypatch.setenv("HEADGATE_ALLOWED_HOSTS", " a.internal, b.internal ,")
    with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client:
        for host, status in (("a.internal", 200), ("b.internal:1", 200), ("c.internal", 400)):
            assert client.get("/api/v1/periodic", headers={"Host": host}).status_code == status
    with TestClient(create_app(hg, api_token="", allowed_hosts=[]), base_url=LOCAL) as client:
        assert client.get("/api/v1/periodic", headers={"Host": "a.internal"}).status_code == 400


@pytest.mark.parametrize("entry", ["a b", "evil.example/path", "user@evil.example", "a,b", "\x00"])
def test_an_allowed_host_that_is_not_a_name_is_refused_at_start(hg: Headgate, entry: str) -> None:
    with pytest.raises(ValueError, match="allowed_hosts"):
        create_app(hg, api_token="", allowed_hosts=[entry])
    with pytest.raises(ValueError, match="a list of host names"):
        create_app(hg, api_token="", allowed_hosts="jobs.internal")


def test_the_names_answered_are_listed_once_each_as_people_write_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What `serve` prints at start: loopback names first, then the rest in order."""
    given = ["192.0.2.2", "Jobs.Internal:8443", "fd00::1", "localhost", "jobs.internal"]
    assert answered_names(given) == [
        "localhost",
        "127.0.0.1",
        "[::1]",
        "192.0.2.2",
        "jobs.internal",
        "[fd00::1]",
    ]
    assert answered_names([]) == ["localhost", "127.0.0.1", "[::1]"]
    assert answered_names(["jobs.internal", " * "]) is None
    monkeypatch.setenv("HEADGATE_ALLOWED_HOSTS", " a.internal, ,b.internal")
    assert named_hosts(None) == [" a.internal", "b.internal"]
    assert named_hosts(["c.internal"]) == ["c.internal"], "given names replace the environment's"


def test_the_probes_answer_any_host(hg: Headgate) -> None:
    """A kubelet's probe says `Host: <pod ip>:<port>`; the probes tell it only
    that the process is up and the store answers, nothing a rebinding page can use."""
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="s3cret"))
    for app, prefix in ((create_app(hg, api_token=""), ""), (host, "/scheduler")):
        with TestClient(app, base_url=LOCAL) as client:
            for path in ("/healthz", "/readyz"):
                response = client.get(f"{prefix}{path}", headers={"Host": "10.1.2.3:8080"})
                assert response.status_code == 200, (prefix, path)
            refused = client.get(f"{prefix}/healthz/x", headers={"Host": "10.1.2.3:8080"})
            assert refused.status_code == 400


def test_a_trailing_slash_redirect_never_points_at_another_host(client: TestClient) -> None:
    """Before the check, `GET /api/v1/schedules/` with `Host: attacker.example`
    was redirected to http://attacker.example/api/v1/schedules."""
    refused = client.get(
        "/api/v1/schedules/", headers={"Host": "attacker.example"}, follow_redirects=False
    )
    assert refused.status_code == 400 and "location" not in refused.headers
    kept = client.get("/api/v1/schedules/", follow_redirects=False)
    assert kept.status_code == 307
    assert kept.headers["location"] == "http://127.0.0.1/api/v1/schedules"
