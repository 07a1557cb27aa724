"""/docs (Swagger UI) loads nothing from the internet: its assets come from the
package, under a mount's root path and behind the token alike."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.web import create_app
from tests.web.conftest import LOCAL

ASSET = re.compile(r'(?:src|href|data-openapi-url)="([^"]+)"')


def _references(page: str) -> list[str]:
    return ASSET.findall(page)


def test_docs_reference_only_assets_the_app_serves(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert not re.search(r"https?://", page.text), "nothing is loaded from another host"
    references = _references(page.text)
    assert references == [
        "/static/swagger-ui/swagger-ui.css",
        "/static/swagger-ui/favicon-32x32.png",
        "/openapi.json",
        "/static/swagger-ui/swagger-ui-bundle.js",
        "/static/docs.js",
    ]
    script = client.get("/static/swagger-ui/swagger-ui-bundle.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in script.text
    style = client.get("/static/swagger-ui/swagger-ui.css")
    assert style.status_code == 200
    assert style.headers["content-type"].startswith("text/css")
    assert ".swagger-ui" in style.text
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_docs_under_a_mount_and_behind_the_token(hg: Headgate) -> None:
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="s3cret"))
    bearer = {"Authorization": "Bearer s3cret"}
    with TestClient(host, base_url=LOCAL) as client:
        assert client.get("/scheduler/docs").status_code == 401
        page = client.get("/scheduler/docs", headers=bearer)
        assert page.status_code == 200
        references = _references(page.text)
        assert references and all(ref.startswith("/scheduler/") for ref in references)
        for reference in references:
            # The assets are open, as the console's are; the document is not.
            headers = bearer if reference.endswith("openapi.json") else {}
            assert client.get(reference, headers=headers).status_code == 200, reference


def test_only_the_files_the_page_loads_are_served(client: TestClient) -> None:
    """The package's source maps (up to 1.9 MB each) and the bundles the page does
    not load are 404: open to anyone, they were only more to make the server send."""
    for name in (
        "swagger-ui-bundle.js.map",
        "swagger-ui.css.map",
        "swagger-ui-es-bundle.js",
        "swagger-ui.js",
        "index.html",
        "oauth2-redirect.html",
    ):
        response = client.get(f"/static/swagger-ui/{name}")
        assert response.status_code == 404, name
        assert response.headers["x-content-type-options"] == "nosniff"
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert client.get(f"/static/swagger-ui/{name}").status_code == 200, name
