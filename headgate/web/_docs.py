"""Swagger UI at /docs, from assets shipped in a package (swagger-ui-bundle-v2)
rather than FastAPI's default CDN: a host with no internet access gets a working
page, not a blank one.

The assets are served under /static/, like the console's: open without the
token (they hold nothing of the store's), and found under a mount's root path.
The page and the OpenAPI document it loads stay behind the token.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Final

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS: Final = "/static/swagger-ui"
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
    base: str = request.scope.get("root_path", "").rstrip("/")
    return get_swagger_ui_html(
        openapi_url=f"{base}{request.app.openapi_url}",
        title=f"{request.app.title} API",
        swagger_js_url=f"{base}{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{base}{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{base}{ASSETS}/favicon-32x32.png",
    )
