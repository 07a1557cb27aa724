"""The console's login, on SQLite and PostgreSQL: the cookie is a signed session
with an expiry (never the token), logout ends it, failed logins are logged
(never what was offered) and throttled per client, any token the server can be
given matches when offered, and /login says plainly where the visitor stands."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from headgate import Headgate
from headgate.testing import FakeClock
from headgate.web import create_app
from headgate.web._throttle import (
    MAX_CLIENTS,
    TOTAL_LIMIT,
    WINDOW_MS,
    FailureThrottle,
    client_key,
)
from tests.web.conftest import LOCAL

TOKEN = "s3cret-t0ken"
HOUR = 3_600_000
SAME_ORIGIN = {"Origin": LOCAL, "Sec-Fetch-Site": "same-origin"}


@pytest.fixture
def app(hg: Headgate) -> FastAPI:
    return create_app(hg, api_token=TOKEN)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, base_url=LOCAL) as test_client:
        yield test_client


def _log_in(client: TestClient, token: str = TOKEN) -> str:
    response = client.post("/login", json={"token": token}, headers=SAME_ORIGIN)
    assert response.status_code == 200, response.text
    value = client.cookies.get("headgate_session")
    assert value is not None
    return value


def _csrf(client: TestClient) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', client.get("/").text)
    assert found is not None
    return found.group(1)


def _with_cookie(app: FastAPI, value: str) -> int:
    with TestClient(app, base_url=LOCAL, cookies={"headgate_session": value}) as other:
        return other.get("/api/v1/periodic").status_code


def _raw_status(app: FastAPI, authorization: bytes) -> int:
    """The status `app` answers a GET of the schedules with this header, as bytes."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/v1/periodic",
        "raw_path": b"/api/v1/periodic",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", authorization)],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    return int(sent[0]["status"])  # type: ignore[call-overload]


