"""Every failure becomes a JSON body {"error": "..."} naming the field and the rule.

Bad input is a 4xx and never changes stored state; only a genuine bug can
be a 500, and even then no traceback or backend text reaches the client.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi import routing as fastapi_routing
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from headgate._errors import (
    AdmissionRejected,
    DuplicateJob,
    JobStateConflict,
    NotFound,
    StoreClosed,
    StoreUnavailable,
    ValidationError,
    error_type_of,
)
from headgate._logs import get_logger
from headgate._redact import masked

MAX_BODY_BYTES: Final = 1024 * 1024
_LOGGED_MESSAGE: Final = 500
"""The most characters of an error's message a log line carries."""
_FASTAPI_UNPARSABLE_BODY: Final = "There was an error parsing the body"
"""FastAPI's 400 when its JSON decoder fails with something other than a syntax error."""
log = get_logger("headgate.web")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def request_header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower case) as sent, decoded as latin-1
    (every byte maps to one character), or None."""
    raw = request_header_bytes(scope, name)
    return None if raw is None else raw.decode("latin-1")


def request_header_bytes(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value)
    return None


def error(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: object
) -> JSONResponse:
    return JSONResponse({"error": printable(message), **extra}, status_code=status, headers=headers)


def printable(message: str) -> str:
    """`message` as valid UTF-8: a rejected value quoted in it may hold lone
    surrogates (JSON allows escaping them), which no response can encode."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ValidationError)
    async def _invalid(_: Request, exc: ValidationError) -> Response:
        return error(422, str(exc))

    @app.exception_handler(NotFound)
    async def _missing(_: Request, exc: NotFound) -> Response:
        return error(404, str(exc))

    @app.exception_handler(DuplicateJob)
    async def _duplicate(_: Request, exc: DuplicateJob) -> Response:
        return error(409, str(exc), job_id=exc.job_id)

    @app.exception_handler(JobStateConflict)
    async def _state_conflict(_: Request, exc: JobStateConflict) -> Response:
        return error(409, str(exc))

    @app.exception_handler(AdmissionRejected)
    async def _rejected(_: Request, exc: AdmissionRejected) -> Response:
        return error(429 if exc.reason == "backpressure" else 409, str(exc))

    @app.exception_handler(StoreClosed)
    async def _closed(_: Request, exc: StoreClosed) -> Response:
        return error(503, "the server is shutting down; retry shortly")

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(request: Request, exc: StoreUnavailable) -> Response:
        # The cause goes to the log only (it may name the store's host), masked.
        log.warning(
            "store unavailable",
            path=request.url.path,
            error_type=error_type_of(exc),
            error=masked(str(exc))[:_LOGGED_MESSAGE],
        )
        return error(503, "the store is unavailable; retry shortly")

    @app.exception_handler(RequestValidationError)
    async def _malformed(_: Request, exc: RequestValidationError) -> Response:
        return _request_error(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(sorted(_allowed_methods(request)))
        detail = str(exc.detail)
        if detail == _FASTAPI_UNPARSABLE_BODY:
            detail = "body: could not be read as JSON (nested too deeply, or a number too long)"
        return error(exc.status_code, detail, headers=headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", path=request.url.path)
        return error(500, "internal error; see the server log")


def _allowed_methods(request: Request) -> set[str]:
    """Every method some route serves at this path.

    Starlette's own Allow header names only the first route that matched the
    path; FastAPI registers one route per method, so that list is incomplete.
    The routes of included routers are reached through FastAPI's route
    contexts (newer FastAPI keeps them out of `app.routes`).
    """
    base: str = request.scope.get("root_path", "")
    path: str = request.scope["path"].removeprefix(base) if base else request.scope["path"]
    methods: set[str] = set()
    for route in every_route(request.app):
        pattern = getattr(route, "path_regex", None)
        if pattern is not None and pattern.match(path):
            methods |= set(getattr(route, "methods", None) or ())
    return methods


def every_route(app: FastAPI) -> Iterable[object]:
    """The app's routes, those of included routers among them."""
    contexts: Callable[[Any], Iterable[object]] | None = getattr(
        fastapi_routing, "iter_route_contexts", None
    )
    return app.routes if contexts is None else contexts(app.routes)


def _request_error(exc: RequestValidationError) -> Response:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return error(400, "body: is not valid JSON")
    location = list(first.get("loc", ()))
    if location and location[0] in ("body", "query", "path", "header"):
        location = location[1:]
    # schedules[3].spec: list indexes as Headgate's own validation names them
    field = "".join(
        f"[{part}]" if isinstance(part, int) else f"{'.' if index else ''}{part}"
        for index, part in enumerate(location)
    )
    field = field or "body"
    kind = first.get("type", "")
    if kind == "missing":
        rule = "is required"
    elif kind == "extra_forbidden":
        rule = "is not a known field"
    else:
        rule = str(first.get("msg", "is invalid")).lower()
    return error(422, f"{field}: {rule}")


class BodyLimits:
    """413 for bodies over 1 MiB, 415 for API writes whose body is not JSON."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            await _reply(scope, send, 413, f"body: larger than the {self.limit} byte limit")
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await _reply(scope, send, 413, f"body: larger than the {self.limit} byte limit")
                return
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        is_json = content_type == "application/json" or content_type.endswith("+json")
        if body and scope["path"].startswith(("/api/", "/login")) and not is_json:
            await _reply(scope, send, 415, "body: must be JSON (Content-Type: application/json)")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def _reply(scope: Scope, send: Send, status: int, message: str) -> None:
    payload = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
