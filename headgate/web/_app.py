"""Assemble the ASGI app: API, console, docs, probes, static files, errors, limits,
auth, and the browser-facing guards (Host check, cross-site writes, headers)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from headgate._app import Headgate
from headgate._operator import operator_of
from headgate.web import _api_activity, _api_fleet, _api_flow, _api_jobs, _api_schedules
from headgate.web import _console as console
from headgate.web import _docs as docs
from headgate.web import _history_api as history_api
from headgate.web import _history_pages as history_pages
from headgate.web import _login as login
from headgate.web import _probes as probes
from headgate.web import _scrape as scrape
from headgate.web._attribution import Attribution
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
from headgate.web._forwarded import ForwardedHeaders, trusted_proxies_from
from headgate.web._guard import WriteGuard
from headgate.web._headers import SecurityHeaders, frame_ancestors_directive
from headgate.web._hosts import HostCheck, allowed_hosts_from
from headgate.web._renamed import RenamedPaths
from headgate.web._session import Sessions
from headgate.web._throttle import FailureThrottle

SESSION_SECRET_ENVIRONMENT: Final = "HEADGATE_SESSION_SECRET"


def create_app(
    hg: Headgate,
    *,
    api_token: str | None = None,
    manage_runtime: bool = False,
    allowed_hosts: Iterable[str] | None = None,
    frame_ancestors: Sequence[str] | None = None,
    session_secret: str | None = None,
    forwarded_allow_ips: Iterable[str] | None = None,
) -> FastAPI:
    """The control API (/api/v1, OpenAPI at /openapi.json, Swagger UI at /docs), the
    console (/), the Prometheus metrics (/metrics) and the probes (/healthz, /readyz).

    `api_token` defaults to $HEADGATE_API_TOKEN. With `manage_runtime`, the app
    starts the runtime on startup and stops it (releasing the lease) and closes
    the store on shutdown: only for an app served on its own (`headgate serve`).
    A mounted app's startup and shutdown never run (Starlette runs only the
    outer app's), so a host that mounts it starts and closes `hg` in its own
    lifespan and leaves this False (docs/how-to/fastapi.md).

    `allowed_hosts`: the host names requests may be addressed to besides the
    loopback ones ("*": any, for a host that checks Host itself); defaults to
    $HEADGATE_ALLOWED_HOSTS, comma-separated (`_hosts`). `frame_ancestors`: the
    CSP sources that may frame the console (default: none may; `_headers`).
    `session_secret`: what the console's login sessions are signed with besides
    the token, shared by processes behind one address; defaults to
    $HEADGATE_SESSION_SECRET, else random per app (`_session`).
    `forwarded_allow_ips`: the proxies (IP addresses, networks, or "*") whose
    X-Forwarded-For, -Proto and -Host are believed; by default none's
    (`_forwarded`). A bad value of any raises ValueError naming it.
    """
    token = (api_token if api_token is not None else os.environ.get("HEADGATE_API_TOKEN")) or None
    hosts = allowed_hosts_from(allowed_hosts)
    frame_ancestors_directive(frame_ancestors)  # refuses a bad source now, not per response
    proxies = trusted_proxies_from(forwarded_allow_ips)
    secret = session_secret or os.environ.get(SESSION_SECRET_ENVIRONMENT) or None
    sessions = (
        Sessions(
            token,
            hg.clock,
            secret.encode("utf-8", "surrogatepass") if secret else None,
            revocations=operator_of(hg),
        )
        if token
        else None
    )

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

    app = _GuardedApp(
        frame_ancestors,
        title="Headgate",
        summary="Durable periodic jobs: schedules, enqueue history, Enqueue now.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by _docs, from local assets
        redoc_url=None,
    )
    app.state.headgate = hg
    app.state.api_token = token
    app.state.sessions = sessions
    app.state.login_throttle = FailureThrottle(hg.clock)
    install_error_handlers(app)
    for noun in (_api_schedules, _api_jobs, _api_fleet, _api_flow, _api_activity):
        app.include_router(noun.router)
    app.include_router(history_api.router)
    app.include_router(scrape.router)
    app.include_router(console.router)
    app.include_router(history_pages.router)
    app.include_router(login.router)
    app.include_router(probes.router)
    app.include_router(docs.router)
    docs.mount_assets(app)
    app.mount(
        "/static", StaticFiles(directory=str(Path(__file__).with_name("static"))), name="static"
    )
    # Outermost last: forwarded headers, a former path renamed (_renamed), Host check,
    # write guard, auth, body limits, who a write is recorded as (_attribution), the
    # routes; the security headers wrap even the error middleware (_GuardedApp).
    app.add_middleware(Attribution, sessions=sessions)
    app.add_middleware(BodyLimits)
    if token and sessions is not None:
        app.add_middleware(
            TokenAuth, token=token, sessions=sessions, throttle=app.state.login_throttle
        )
    if manage_runtime:
        app.add_middleware(WarnIfMountedWithRuntime)
    app.add_middleware(WriteGuard, sessions=sessions)
    app.add_middleware(HostCheck, allowed=hosts)
    app.add_middleware(RenamedPaths)
    app.add_middleware(ForwardedHeaders, trusted=proxies)
    return app


class _GuardedApp(FastAPI):
    """FastAPI with SecurityHeaders outside everything, the error middleware
    included: a 500 carries the headers too (middleware added the usual way
    sits inside the error middleware, which answers with the original send)."""

    def __init__(self, frame_ancestors: Sequence[str] | None, **settings: Any) -> None:
        self._frame_ancestors = frame_ancestors
        super().__init__(**settings)

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack(), self._frame_ancestors)


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
