"""The HTTP server of `headgate serve`: uvicorn, on the sockets `_serving` bound,
with deadlines for slow clients.

Slow clients. uvicorn closes an idle keep-alive connection after
`timeout_keep_alive`, but that timer runs only between requests, from the end
of a response, and the first byte received cancels it: a connection that never
completes its headers, or trickles a body a byte at a time, is held open for
ever, and a few hundred of them (slow loris) take every slot `limit_concurrency`
allows, so everyone else gets 503. The same holds the other way: a client that
asks for a large file and never reads it leaves its response waiting, for ever,
for room in the connection's buffers. ASGI middleware cannot help: the app is
called only once the headers are complete, and its `send` simply waits. So the
HTTP protocol itself carries the deadlines (`SlowClientGuard`, uvicorn's
httptools protocol with timers; httptools parses in C, where h11's Python parser
cost the server a third of a plain request): a request's headers must be complete within
`header_timeout_s` of the connection being ready for them (opened, or done with
the previous request), and its body within `body_timeout_s` of its headers; and
a response may wait on its client, while the client leaves what was sent unread
(the transport's buffer full: asyncio has paused writing), `send_timeout_s` in
all. Past any of them the connection is closed (aborted, when data it was sent
is still unread: a graceful close would wait for the client to read it).
Nothing else times a request: a slow handler is the app's business, and a long
response to a client that keeps reading it is served to the end.
`limit_concurrency` is the connection limit: past it the protocol answers 503,
and the deadlines bound how long any connection can hold its slot.

The answers the server makes itself, before the app (400 for a request it
cannot parse, 503 past the connection limit), carry the headers the app's
own have (`headers`, from `web._headers.answer_headers`: nosniff, no framing,
a CSP that runs nothing), which uvicorn's own do not.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from headgate._logs import STDERR, MaskSecrets
from headgate._serving import BACKLOG, ClientLimits

__all__ = ["SlowClientGuard", "guard_for", "guard_uvicorn_lines", "serve"]

KEEP_ALIVE_S: Final = 5
"""How long an idle keep-alive connection stays open between requests (uvicorn's)."""
UVICORN_LOGGERS: Final = ("uvicorn", "uvicorn.error", "uvicorn.access")


def serve(
    app: Any,
    sockets: list[socket.socket],
    limits: ClientLimits,
    on_started: Callable[[], None],
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Serve `app` on `sockets` until SIGTERM or SIGINT (uvicorn's graceful
    shutdown); `on_started` once it accepts connections. `headers` go on the
    answers the server makes itself (see the module docstring)."""
    config = uvicorn.Config(
        app,
        http=guard_for(limits, headers),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=KEEP_ALIVE_S,
        # Forwarded headers are the app's to believe, from the proxies it is told
        # of (web._forwarded); uvicorn's own would believe them from 127.0.0.1.
        proxy_headers=False,
        backlog=BACKLOG,
        lifespan="on",
        log_level="warning",
    )
    guard_uvicorn_lines()
    _Server(config, on_started).run(sockets=sockets)


def guard_uvicorn_lines() -> None:
    """uvicorn's own lines (an exception it caught, a refused request) are rendered
    by the handlers its config set up: masked there, as Headgate's are, and
    written to stderr through the one writer every line there goes through."""
    for name in UVICORN_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(MaskSecrets())
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
                handler.setStream(STDERR)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            self._on_started()


class SlowClientGuard(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request's headers
    or body are not complete in time, or whose client leaves its response unread
    too long (see the module docstring).

    The phase a connection is in follows the parser's callbacks: waiting for a
    request's headers from the moment the connection is ready for one (opened,
    or done answering the one before) to their end; for its body from then to
    the body's end (the app may already run: it reads the body as it comes);
    neither while the app has its turn (a request pipelined meanwhile is timed
    once the answer before it is complete, as a connection read one request at
    a time would). Each change of phase replaces the one timer; the timer, on
    firing, closes the transport, which ends a request being read as a client
    disconnect would.

    The send clock is separate: it runs while asyncio has paused writing (the
    client is not taking what it was sent), stops when writing resumes, and
    adds up over a request's response (from its headers' end to the next
    request's); past `send_timeout_s` in all the transport is aborted, which
    wakes the app's waiting `send` as a disconnect.
    """

    limits: ClassVar[ClientLimits] = ClientLimits()
    answer_headers: ClassVar[tuple[tuple[bytes, bytes], ...]] = ()

    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: str | None = None
    _parsing: str | None = None
    """What the parser waits for within a request it has begun: "headers", "body",
    or None (no request begun, or the last one complete)."""
    _send_deadline: asyncio.TimerHandle | None = None
    _stalled_since: float | None = None
    _stalled_s: float = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's own limit check answers with a 503 of its own, without the
        # headers: it is off, and on_headers_complete makes the same check.
        self.limit_concurrency = None
        self._app = self.app

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsing = "headers"

    def on_headers_complete(self) -> None:
        # uvicorn's check, this connection counted as it counts it, made before
        # uvicorn starts the app it is given for the request.
        limit = self.limits.max_connections
        busy = len(self.connections) >= limit or len(self.tasks) >= limit
        self.app = self._busy if busy else self._app
        self._parsing = "body"
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._parsing = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    async def _busy(self, scope: Any, receive: Any, send: Any) -> None:
        self.logger.warning("Exceeded concurrency limit.")
        body = b"Service Unavailable"
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    *self.answer_headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def send_400_response(self, msg: str) -> None:
        """uvicorn's, with the answer headers."""
        body = msg.encode("ascii")
        headers = [
            *self.server_state.default_headers,
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *self.answer_headers,
        ]
        head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
        self.transport.write(STATUS_LINE[400] + head + b"\r\n" + body)
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled_since is not None or self.transport.is_closing():
            return
        self._stalled_since = self.loop.time()
        remaining = max(0.0, self.limits.send_timeout_s - self._stalled_s)
        self._send_deadline = self.loop.call_later(remaining, self._send_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_send_clock()

    def handle_websocket_upgrade(self) -> None:
        self._cancel()  # the connection is the WebSocket protocol's from here on
        self._stop_send_clock()
        self._waiting_for = "upgrade"
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self._stop_send_clock()
        super().connection_lost(exc)

    def _phase(self) -> str | None:
        if self._parsing == "body":
            return "body"
        answering = self.cycle is not None and not self.cycle.response_complete
        if answering or self.pipeline:
            return None  # the app's turn
        return "headers"

    def _follow(self) -> None:
        if self._waiting_for == "upgrade":
            return
        waiting_for = self._phase()
        if waiting_for == self._waiting_for:
            return
        if self._waiting_for == "headers":
            self._stalled_s = 0.0  # a new request: its response gets the whole send time
        self._cancel()
        self._waiting_for = waiting_for
        if waiting_for is None or self.transport.is_closing():
            return
        timeout = (
            self.limits.header_timeout_s if waiting_for == "headers" else self.limits.body_timeout_s
        )
        self._deadline = self.loop.call_later(timeout, self._expired)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _stop_send_clock(self) -> None:
        if self._stalled_since is not None:
            self._stalled_s += self.loop.time() - self._stalled_since
            self._stalled_since = None
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # close() would wait for the client to read it
        elif not self.transport.is_closing():
            self.transport.close()

    def _send_expired(self) -> None:
        self._send_deadline = None
        self.transport.abort()


def guard_for(
    limits: ClientLimits, headers: Sequence[tuple[bytes, bytes]] = ()
) -> type[SlowClientGuard]:
    """The protocol class uvicorn instantiates per connection, with these limits,
    and these headers on the answers it makes itself."""
    attributes = {"limits": limits, "answer_headers": tuple(headers)}
    return type("SlowClientGuard", (SlowClientGuard,), attributes)
