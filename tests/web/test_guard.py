"""Cross-site writes, on SQLite and PostgreSQL: every write route of the app (found
in app.routes, so a new one is covered without editing this file) refuses a
request from another origin, from another port of the same host, from a form, and
one made with the login cookie but without the session's CSRF token, with 403
`{"error": "origin: ..."}` and nothing stored changed; the console's own requests
(same origin, under a mount, behind a proxy), bearer-token clients and plain API
clients are served."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Mount
from structlog.testing import capture_logs

from headgate import Headgate
from headgate._operator import operator_of
from headgate.web import create_app
from tests.web.conftest import LOCAL

TOKEN = "s3cret"
PROXY = ("127.0.0.1", 50000)
"""The test client's address when it plays a proxy on this machine."""
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SCHEDULE = {"kind": "report", "spec": "@every:60000"}
BODIES: dict[tuple[str, str], object] = {
    ("PUT", "/api/v1/schedules/{schedule_id}"): {"kind": "other", "spec": "@every:30000"},
    ("PATCH", "/api/v1/schedules/{schedule_id}"): {"jitter_ms": 10},
    ("POST", "/api/v1/schedules:bulk"): {"schedules": [{"id": "bulk-1", **SCHEDULE}]},
    ("POST", "/api/v1/jobs"): {"kind": "email.send", "payload": {}},
    ("PUT", "/api/v1/quarantine/{fingerprint}"): {"note": "by hand"},
    ("POST", "/api/v1/queues/{queue}/pause"): {"note": "by hand"},
    ("PUT", "/api/v1/limits"): {"queue": "default", "limit": 1},
    ("PUT", "/api/v1/rates/{rate_class}"): {"limit": 1, "per_ms": 1_000},
    ("POST", "/api/v1/jobs:retry"): {"state": "failed"},
    ("POST", "/api/v1/jobs:cancel"): {"state": "pending", "kind": "nothing.matches"},
    ("POST", "/login"): {"token": TOKEN},
}
"""The JSON body a write route takes, if any; the rest take none."""
HEADERS: dict[tuple[str, str], dict[str, str]] = {
    ("POST", "/api/v1/schedules/{schedule_id}/enqueue-now"): {"Idempotency-Key": "k-1"},
}


@dataclass(frozen=True)
class Write:
    method: str
    template: str
    path: str
    body: object = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.method} {self.template}"


def write_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path template) of every route of `app` that writes."""
    found = []
    for route in iter_route_contexts(app.routes):  # the included routers' routes too
        if isinstance(route.original_route, Mount) or route.path is None:
            continue
        found += [(m, route.path) for m in sorted((route.methods or set()) & WRITES)]
    # Deletes last, so that a run of them all finds what each one acts on.
    return sorted(found, key=lambda write: write[0] == "DELETE")


@dataclass
class Fixture:
    """A store with something for every write to change."""

    hg: Headgate
    pending_job: str = ""
    fingerprint: str = ""

    def fill(self) -> None:
        self.hg.periodic("nightly", **SCHEDULE)(lambda job: None)  # declared: overrides to clear
        self.hg.start(workers=False).stop()
        self.pending_job = self.hg.enqueue("email.send", {"to": "ada"}).id
        self.fingerprint = self.hg.quarantine.fingerprint("poison", {"bad": True})
        self.hg.quarantine.add(self.fingerprint, "crashed")
        self.hg.limits.set(limit=100)  # what DELETE /limits (any scope) removes
        self.hg.rates.set("mail-api", limit=30, per_ms=60_000)

    def writes(self, app: FastAPI) -> list[Write]:
        values = {
            "schedule_id": "nightly",
            "job_id": self.pending_job,
            "fingerprint": self.fingerprint,
            "queue": "default",
            "rate_class": "mail-api",
        }
        writes = []
        for method, template in write_routes(app):
            path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)
            key = (method, template)
            writes.append(Write(method, template, path, BODIES.get(key), HEADERS.get(key, {})))
        return writes

    def state(self) -> object:
        """Everything a write could change: the log's head and what the API shows."""
        return (
            self.hg._core.store.log.head(),
            self.hg.schedules.get("nightly"),
            self.hg.jobs.get(self.pending_job).state,
            self.hg.quarantine.get(self.fingerprint),
            operator_of(self.hg).queue_status("default"),
            self.hg.limits.list(),
            self.hg.rates.list(),
        )


