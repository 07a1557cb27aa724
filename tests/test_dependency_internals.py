"""The dependency internals Headgate relies on, checked so an upgrade that
changes them fails here, loudly, instead of quietly slowing, hanging or
leaving slow clients connected."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import MutableMapping

from hypothesis import given
from hypothesis import strategies as st

from headgate import _json, _structlog_compat

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def test_cpython_still_offers_the_c_encoder_headgate_makes_once() -> None:
    assert _json._canonical_parts is not None, (
        "json.encoder.c_make_encoder is gone or changed: canonical JSON falls back to the "
        "slower public encoder; update headgate/_json.py"
    )


@given(json_values)
def test_the_fast_encoder_writes_exactly_the_canonical_text(value: object) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert _json.canonical_json_of_plain(value) == expected
    assert _json.canonical_json(value) == expected


def test_structlog_still_keeps_its_per_file_write_locks_where_headgate_frees_them() -> None:
    import structlog._output

    assert isinstance(getattr(structlog._output, "WRITE_LOCKS", None), MutableMapping), (
        "structlog._output.WRITE_LOCKS moved: a child forked while a parent thread logged "
        "may hang on its first line; update headgate/_structlog_compat.py"
    )
    assert _structlog_compat.write_locks() is structlog._output.WRITE_LOCKS


def test_a_write_lock_held_at_a_fork_is_released_in_the_child() -> None:
    locks = _structlog_compat.write_locks()
    lock = threading.Lock()
    lock.acquire()
    key = io.StringIO()  # what structlog keys them by: the file
    locks[key] = lock
    try:
        _structlog_compat.release_write_locks_held_at_fork()
        assert not lock.locked()
    finally:
        del locks[key]


def test_uvicorn_still_has_the_httptools_protocol_the_slow_client_guard_extends() -> None:
    import inspect

    import uvicorn
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    from headgate._http_server import guard_for
    from headgate._serving import ClientLimits

    hooks = ("connection_made", "data_received", "on_response_complete", "connection_lost")
    parsing = ("on_message_begin", "on_headers_complete", "on_message_complete")
    flow = ("pause_writing", "resume_writing")
    for name in (*hooks, *parsing, *flow, "handle_websocket_upgrade", "send_400_response"):
        assert callable(getattr(HttpToolsProtocol, name, None)), (
            f"uvicorn's HttpToolsProtocol.{name} is gone: the header, body and send deadlines "
            "of `headgate serve` are no longer armed; update headgate/_http_server.py"
        )
    source = inspect.getsource(HttpToolsProtocol.__init__)
    for attribute in ("self.loop", "self.transport", "self.cycle", "self.pipeline", "self.app"):
        assert attribute in source, f"HttpToolsProtocol no longer sets {attribute}"
    check = inspect.getsource(HttpToolsProtocol.on_headers_complete)
    assert "self.limit_concurrency" in check and "app = self.app" in check, (
        "HttpToolsProtocol.on_headers_complete no longer checks the limit and starts self.app"
    )
    assert STATUS_LINE[400].startswith(b"HTTP/1.1 400 ")
    config = uvicorn.Config(lambda *_: None, http=guard_for(ClientLimits()))
    config.load()
    assert issubclass(config.http_protocol_class, HttpToolsProtocol), "uvicorn ignores http=<class>"
    assert "started" in vars(uvicorn.Server(config)), "Server.started, read after startup()"
