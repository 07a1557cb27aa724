"""Assemble the ASGI app: API, console, docs, probes, static files, errors, limits, auth."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from headgate._app import Headgate
from headgate.web import _api as api
from headgate.web import _console as console
from headgate.web import _docs as docs
from headgate.web import _probes as probes
from headgate.web import _scrape as scrape
from headgate.web._auth import TokenAuth
from headgate.web._errors import (
    ASGIApp,
    BodyLimits,
    Receive,
    Scope,
    Send,
    install_error_handlers,
    log,
)


def create_app(
    hg: Headgate, *, api_token: str | None = None, manage_runtime: bool = False
) -> FastAPI:
    """The control API (/api/v1, OpenAPI at /openapi.json, Swagger UI at /docs), the
    console (/), the Prometheus metrics (/metrics) and the probes (/healthz, /readyz).

    `api_token` defaults to $HEADGATE_API_TOKEN. With `manage_runtime`, the app
    starts the runtime on startup and stops it (releasing the lease) and closes
    the store on shutdown: only for an app served on its own (`headgate serve`).
    A mounted app's startup and shutdown never run (Starlette runs only the
    outer app's), so a host that mounts it starts and closes `hg` in its own
    lifespan and leaves this False (README: "Embed it in a service").
    """
    token = api_token if api_token is not None else os.environ.get("HEADGATE_API_TOKEN") or None

    @asynccontextmanager
    async def lifespan(started: FastAPI) -> AsyncIterator[None]:
        started.state.lifespan_ran = True
        if manage_runtime:
            hg.start()
        try:
            yield
        finally:
            if manage_runtime:
                hg.close()

    app = FastAPI(
        title="Headgate",
        summary="Durable periodic jobs: schedules, enqueue history, Enqueue now.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by _docs, from local assets
        redoc_url=None,
    )
    app.state.headgate = hg
    app.state.api_token = token
    install_error_handlers(app)
    app.include_router(api.router)
    app.include_router(scrape.router)
    app.include_router(console.router)
    app.include_router(probes.router)
    app.include_router(docs.router)
    docs.mount_assets(app)
    app.mount(
        "/static", StaticFiles(directory=str(Path(__file__).with_name("static"))), name="static"
    )
    app.add_middleware(BodyLimits)
    if token:
        app.add_middleware(TokenAuth, token=token)
    if manage_runtime:
        app.add_middleware(WarnIfMountedWithRuntime)
    return app


class WarnIfMountedWithRuntime:
    """Says so, once, when an app that should start the runtime serves requests
    without its startup having run: it was mounted in a host's app, whose
    lifespan alone Starlette runs, so the scheduler never started."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.warned = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.warned:
            self.warned = True
            if not getattr(scope["app"].state, "lifespan_ran", False):
                log.warning(
                    "create_app(manage_runtime=True) is serving without its startup "
                    "(mounted in a host's app, or served with lifespan off), so it never "
                    "starts the runtime; start and close Headgate in the host's lifespan",
                    root_path=scope.get("root_path", ""),
                )
        await self.app(scope, receive, send)