@pytest.fixture
def filled(hg: Headgate) -> Fixture:
    fixture = Fixture(hg)
    fixture.fill()
    return fixture


@pytest.fixture
def open_app(hg: Headgate) -> FastAPI:
    return create_app(hg, api_token="")


@pytest.fixture
def token_app(hg: Headgate) -> FastAPI:
    return create_app(hg, api_token=TOKEN)


@pytest.fixture
def logged_in(token_app: FastAPI) -> Iterator[tuple[TestClient, str]]:
    """A client holding the console's session cookie, and the page's CSRF token."""
    with TestClient(token_app, base_url=LOCAL) as client:
        assert client.post("/login", json={"token": TOKEN}).status_code == 200
        page = client.get("/").text
        token = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert token is not None, "a logged-in console page carries the CSRF token"
        yield client, token.group(1)


def send(client: TestClient, write: Write, headers: dict[str, str]) -> tuple[int, object]:
    response = client.request(
        write.method,
        write.path,
        json=write.body,
        headers={**write.headers, **headers},
    )
    return response.status_code, response.json() if response.content else None


CROSS_SITE = {
    "a foreign Origin": ({"Origin": "http://evil.example"}, "Origin"),
    "another port of this host": ({"Origin": "http://127.0.0.1:9000"}, "Origin"),
    "another scheme": ({"Origin": "https://127.0.0.1"}, "Origin"),
    "Origin null": ({"Origin": "null"}, "Origin is null"),
    "Sec-Fetch-Site cross-site": ({"Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site"),
    "Sec-Fetch-Site same-site": ({"Sec-Fetch-Site": "same-site"}, "Sec-Fetch-Site"),
}
"""Header sets a page on another origin makes the browser send, and the rule
the refusal names."""
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain")


def _refused(client: TestClient, filled: Fixture, write: Write, headers: dict[str, str]) -> str:
    before = filled.state()
    response = client.request(write.method, write.path, headers={**write.headers, **headers})
    assert response.status_code == 403, (str(write), headers, response.text)
    assert "set-cookie" not in response.headers, (str(write), headers)
    assert filled.state() == before, f"{write} with {headers} changed the store"
    message: str = response.json()["error"]
    assert message.startswith("origin: "), message
    return message


def test_every_write_route_is_found(open_app: FastAPI) -> None:
    routes = write_routes(open_app)
    assert ("POST", "/api/v1/jobs/{job_id}/cancel") in routes
    assert ("POST", "/login") in routes and ("POST", "/logout") in routes
    assert len(routes) >= 13


def test_every_write_has_a_sample_request_that_the_guard_lets_through(
    open_app: FastAPI, filled: Fixture
) -> None:
    """The control for the refusals below: each write, sent as the console sends
    it (same origin, JSON), is served (a 401 for /login without a token is the
    route's own answer, not the guard's)."""
    with TestClient(open_app, base_url=LOCAL) as client:
        for write in filled.writes(open_app):
            status, body = send(client, write, {"Origin": LOCAL, "Sec-Fetch-Site": "same-origin"})
            assert status != 403, (str(write), body)
            assert status < 300 or write.template == "/login", (str(write), status, body)


@pytest.mark.parametrize("case", sorted(CROSS_SITE))
def test_a_write_from_another_origin_is_refused_without_a_token(
    open_app: FastAPI, filled: Fixture, case: str
) -> None:
    headers, rule = CROSS_SITE[case]
    with TestClient(open_app, base_url=LOCAL) as client:
        for write in filled.writes(open_app):
            assert rule in _refused(client, filled, write, headers)


@pytest.mark.parametrize("content_type", FORM_TYPES)
def test_a_write_a_form_could_send_is_refused_even_with_an_empty_body(
    open_app: FastAPI, filled: Fixture, content_type: str
) -> None:
    with TestClient(open_app, base_url=LOCAL) as client:
        for write in filled.writes(open_app):
            message = _refused(client, filled, write, {"Content-Type": content_type})
            assert "Content-Type" in message and "application/json" in message


@pytest.mark.parametrize("case", sorted(CROSS_SITE))
def test_a_write_from_another_origin_is_refused_with_the_session_and_its_csrf_token(
    logged_in: tuple[TestClient, str], token_app: FastAPI, filled: Fixture, case: str
) -> None:
    """Logged in to the console (the browser sends the cookie to another port of
    the same host: SameSite ignores ports), with the right CSRF token even."""
    client, csrf = logged_in
    headers, rule = CROSS_SITE[case]
    for write in filled.writes(token_app):
        assert rule in _refused(client, filled, write, {**headers, "X-CSRF-Token": csrf})
    assert client.get("/api/v1/periodic").status_code == 200, "the session still works"


def test_a_write_with_the_session_cookie_needs_its_csrf_token(
    logged_in: tuple[TestClient, str], token_app: FastAPI, filled: Fixture
) -> None:
    client, csrf = logged_in
    for write in filled.writes(token_app):
        for headers in ({}, {"X-CSRF-Token": "forged"}, {"X-CSRF-Token": csrf[:-1]}):
            assert "X-CSRF-Token" in _refused(client, filled, write, headers)
    assert client.get("/api/v1/periodic").status_code == 200, "the session still works"


def test_a_write_with_the_session_cookie_needs_its_csrf_token_beside_basic_credentials(
    logged_in: tuple[TestClient, str], token_app: FastAPI, filled: Fixture
) -> None:
    """Behind a proxy that asks for HTTP Basic credentials the browser adds them to
    every request, a page on another origin's too: only a Bearer header stands in
    for the CSRF token, since only it is judged instead of the cookie."""
    client, csrf = logged_in
    for write in filled.writes(token_app):
        for authorization in ("Basic dXNlcjpwYXNz", "Token abc", "bearer-ish abc"):
            headers = {"Authorization": authorization}
            assert "X-CSRF-Token" in _refused(client, filled, write, headers)
    pause = "/api/v1/periodic/nightly/pause"
    empty_bearer = client.post(pause, headers={"Authorization": "Bearer"})
    assert empty_bearer.status_code == 401, "an empty bearer token is a wrong one, not the cookie"
    basic_with_csrf = {"Authorization": "Basic dXNlcjpwYXNz", "X-CSRF-Token": csrf}
    assert client.post(pause, headers=basic_with_csrf).status_code == 200, (
        "the console behind such a proxy still writes"
    )
    assert filled.hg.schedules.get("nightly").paused


def test_a_csrf_token_that_is_not_ascii_is_refused_not_an_error(
    logged_in: tuple[TestClient, str], filled: Fixture
) -> None:
    client, _ = logged_in
    before = filled.state()
    response = client.post(
        "/api/v1/periodic/nightly/pause", headers=[(b"x-csrf-token", b"\xe9\xff")]
    )
    assert response.status_code == 403 and "X-CSRF-Token" in response.json()["error"]
    assert filled.state() == before


def test_the_console_writes_with_its_session_and_csrf_token(
    logged_in: tuple[TestClient, str], token_app: FastAPI, filled: Fixture
) -> None:
    client, csrf = logged_in
    same_origin = {"Origin": LOCAL, "Sec-Fetch-Site": "same-origin", "X-CSRF-Token": csrf}
    for write in filled.writes(token_app):
        if write.template in ("/login", "/logout"):
            continue  # logging out ends the session the rest need: test_login.py
        status, body = send(client, write, same_origin)
        assert status < 300, (str(write), status, body)
    assert filled.hg.quarantine.get(filled.fingerprint) is None, "the last write released it"


def test_a_bearer_client_needs_no_csrf_token_but_not_from_another_origin(
    token_app: FastAPI, filled: Fixture
) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(token_app, base_url=LOCAL) as client:
        for write in filled.writes(token_app):
            assert "Origin" in _refused(
                client, filled, write, {**bearer, "Origin": "http://evil.example"}
            )
        for write in filled.writes(token_app):
            status, body = send(client, write, bearer)
            assert status < 300, (str(write), status, body)


def test_a_plain_api_client_writes_with_an_empty_body(open_app: FastAPI, filled: Fixture) -> None:
    """`curl -X POST .../cancel`: no Origin, no Sec-Fetch-Site, no Content-Type, no body."""
    with TestClient(open_app, base_url=LOCAL) as client:
        response = client.post(f"/api/v1/jobs/{filled.pending_job}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "cancelled"


def test_the_console_behind_a_proxy_under_a_prefix_knows_its_own_origin(
    hg: Headgate, filled: Fixture
) -> None:
    """The proxy serves https://ops.example.com/scheduler/ from the app mounted at
    /scheduler on 127.0.0.1:8080, and says so with X-Forwarded-Host and -Proto,
    which are believed as the proxy is named."""
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="", forwarded_allow_ips=["127.0.0.1"]))
    proxied = {
        "Host": "127.0.0.1:8080",
        "X-Forwarded-Host": "ops.example.com",
        "X-Forwarded-Proto": "https",
        "Sec-Fetch-Site": "same-origin",
    }
    pause = "/scheduler/api/v1/periodic/nightly/pause"
    with TestClient(host, base_url=LOCAL, client=PROXY) as client:
        for origin in ("https://evil.example", "http://ops.example.com", "https://127.0.0.1:8080"):
            before = filled.state()
            refused = client.post(pause, headers={**proxied, "Origin": origin})
            assert refused.status_code == 403, origin
            assert filled.state() == before
        unexplained = client.post(
            pause, headers={"Host": "127.0.0.1:8080", "Origin": "https://ops.example.com"}
        )
        assert unexplained.status_code == 403
        assert "X-Forwarded-Host" in unexplained.json()["error"]
        for origin in ("https://ops.example.com", "https://OPS.example.com:443"):
            served = client.post(pause, headers={**proxied, "Origin": origin})
            assert served.status_code == 200, (origin, served.text)
    assert hg.schedules.get("nightly").paused


