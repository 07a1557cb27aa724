"""What every response tells the browser: no sniffing, no referrer to other
sites, no framing (unless the host names who may frame it), and for HTML pages a
CSP that runs the console's own files only; every page keeps to it (no inline
script, style or handler), /docs included."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, JobContext
from headgate.web import create_app
from tests.web.conftest import LOCAL

CONSOLE_CSP = (
    "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
OTHER_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "style attribute": re.compile(r"<[^>]+\sstyle=", re.I),
    "event handler": re.compile(r"<[^>]+\son[a-z]+=", re.I),
    "javascript: URL": re.compile(r"""(?:href|src|action)=["']?\s*javascript:""", re.I),
}


def _filled(hg: Headgate) -> dict[str, str]:
    """A store with a page of every kind to render: the paths of those pages."""

    @hg.handler("report.build", max_attempts=1)
    def build(job: JobContext) -> None:
        raise RuntimeError("disk full")

    hg.schedules.put("nightly", spec="@every:60000", kind="report.build", payload={"a": 1})
    job = hg.enqueue("report.build", {"n": 1})
    hg.drain()
    hg.quarantine.add(hg.quarantine.fingerprint("poison", {}), "by hand")
    hg.schedules.put("gone", spec="@every:60000", kind="k")
    hg.schedules.delete("gone")
    return {
        "schedules": "/",
        "schedules searched": "/?search=nigh",
        "schedules searched for nothing": "/?search=%00",
        "new schedule": "/schedules/new",
        "schedule": "/schedules/nightly",
        "edit": "/schedules/nightly/edit",
        "deleted schedule": "/schedules/gone",
        "missing schedule": "/schedules/nothing",
        "jobs": "/jobs",
        "bad filter": "/jobs?state=bogus",
        "job": f"/jobs/{job.id}",
        "workers": "/workers",
        "quarantine": "/quarantine",
        "bad cursor": "/quarantine?cursor=x",
        "login": "/login",
    }


@pytest.fixture
def token_client(hg: Headgate) -> Iterator[TestClient]:
    with TestClient(create_app(hg, api_token="s3cret"), base_url=LOCAL) as client:
        yield client


def _assert_guarded(response_headers: object, csp: str, where: str) -> None:
    headers = dict(response_headers)  # type: ignore[call-overload]
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("referrer-policy") == "same-origin", where
    assert headers.get("x-frame-options") == "DENY", where
    assert headers.get("content-security-policy") == csp, where


def test_every_console_page_gets_the_console_policy_and_keeps_to_it(
    client: TestClient, hg: Headgate
) -> None:
    for name, path in _filled(hg).items():
        response = client.get(path)
        assert response.headers["content-type"].startswith("text/html"), name
        _assert_guarded(response.headers, CONSOLE_CSP, name)
        for what, pattern in INLINE.items():
            found = pattern.search(response.text)
            assert found is None, f"{name} ({path}) has an {what}: {found and found.group(0)}"


def test_the_login_pages_keep_to_the_policy_too(token_client: TestClient) -> None:
    pages = {"asked for the token": token_client.get("/"), "login": token_client.get("/login")}
    assert token_client.post("/login", json={"token": "s3cret"}).status_code == 200
    pages["logged in"] = token_client.get("/login")
    pages["console, logged in"] = token_client.get("/")
    for name, response in pages.items():
        _assert_guarded(response.headers, CONSOLE_CSP, name)
        for what, pattern in INLINE.items():
            assert pattern.search(response.text) is None, f"{name} has an {what}"


def test_pages_are_not_stored_by_any_cache_as_they_carry_the_csrf_token(
    token_client: TestClient,
) -> None:
    assert token_client.post("/login", json={"token": "s3cret"}).status_code == 200
    for path in ("/", "/login", "/docs", "/jobs"):
        response = token_client.get(path)
        assert 'name="csrf-token"' in response.text, path
        assert response.headers["cache-control"] == "no-store", path
    assert "cache-control" not in token_client.get("/static/console.js").headers


def test_api_answers_are_not_stored_by_any_cache_as_they_carry_payloads(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("nightly", spec="@every:60000", kind="report", payload={"token": "s3cret"})
    for path in ("/api/v1/periodic/nightly", "/api/v1/periodic", "/api/v1/periodic/ghost"):
        assert client.get(path).headers["cache-control"] == "no-store", path


def test_docs_get_a_policy_swagger_ui_runs_under_with_its_start_from_a_file(
    client: TestClient,
) -> None:
    response = client.get("/docs")
    _assert_guarded(response.headers, DOCS_CSP, "/docs")
    for what, pattern in INLINE.items():
        assert pattern.search(response.text) is None, f"/docs has an {what}"
    start = client.get("/static/docs.js")
    assert start.status_code == 200 and "SwaggerUIBundle(" in start.text


def test_every_other_response_gets_the_headers_and_no_policy_to_run_anything(
    client: TestClient, token_client: TestClient, hg: Headgate, monkeypatch: pytest.MonkeyPatch
) -> None:
    responses = {
        "API": client.get("/api/v1/periodic"),
        "API 404": client.get("/api/v1/periodic/nothing"),
        "API 422": client.get("/api/v1/periodic?limit=0"),
        "413": client.post("/api/v1/jobs", content=b"x" * (1024 * 1024 + 1)),
        "405": client.post("/api/v1/periodic"),
        "cross-site 403": client.post("/api/v1/jobs", headers={"Origin": "http://evil.example"}),
        "Host 400": client.get("/api/v1/periodic", headers={"Host": "evil.example"}),
        "401": token_client.get("/api/v1/periodic"),
        "openapi.json": client.get("/openapi.json"),
        "metrics": client.get("/metrics"),
        "healthz": client.get("/healthz"),
        "readyz": client.get("/readyz"),
        "static": client.get("/static/console.js"),
        "swagger asset": client.get("/static/swagger-ui/swagger-ui.css"),
        "static 404": client.get("/static/nothing.js"),
    }

    def broken(*_: object, **__: object) -> object:
        raise RuntimeError("a bug")

    monkeypatch.setattr(hg.schedules, "list", broken)
    with TestClient(
        create_app(hg, api_token=""), base_url=LOCAL, raise_server_exceptions=False
    ) as c:
        responses["500"] = c.get("/api/v1/periodic")
    assert responses["500"].status_code == 500
    for name, response in responses.items():
        _assert_guarded(response.headers, OTHER_CSP, name)


def test_a_host_that_embeds_the_console_names_who_may_frame_it(hg: Headgate) -> None:
    cases = {
        ("https://portal.example", "https://*.corp.example"): None,
        ("'self'",): "SAMEORIGIN",
    }
    for sources, frame_options in cases.items():
        app = create_app(hg, api_token="", frame_ancestors=list(sources))
        with TestClient(app, base_url=LOCAL) as client:
            for path in ("/", "/api/v1/periodic"):
                headers = client.get(path).headers
                policy = headers["content-security-policy"]
                assert policy.endswith("; frame-ancestors " + " ".join(sources)), policy
                assert headers.get("x-frame-options") == frame_options


@pytest.mark.parametrize(
    "sources",
    [
        ["https://portal.example; script-src *"],
        ["https://portal.example\r\nSet-Cookie: x=1"],
        ["https://a.example https://b.example"],
        [""],
        [],
        "https://portal.example",
    ],
)
def test_a_frame_ancestor_that_would_break_the_header_is_refused_at_start(
    hg: Headgate, sources: object
) -> None:
    with pytest.raises(ValueError, match="frame_ancestors"):
        create_app(hg, api_token="", frame_ancestors=sources)  # type: ignore[arg-type]
