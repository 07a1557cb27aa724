"""Swagger UI at /docs, from assets shipped in a package (swagger-ui-bundle-v2)
rather than FastAPI's default CDN: a host with no internet access gets a working
page, not a blank one.

The assets are served under /static/, like the console's: open without the
token (they hold nothing of the store's), and found under a mount's root path.
The page and the OpenAPI document it loads stay behind the token. Only the
files the page loads are served (PAGE_ASSETS): the package also ships source
maps and other bundles, 2 MB each, which the page never asks for and which
only gave anyone without the token more to make the server send.

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
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import Scope

from headgate.web._templates import page

ASSETS: Final = "/static/swagger-ui"
PAGE_ASSETS: Final = frozenset({"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"})
"""What templates/docs.html loads from ASSETS; nothing else there is served."""
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


class _PageAssets(StaticFiles):
    """StaticFiles answering 404 for every file but PAGE_ASSETS."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path not in PAGE_ASSETS:
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)


def mount_assets(app: FastAPI) -> None:
    """Serve Swagger UI's files; before the console's /static mount, which would
    otherwise answer for them."""
    app.mount(ASSETS, _PageAssets(directory=str(_assets_directory())), name="swagger-ui")


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