def test_forwarded_headers_from_a_proxy_not_named_are_not_believed(
    hg: Headgate, filled: Fixture
) -> None:
    """By default no proxy is trusted: X-Forwarded-Host and -Proto, from loopback
    too, are not the app's origin, and the refusal says what to name."""
    proxied = {
        "Host": "127.0.0.1:8080",
        "X-Forwarded-Host": "ops.example.com",
        "X-Forwarded-Proto": "https",
        "Sec-Fetch-Site": "same-origin",
    }
    pause = "/api/v1/periodic/nightly/pause"
    for trusted in (None, ["10.0.0.0/8"]):
        app = create_app(hg, api_token="", forwarded_allow_ips=trusted)
        with TestClient(app, base_url=LOCAL, client=PROXY) as client:
            refused = client.post(pause, headers={**proxied, "Origin": "https://ops.example.com"})
            assert refused.status_code == 403, trusted
            assert "--forwarded-allow-ips" in refused.json()["error"]
            assert not hg.schedules.get("nightly").paused
            served = client.post(pause, headers={**proxied, "Origin": "http://127.0.0.1:8080"})
            assert served.status_code == 200, (trusted, served.text)
            client.post("/api/v1/periodic/nightly/resume")


def test_a_bad_proxy_address_is_refused_at_start(hg: Headgate) -> None:
    with pytest.raises(ValueError, match=r"forwarded_allow_ips: 'proxy\.internal' is not an IP"):
        create_app(hg, api_token="", forwarded_allow_ips=["127.0.0.1", "proxy.internal"])


def test_a_refusal_is_logged_with_its_rule(open_app: FastAPI, filled: Fixture) -> None:
    with TestClient(open_app, base_url=LOCAL) as client, capture_logs() as logs:
        client.post(f"/api/v1/jobs/{filled.pending_job}/cancel", headers={"Origin": "null"})
    refusals = [e for e in logs if e["event"] == "cross-site write refused"]
    assert [(e["rule"], e["origin"], e["log_level"]) for e in refusals] == [
        ("origin", "null", "warning")
    ]
