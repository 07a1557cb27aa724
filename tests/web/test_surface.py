"""The rest of the HTTP surface, probed for the same class of fault, on SQLite and
PostgreSQL: no read writes, no page echoes input as markup, no response grants
another origin a read, a refused method names the ones allowed."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.web import create_app
from tests.web.conftest import LOCAL

MARKUP = "<img src=x onerror=alert(1)>\"'"


def _read_routes(app: FastAPI) -> list[str]:
    return sorted(
        route.path
        for route in iter_route_contexts(app.routes)
        if route.path is not None and "GET" in (route.methods or set())
    )


def test_no_read_route_writes(client: TestClient, hg: Headgate) -> None:
    hg.schedules.put("nightly", spec="@every:60000", kind="k")
    job = hg.enqueue("k", {})
    fingerprint = hg.quarantine.fingerprint("k", {})
    values = {"schedule_id": "nightly", "job_id": job.id, "fingerprint": fingerprint}
    routes = _read_routes(client.app)  # type: ignore[arg-type]
    assert "/api/v1/jobs/{job_id}" in routes and "/login" in routes and len(routes) >= 20
    head = hg._core.store.log.head()
    for template in routes:
        path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)
        for method in ("GET", "HEAD"):
            response = client.request(method, path, params={"spec": "@every:1000"})
            assert response.status_code < 500, (method, path)
    assert hg._core.store.log.head() == head


@pytest.mark.parametrize(
    "path",
    [
        "/schedules/{x}",
        "/schedules/{x}/edit",
        "/jobs/{x}",
        "/jobs?kind={x}&queue={x}&schedule_id={x}",
        "/jobs?state={x}",
        "/?cursor={x}",
        "/?search={x}",
        "/quarantine?cursor={x}",
        "/schedules/nightly?cursor={x}",
        "/api/v1/periodic/{x}",
        "/api/v1/spec-preview?spec={x}",
        "/api/v1/jobs?cursor={x}",
        "/api/v1/periodic?search={x}",
        "/schedules/nightly/as-of?as_of={x}",
        "/schedules/{x}/as-of?as_of=0",
        "/schedules/nightly/changes?since={x}",
        "/jobs/{x}/as-of?as_of={x}",
        "/api/v1/periodic/nightly/as-of?as_of={x}",
        "/api/v1/periodic/nightly/changes?until={x}",
    ],
)
def test_input_in_a_page_or_an_error_is_never_markup(
    client: TestClient, hg: Headgate, path: str
) -> None:
    hg.schedules.put("nightly", spec="@every:60000", kind="k")
    response = client.get(path.replace("{x}", quote(MARKUP, safe="")))
    if response.headers["content-type"].startswith("text/html"):
        assert "<img src=x" not in response.text, path  # quoted escaped, or not at all
    else:  # JSON may quote it as it came: never read as HTML, nor run
        assert response.headers["content-type"] == "application/json", path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["content-security-policy"].startswith("default-src 'none'")


def test_no_response_lets_another_origin_read_it(client: TestClient) -> None:
    preflight = client.options(
        "/api/v1/periodic",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "PUT"},
    )
    simple = client.get("/api/v1/periodic", headers={"Origin": "http://evil.example"})
    for response in (preflight, simple):
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


def test_a_refused_method_names_the_allowed_ones_mounted_or_not(hg: Headgate) -> None:
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token=""))
    for app, prefix in ((create_app(hg, api_token=""), ""), (host, "/scheduler")):
        with TestClient(app, base_url=LOCAL) as client:
            for method, path, allowed in (
                ("POST", "/api/v1/periodic", "GET"),
                ("POST", "/api/v1/periodic/nightly", "DELETE, GET, PATCH, PUT"),
                ("GET", "/api/v1/jobs/x/cancel", "POST"),
                ("DELETE", "/", "GET"),
            ):
                response = client.request(method, f"{prefix}{path}")
                assert response.status_code == 405, (prefix, method, path)
                assert response.headers["allow"] == allowed, (prefix, method, path)