class TestSession:
    def test_the_cookie_is_a_signed_session_not_the_token(
        self, client: TestClient, app: FastAPI
    ) -> None:
        response = client.post("/login", json={"token": TOKEN})
        cookie = response.headers["set-cookie"]
        assert TOKEN not in cookie and "headgate_token" not in client.cookies
        assert "max-age=43200" in cookie.lower(), "12 hours"
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        value = client.cookies["headgate_session"]
        assert response.json()["expires_at_ms"] == int(value.split(".")[1])
        assert client.get("/api/v1/periodic").status_code == 200
        assert _with_cookie(app, TOKEN) == 401, "the token itself is no session"
        version, expires, nonce, signature = value.split(".")
        for forged in (
            f"{version}.{int(expires) + HOUR}.{nonce}.{signature}",
            f"{version}.{expires}.{nonce}x.{signature}",
            f"{version}.{expires}.{nonce}.{signature[:-2]}AA",
            "",
            "v1...",
        ):
            assert _with_cookie(app, forged) == 401, forged

    def test_a_session_ends_when_it_expires(
        self, client: TestClient, app: FastAPI, clock: FakeClock
    ) -> None:
        value = _log_in(client)
        clock.advance(12 * HOUR - 1)
        assert _with_cookie(app, value) == 200
        clock.advance(1)
        assert _with_cookie(app, value) == 401
        assert client.get("/").status_code == 401

    def test_changing_the_token_ends_every_session(self, hg: Headgate) -> None:
        secret = {"session_secret": "shared-by-the-replicas"}
        first = create_app(hg, api_token=TOKEN, **secret)
        with TestClient(first, base_url=LOCAL) as client:
            value = _log_in(client)
        assert _with_cookie(create_app(hg, api_token=TOKEN, **secret), value) == 200
        assert _with_cookie(create_app(hg, api_token="the-new-one", **secret), value) == 401
        assert _with_cookie(create_app(hg, api_token=TOKEN), value) == 401, "a random secret"

    def test_replicas_share_sessions_through_the_environment(
        self, hg: Headgate, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HEADGATE_SESSION_SECRET", "from-the-environment")
        with TestClient(create_app(hg, api_token=TOKEN), base_url=LOCAL) as client:
            value = _log_in(client)
        assert _with_cookie(create_app(hg, api_token=TOKEN), value) == 200

    def test_the_cookie_is_secure_behind_a_tls_proxy(self, hg: Headgate) -> None:
        """Behind a proxy the operator names; one not named is not believed."""
        tls = {"X-Forwarded-Proto": "https"}
        for trusted, secure in ((["127.0.0.1"], True), (None, False)):
            app = create_app(hg, api_token=TOKEN, forwarded_allow_ips=trusted)
            with TestClient(app, base_url=LOCAL, client=("127.0.0.1", 1)) as client:
                response = client.post("/login", json={"token": TOKEN}, headers=tls)
            assert ("secure" in response.headers["set-cookie"].lower()) is secure, trusted

    def test_a_cookie_that_is_not_ascii_is_no_session_on_any_route(self, app: FastAPI) -> None:
        """A page on a sibling domain can set the cookie (cookie tossing): a value
        no issued session can be is simply none, never a 500 on every route."""
        tossed = (b"cookie", b"headgate_session=v1.1.a.\xe9")
        bearer = (b"authorization", f"Bearer {TOKEN}".encode())
        expected = [
            ("GET", "/", [], 401),
            ("GET", "/api/v1/periodic", [], 401),
            ("GET", "/openapi.json", [], 401),
            ("GET", "/docs", [], 401),
            ("GET", "/metrics", [], 401),
            ("GET", "/login", [], 200),
            ("GET", "/static/console.js", [], 200),
            ("GET", "/healthz", [], 200),
            ("POST", "/logout", [], 200),
            ("POST", "/logout", [bearer], 200),
            ("GET", "/api/v1/periodic", [bearer], 200),
        ]
        with TestClient(app, base_url=LOCAL) as client:
            for method, path, headers, status in expected:
                response = client.request(method, path, headers=[tossed, *headers])
                assert response.status_code == status, (method, path, headers, response.text)

    def test_a_wrong_bearer_token_is_refused_even_with_a_valid_cookie(
        self, client: TestClient
    ) -> None:
        _log_in(client)
        response = client.get("/api/v1/periodic", headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401
        basic = client.get("/api/v1/periodic", headers={"Authorization": "Basic dXNlcjpwdw=="})
        assert basic.status_code == 200, "a proxy's Basic credentials leave the cookie in charge"


class TestLogout:
    def test_logout_clears_the_cookie_and_ends_the_session(
        self, client: TestClient, app: FastAPI
    ) -> None:
        value = _log_in(client)
        csrf = _csrf(client)
        assert 'id="logout"' in client.get("/").text
        response = client.post("/logout", headers={**SAME_ORIGIN, "X-CSRF-Token": csrf})
        assert response.status_code == 200 and response.json()["logged_out"] is True
        cleared = response.headers.get_list("set-cookie")
        assert any(c.startswith("headgate_session=") and "max-age=0" in c.lower() for c in cleared)
        assert "headgate_session" not in client.cookies
        assert client.get("/").status_code == 401
        assert _with_cookie(app, value) == 401, "the value is revoked, not only forgotten"
        assert 'id="logout"' not in client.get("/login").text

    def test_logout_needs_the_csrf_token(self, client: TestClient, app: FastAPI) -> None:
        value = _log_in(client)
        refused = client.post("/logout", headers=SAME_ORIGIN)
        assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["error"]
        assert _with_cookie(app, value) == 200, "still logged in"

    def test_logout_without_a_session_clears_what_the_browser_holds(
        self, client: TestClient
    ) -> None:
        client.cookies.set("headgate_token", TOKEN, domain="127.0.0.1")
        response = client.post("/logout")
        assert response.status_code == 200 and response.json()["logged_out"] is False
        assert "headgate_token" not in client.cookies, "the old cookie that held the token"

    def test_the_logout_button_shows_only_with_a_session(
        self, client: TestClient, hg: Headgate
    ) -> None:
        hg.schedules.put("nightly", spec="@every:60000", kind="k")
        _log_in(client)
        for path in ("/", "/jobs", "/workers", "/quarantine", "/schedules/nightly", "/login"):
            page = client.get(path).text
            assert page.count('class="logout') >= 1, path
            assert '<meta name="csrf-token"' in page, path
        docs = client.get("/docs").text  # Swagger UI's "Try it out" sends it (static/docs.js)
        assert '<meta name="csrf-token"' in docs and 'class="logout' not in docs
        with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as open_client:
            page = open_client.get("/").text
            assert "logout" not in page and "csrf-token" not in page


class TestFailures:
    def test_a_failed_login_is_logged_with_the_client_never_the_token(
        self, client: TestClient
    ) -> None:
        with capture_logs() as logs:
            assert client.post("/login", json={"token": "guess-1234"}).status_code == 401
            headers = {"Authorization": "Bearer guess-5678"}
            assert client.get("/api/v1/periodic", headers=headers).status_code == 401
        failures = [e for e in logs if e["log_level"] == "warning"]
        assert [(e["event"], e["client"]) for e in failures] == [
            ("login failed", "testclient"),
            ("bearer token refused", "testclient"),
        ]
        assert "guess" not in repr(logs) and TOKEN not in repr(logs)

    def test_repeated_failures_are_throttled_until_the_window_passes(
        self, client: TestClient, app: FastAPI, clock: FakeClock
    ) -> None:
        for _ in range(9):
            assert client.post("/login", json={"token": "wrong"}).status_code == 401
        with capture_logs() as logs:
            assert client.post("/login", json={"token": "wrong"}).status_code == 401
        assert [e["event"] for e in logs] == ["login failed; client throttled"]
        throttled = client.post("/login", json={"token": TOKEN})
        assert throttled.status_code == 429, "the right token is not confirmed while throttled"
        assert throttled.headers["retry-after"] == "300"
        bearer = client.get("/api/v1/periodic", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 429
        with TestClient(app, base_url=LOCAL, client=("192.0.2.7", 1)) as elsewhere:
            assert elsewhere.post("/login", json={"token": TOKEN}).status_code == 200
        clock.advance(299_000)
        assert client.post("/login", json={"token": TOKEN}).headers["retry-after"] == "1"
        clock.advance(1_000)
        assert client.post("/login", json={"token": TOKEN}).status_code == 200

    def test_bearer_failures_count_too(self, client: TestClient) -> None:
        for _ in range(10):
            response = client.get("/api/v1/periodic", headers={"Authorization": "Bearer no"})
            assert response.status_code == 401
        assert client.post("/login", json={"token": TOKEN}).status_code == 429

    def test_the_throttle_forgets_old_clients_so_many_addresses_cannot_grow_it(self) -> None:
        clock = FakeClock()
        throttle = FailureThrottle(clock)
        for n in range(MAX_CLIENTS * 3):
            throttle.failed(client_key(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"))
        assert len(throttle) == MAX_CLIENTS
        for n in range(100):  # one host's /64 is one client
            throttle.failed(client_key(f"2001:db8::{n:x}"))
        assert throttle.retry_after_s(client_key("2001:db8::ffff")) is not None
        assert client_key("::ffff:192.0.2.1") == "192.0.2.1"
        clock.advance(300_000)
        assert throttle.retry_after_s(client_key("2001:db8::1")) is None

    def test_x_forwarded_for_from_a_proxy_not_named_is_not_the_client(self, app: FastAPI) -> None:
        """Issue 36: from loopback, a fresh X-Forwarded-For per guess was a fresh client."""
        with (
            TestClient(app, base_url=LOCAL, client=("127.0.0.1", 1)) as client,
            capture_logs() as logs,
        ):
            statuses = [
                client.get(
                    "/api/v1/periodic",
                    headers={"Authorization": "Bearer no", "X-Forwarded-For": f"198.51.100.{n}"},
                ).status_code
                for n in range(15)
            ]
        assert statuses == [401] * 10 + [429] * 5
        assert {e["client"] for e in logs if "client" in e} == {"127.0.0.1"}
        assert "198.51.100" not in repr(logs) and all("via" not in e for e in logs)

    def test_behind_a_named_proxy_each_client_it_forwards_counts_alone(self, hg: Headgate) -> None:
        app = create_app(hg, api_token=TOKEN, forwarded_allow_ips=["127.0.0.1", "10.0.0.0/8"])

        def guess(forwarded_for: str) -> int:
            headers = {"Authorization": "Bearer no", "X-Forwarded-For": forwarded_for}
            return client.get("/api/v1/periodic", headers=headers).status_code

        with (
            TestClient(app, base_url=LOCAL, client=("127.0.0.1", 1)) as client,
            capture_logs() as logs,
        ):
            # What the client wrote comes first; the nearest address that is no
            # named proxy is the client, whatever stands before it.
            chains = [f"6.6.6.{n}, 203.0.113.5, 10.1.2.3" for n in range(10)]
            assert [guess(chain) for chain in chains] == [401] * 10
            assert guess("203.0.113.5") == 429
            assert guess("203.0.113.6:4711") == 401, "another client, its port left out"
            assert guess("[2001:db8::1]:443") == 401
        refused = [e for e in logs if e["event"].startswith("bearer token refused")]
        assert {(e["client"], e["via"]) for e in refused} == {
            ("203.0.113.5", "127.0.0.1"),
            ("203.0.113.6", "127.0.0.1"),
            ("2001:db8::1", "127.0.0.1"),
        }
        assert "6.6.6" not in repr(logs)

    def test_failures_count_in_total_and_past_it_every_client_waits_but_known_ones(
        self, app: FastAPI, clock: FakeClock
    ) -> None:
        """Many addresses, each under its own limit, cannot guess on for ever: past
        TOTAL_LIMIT failures in the window everyone gets 429, except a client that
        offered the right token within it."""

        def attempt(address: str, token: str) -> int:
            with TestClient(app, base_url=LOCAL, client=(address, 1)) as client:
                headers = {"Authorization": f"Bearer {token}"}
                return client.get("/api/v1/periodic", headers=headers).status_code

        assert attempt("192.0.2.1", TOKEN) == 200  # the operator's tool, known
        with capture_logs() as logs:
            for n in range(TOTAL_LIMIT):
                assert attempt(f"198.51.100.{n // 5}", "wrong") == 401, n
        assert logs[-1]["event"] == "bearer token refused; every client throttled"
        assert attempt("203.0.113.9", TOKEN) == 429, "a correct guess is not confirmed"
        assert attempt("192.0.2.1", TOKEN) == 200
        clock.advance(WINDOW_MS)
        assert attempt("203.0.113.9", TOKEN) == 200


class TestTokens:
    @pytest.mark.parametrize(
        "body",
        [b'{"token": "\\ud800"}', b'{"token": "\\udcff"}', b'{"token": 7}', b"[1]", b"\xff"],
    )
    def test_an_odd_offer_is_a_clean_401(self, client: TestClient, body: bytes) -> None:
        response = client.post("/login", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 401 and response.json() == {
            "error": "token: wrong or missing"
        }

    def test_a_non_ascii_token_matches_in_json_and_in_a_utf8_header(
        self, hg: Headgate, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HEADGATE_API_TOKEN", "pässwörd")
        with TestClient(create_app(hg), base_url=LOCAL) as client:
            header = {"Authorization": "Bearer pässwörd".encode()}
            assert client.get("/api/v1/periodic", headers=header).status_code == 200
            assert client.post("/login", json={"token": "pässwörd"}).status_code == 200
            assert client.get("/api/v1/periodic").status_code == 200
        # The test client sends every header as UTF-8; the same token in another
        # encoding is other bytes, and no match.
        app = create_app(hg)
        assert _raw_status(app, b"Bearer p\xc3\xa4ssw\xc3\xb6rd") == 200
        assert _raw_status(app, "Bearer pässwörd".encode("latin-1")) == 401

    def test_login_with_no_token_configured_says_so(self, hg: Headgate) -> None:
        with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client:
            response = client.post("/login", json={"token": "anything"})
        assert response.status_code == 400
        assert "no API token is configured" in response.json()["error"]


class TestLoginPage:
    def test_with_no_token_it_says_so_and_what_that_means(self, hg: Headgate) -> None:
        with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client:
            page = client.get("/login").text
        text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
        assert "No token is configured" in text
        assert "anyone who can reach this address can read and change its schedules" in text
        assert "HEADGATE_API_TOKEN" in text and "<form" not in page

    def test_logged_out_it_is_the_form_logged_in_it_says_so_and_offers_logout(
        self, client: TestClient
    ) -> None:
        form = client.get("/login")
        assert form.status_code == 200 and '<form id="login">' in form.text
        assert "Logged in" not in form.text
        _log_in(client)
        page = client.get("/login").text
        text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
        assert "You are logged in to this console until 2024-01-01 12:00:00 UTC." in text
        assert '<form id="login">' not in page and 'class="logout' in page

    def test_a_page_that_needs_the_token_shows_the_form_with_a_401(
        self, client: TestClient
    ) -> None:
        for path in ("/", "/jobs", "/schedules/nightly"):
            response = client.get(path)
            assert response.status_code == 401 and '<form id="login">' in response.text
