"""Swagger UI at /docs, from assets shipped in a package (swagger-ui-bundle-v2)
rather than FastAPI's default CDN: a host with no internet access gets a working
page, not a blank one.

The assets are served under /static/, like the console's: open without the
token (they hold nothing of the store's), and found under a mount's root path.
The page and the OpenAPI document it loads stay behind the token.

The page is the app's own template rather than FastAPI's, whose start-up script
is inline: ours is a file (static/docs.js), so the page runs under a CSP that
allows no inline script (DOCS_POLICY: Swagger UI's stylesheet draws its icons
from data: URLs, hence img-src).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Final

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from headgate.web._templates import page

ASSETS: Final = "/static/swagger-ui"
DOCS_POLICY: Final = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'"
)
router = APIRouter(include_in_schema=False)


def _assets_directory() -> Path:
    """Where swagger-ui-bundle-v2 keeps the files. Looked up at run time: the
    package ships no type information, and a static import would make every
    host that type-checks its own code against Headgate (py.typed) report it."""
    return Path(str(importlib.import_module("swagger_ui_bundle").swagger_ui_path))


def mount_assets(app: FastAPI) -> None:
    """Serve Swagger UI's files; before the console's /static mount, which would
    otherwise answer for them."""
    app.mount(ASSETS, StaticFiles(directory=str(_assets_directory())), name="swagger-ui")


@router.get("/docs")
def docs(request: Request) -> HTMLResponse:
    response = page(
        request,
        "docs.html",
        title=f"{request.app.title} API",
        assets=ASSETS,
        openapi_url=request.app.openapi_url,
    )
    response.headers["Content-Security-Policy"] = DOCS_POLICY
    return response
