"""Where `headgate serve` listens, and what it allows a client: it says it is
serving only once it is, a port in use is one line, and connections that never
finish their headers or trickle a body are closed by their deadlines while
everyone else is answered.

The slow clients are real sockets against a real server: `headgate serve` as a
process (with the short timeouts its flags set), and uvicorn in this process
with Headgate's protocol, for what is easier to watch from inside.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import socket
import subprocess
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn

from headgate import Headgate
from headgate._http_server import guard_for
from headgate._serving import ClientLimits, listening_sockets
from headgate.web._headers import answer_headers
from tests.web.serving import headgate_command, server_environment, serving_printed

pytestmark = pytest.mark.processes

SLACK_S = 3.0
"""How late past its deadline a close may be seen on a busy two-core machine."""


def _get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


# where it listens --------------------------------------------------------------


def test_the_serving_line_comes_once_the_server_answers(tmp_path: Path) -> None:
    with serving_printed(tmp_path) as served:
        port = int(served.base.rsplit(":", 1)[1])
        assert port != 0, "--port 0 prints the port it was given"
        # No retry: by the time the line is out, the server accepts and answers.
        assert _get(f"{served.base}/healthz", timeout=5)[0] == 200


def test_a_port_in_use_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [headgate_command(), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=server_environment(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: --host/--port: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [], "no store was opened, nothing was started"


def test_a_sigterm_while_the_runtime_starts_stops_it_cleanly(tmp_path: Path) -> None:
    """The runtime starts before uvicorn takes the signals: a stop asked for then
    is kept for after the start, and the lease is released, never left to expire."""
    (tmp_path / "slow_start.py").write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from headgate import Headgate
            hg = Headgate("sqlite:///{tmp_path}/h.db")
            started = hg.start

            def slow_start(*args, **kwargs):
                print("starting", file=sys.stderr, flush=True)
                time.sleep(2)
                return started(*args, **kwargs)

            hg.start = slow_start
            """
        )
    )
    environment = server_environment()
    environment["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{environment['PYTHONPATH']}"
    process = subprocess.Popen(
        [headgate_command(), "serve", "--port", "0", "--app", "slow_start:hg"],
        cwd=tmp_path,
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        lines = []
        while "starting" not in (line := process.stderr.readline()):
            assert line, f"serve ended before starting: {''.join(lines)}"
            lines.append(line)
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read()
        assert process.wait(timeout=60) == 0, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert "headgate: stopped; scheduler lease released" in rest
    assert "serving" not in rest and "Traceback" not in rest
    with Headgate(f"sqlite:///{tmp_path}/h.db") as hg:
        assert hg.runtime.lease() is None, "the lease was released"


def test_every_address_a_host_names_is_listened_on() -> None:
    sockets = listening_sockets("localhost", 0)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and ports != {0}, "one port, the same on every address"
        for sock in sockets:
            with socket.create_connection(sock.getsockname()[:2], timeout=5):
                pass
    finally:
        for sock in sockets:
            sock.close()


# slow clients ------------------------------------------------------------------


@dataclass
class SlowClients:
    """Connections that each hold back part of a request, watched until closed."""

    address: tuple[str, int]
    opened_at: float = field(default_factory=time.monotonic)
    headers: list[socket.socket] = field(default_factory=list)
    bodies: list[socket.socket] = field(default_factory=list)
    closed_after: dict[int, float] = field(default_factory=dict)
    """fileno -> seconds from opening to the server's close."""

    def open_headers(self, count: int) -> None:
        """Headers begun, never finished: a byte of them now and then."""
        for _ in range(count):
            sock = socket.create_connection(self.address, timeout=5)
            sock.sendall(b"GET /api/v1/periodic HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            self.headers.append(sock)

    def open_bodies(self, count: int) -> None:
        """Complete headers announcing 100 kB, the body trickled a byte at a time."""
        for _ in range(count):
            sock = socket.create_connection(self.address, timeout=5)
            sock.sendall(
                b"PUT /api/v1/periodic/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
            )
            self.bodies.append(sock)

    def watch(self, until_s: float) -> None:
        """Trickle and wait until every connection is closed, or `until_s` passes."""
        selector = selectors.DefaultSelector()
        for sock in self.headers + self.bodies:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        next_trickle = 0.0
        while len(self.closed_after) < len(self.headers) + len(self.bodies):
            now = time.monotonic()
            if now - self.opened_at > until_s:
                break
            if now >= next_trickle:
                next_trickle = now + 0.2
                for sock in self.headers + self.bodies:
                    if sock.fileno() not in self.closed_after:
                        try:
                            sock.send(b"x" if sock in self.headers else b" ")
                        except OSError:
                            self._closed(selector, sock)
            for key, _ in selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if data == b"":
                    self._closed(selector, sock)
        selector.close()

    def _closed(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        if sock.fileno() not in self.closed_after:
            self.closed_after[sock.fileno()] = time.monotonic() - self.opened_at
            selector.unregister(sock)

    def close_times(self, group: list[socket.socket]) -> list[float]:
        return [self.closed_after.get(sock.fileno(), float("inf")) for sock in group]

    def close(self) -> None:
        for sock in self.headers + self.bodies:
            sock.close()


@contextmanager
def slow_clients(address: tuple[str, int]) -> Iterator[SlowClients]:
    clients = SlowClients(address)
    try:
        yield clients
    finally:
        clients.close()


def _non_reader(address: tuple[str, int], path: str) -> socket.socket:
    """A connection that asks for `path` and never reads the answer; its receive
    buffer kept small, so the server's fill at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.settimeout(5)
    sock.connect(address)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def _holding_readers(address: tuple[str, int], path: str, count: int) -> list[socket.socket]:
    """`count` non-readers each answered 200 (seen by peeking, which takes nothing
    from the buffers): their connections hold a slot each. One answered 503 (the
    server still counting a connection just closed) is opened again."""
    readers: list[socket.socket] = []
    deadline = time.monotonic() + 30
    while len(readers) < count:
        assert time.monotonic() < deadline, "the server never answered the non-readers"
        sock = _non_reader(address, path)
        if sock.recv(12, socket.MSG_PEEK | socket.MSG_WAITALL) == b"HTTP/1.1 200":
            readers.append(sock)
        else:
            sock.close()
            time.sleep(0.1)
    return readers


def test_serve_closes_slow_clients_and_answers_the_rest(tmp_path: Path) -> None:
    header_s, body_s = 1.5, 3.0
    with serving_printed(
        tmp_path, "--header-timeout", str(header_s), "--body-timeout", str(body_s)
    ) as served:
        host, port = served.base.removeprefix("http://").rsplit(":", 1)
        with slow_clients((host, int(port))) as clients:
            clients.open_headers(50)
            clients.open_bodies(50)
            started = time.monotonic()
            assert _get(f"{served.base}/api/v1/periodic")[0] == 200, "answered meanwhile"
            assert time.monotonic() - started < header_s, "answered before any slow one closed"
            clients.watch(until_s=body_s + 2 * SLACK_S)
            header_closes = clients.close_times(clients.headers)
            body_closes = clients.close_times(clients.bodies)
        assert _get(f"{served.base}/healthz")[0] == 200
        served.process.terminate()
        assert served.process.wait(timeout=30) == 0
        output = served.output()
    assert min(header_closes) >= header_s * 0.9, "not closed before the header deadline"
    assert max(header_closes) <= header_s + SLACK_S, header_closes
    assert min(body_closes) >= body_s * 0.9, "a body gets its own deadline"
    assert max(body_closes) <= body_s + SLACK_S, body_closes
    assert "Traceback" not in output, output


def test_serve_frees_the_slots_of_clients_that_never_read_a_large_file(tmp_path: Path) -> None:
    """The attack of issue 36: unauthenticated clients ask for Swagger UI's bundle
    (1.5 MB; its 1.9 MB source map is no longer served) and never read it. Every
    request, the probes' too, gets 503 only until the send deadline closes them."""
    send_s = 2.0
    flags = ("--send-timeout", str(send_s), "--max-connections", "4")
    with serving_printed(tmp_path, *flags) as served:
        host, port = served.base.removeprefix("http://").rsplit(":", 1)
        assets = f"{served.base}/static/swagger-ui"
        assert _get(f"{assets}/swagger-ui-bundle.js.map")[0] == 404
        _assert_guarded(_raw((host, int(port)), b"\x16\x03\x01 not HTTP\r\n\r\n"), 400)
        opened = time.monotonic()
        readers = _holding_readers((host, int(port)), "/static/swagger-ui/swagger-ui-bundle.js", 3)
        try:
            probe = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            _assert_guarded(_raw((host, int(port)), probe), 503)  # every slot is held
            while (status := _get(f"{served.base}/healthz")[0]) != 200:
                assert status == 503
                assert time.monotonic() - opened < send_s + 2 * SLACK_S, "slots held past it"
                time.sleep(0.1)
            assert time.monotonic() - opened >= send_s * 0.9, "freed before the send deadline"
        finally:
            for sock in readers:
                sock.close()
        served.process.terminate()
        assert served.process.wait(timeout=30) == 0
        assert "Traceback" not in served.output(), served.output()


# the protocol, in this process -------------------------------------------------


BIG_BYTES = 16 * 1024 * 1024
"""/big's answer: far more than a connection's buffers hold."""
CHUNK = b"x" * 65536


async def _app(scope: dict[str, object], receive: object, send: object) -> None:
    """Reads the body, then sleeps as long as the query says: a slow handler;
    /big answers BIG_BYTES, a chunk at a time, as a static file is sent."""
    assert scope["type"] == "http"
    assert callable(receive) and callable(send)
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    if scope["path"] == "/big":
        length = str(BIG_BYTES).encode()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]}
        )
        for _ in range(BIG_BYTES // len(CHUNK)):
            await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    query = bytes(scope["query_string"]).decode()  # type: ignore[arg-type]
    await asyncio.sleep(float(query or 0))
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@dataclass
class Guarded:
    address: tuple[str, int]
    server: uvicorn.Server

    def wait_for_connections(self, count: int, within: float = 10) -> None:
        """Until the server holds `count` connections, at least, or (0) none."""
        deadline = time.monotonic() + within
        while not self._holds(count):
            held = len(self.server.server_state.connections)
            assert time.monotonic() < deadline, f"the server holds {held}, not {count}"
            time.sleep(0.01)

    def _holds(self, count: int) -> bool:
        held = len(self.server.server_state.connections)
        return held == 0 if count == 0 else held >= count


@contextmanager
def guarded_server(limits: ClientLimits) -> Iterator[Guarded]:
    """uvicorn with Headgate's protocol, on a thread, on an ephemeral port."""
    sockets = listening_sockets("127.0.0.1", 0)
    config = uvicorn.Config(
        _app,
        http=guard_for(limits, answer_headers()),
        limit_concurrency=limits.max_connections,
        lifespan="off",
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield Guarded(sockets[0].getsockname()[:2], server)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        for sock in sockets:
            sock.close()


def _request(
    address: tuple[str, int], query: str = "", timeout: float = 10, path: str = "/"
) -> bytes:
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(
            f"GET {path}?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        )
        return b"".join(iter(lambda: sock.recv(1 << 20), b""))


def _closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closes `sock`; fails past `seconds`."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        pytest.fail(f"still open after {seconds} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_a_slow_handler_is_never_cut_off() -> None:
    """The deadlines are for receiving a request, not for answering it."""
    with guarded_server(ClientLimits(header_timeout_s=0.3, body_timeout_s=0.3)) as guarded:
        response = _request(guarded.address, query="1.0")
    assert response.startswith(b"HTTP/1.1 200") and response.endswith(b"ok")


def test_a_kept_alive_connection_must_finish_its_next_headers_in_time() -> None:
    with (
        guarded_server(ClientLimits(header_timeout_s=0.5, body_timeout_s=5)) as guarded,
        socket.create_connection(guarded.address, timeout=5) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # the next one, begun
        assert _closed_within(sock, 0.5 + SLACK_S) >= 0.4


def test_a_request_pipelined_behind_another_is_timed_from_the_answer_before_it() -> None:
    """The parser reads a request sent before the answer to the one ahead of it:
    its headers are not timed while that one's handler runs (longer than the
    header deadline here), and must be complete within the deadline after."""
    with (
        guarded_server(ClientLimits(header_timeout_s=0.5, body_timeout_s=5)) as guarded,
        socket.create_connection(guarded.address, timeout=5) as sock,
    ):
        first = b"GET /?1.0 HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(first + b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        assert _closed_within(sock, 0.5 + SLACK_S) >= 0.4


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with (
        guarded_server(ClientLimits(header_timeout_s=0.5, body_timeout_s=5)) as guarded,
        socket.create_connection(guarded.address, timeout=5) as sock,
    ):
        assert _closed_within(sock, 0.5 + SLACK_S) >= 0.4


def test_past_the_connection_limit_requests_get_503_until_slow_ones_are_closed() -> None:
    limits = ClientLimits(header_timeout_s=1.0, body_timeout_s=5, max_connections=5)
    with guarded_server(limits) as guarded, slow_clients(guarded.address) as clients:
        clients.open_headers(5)
        guarded.wait_for_connections(5)
        assert _request(guarded.address).startswith(b"HTTP/1.1 503")
        clients.watch(until_s=1.0 + SLACK_S)
        assert max(clients.close_times(clients.headers)) <= 1.0 + SLACK_S
        assert _request(guarded.address).startswith(b"HTTP/1.1 200")


def test_clients_that_never_read_their_answer_are_closed_at_the_send_deadline() -> None:
    """They hold every slot (503 for everyone) only until the send deadline."""
    limits = ClientLimits(
        header_timeout_s=60, body_timeout_s=60, send_timeout_s=1.0, max_connections=4
    )
    with guarded_server(limits) as guarded:
        readers = [_non_reader(guarded.address, "/big") for _ in range(3)]
        try:
            guarded.wait_for_connections(3)
            opened = time.monotonic()
            assert _request(guarded.address).startswith(b"HTTP/1.1 503")
            guarded.wait_for_connections(0, within=1.0 + SLACK_S)
            assert time.monotonic() - opened >= 0.8, "not before the send deadline"
            assert _request(guarded.address).startswith(b"HTTP/1.1 200")
        finally:
            for sock in readers:
                sock.close()


def test_a_client_that_reads_a_long_answer_gets_all_of_it() -> None:
    """The send deadline counts only the time the client leaves the answer unread."""
    with guarded_server(ClientLimits(send_timeout_s=1.0)) as guarded:
        response = _request(guarded.address, path="/big")
    assert response.startswith(b"HTTP/1.1 200")
    assert response.endswith(CHUNK) and len(response) > BIG_BYTES


OTHER_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def _raw(address: tuple[str, int], request: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request)
        return b"".join(iter(lambda: sock.recv(1 << 20), b""))


def _assert_guarded(response: bytes, status: int) -> None:
    """`response` has `status` and the headers every answer of the app has."""
    head, *_ = response.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    assert status_line.startswith(f"HTTP/1.1 {status} "), status_line
    headers = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in lines)}
    assert headers["x-content-type-options"] == "nosniff", headers
    assert headers["x-frame-options"] == "DENY", headers
    assert headers["referrer-policy"] == "same-origin", headers
    assert headers["content-security-policy"] == OTHER_CSP, headers


def test_the_answers_the_server_makes_itself_carry_the_security_headers() -> None:
    """A request it cannot parse (400) and one past the connection limit (503)."""
    limits = ClientLimits(header_timeout_s=5, body_timeout_s=5, max_connections=3)
    with guarded_server(limits) as guarded:
        _assert_guarded(_raw(guarded.address, b"NOT HTTP\r\n\r\n"), 400)
        _assert_guarded(
            _raw(guarded.address, b"GET / HTTP/1.1\r\nHost: x\r\nA\x00: b\r\n\r\n"), 400
        )
        with slow_clients(guarded.address) as clients:
            clients.open_headers(3)
            guarded.wait_for_connections(3)
            _assert_guarded(_request(guarded.address), 503)
        assert _request(guarded.address).startswith(b"HTTP/1.1 200"), "the app's own, as it was"


def test_answers_on_a_keep_alive_connection_are_not_held_back_by_nagle() -> None:
    """A response written in two parts (headers, body) to a client that delays its
    ACKs waited ~40 ms with Nagle's algorithm on: asyncio turns it off on every
    connection accepted from these sockets (uvicorn's, each request's)."""
    (sock,) = listening_sockets("127.0.0.1", 0)
    seen: list[int] = []

    async def accept_one() -> None:
        accepted = asyncio.Event()

        def connected(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("socket")
            seen.append(peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            accepted.set()

        server = await asyncio.start_server(connected, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        await asyncio.wait_for(accepted.wait(), 10)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(accept_one())
    assert seen and seen[0] != 0
