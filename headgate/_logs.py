"""Headgate's log lines: structlog events, and where they go.

The library never configures logging; the host decides. Every module logs
through `get_logger`, which follows the host:

* a host that configured structlog gets Headgate's lines through its own
  structlog configuration (processors, renderer, level), as any structlog
  logger would;
* otherwise the lines go to the standard library logger of the same name
  (`headgate`, `headgate.scheduler`, `headgate.web`), rendered as
  `event key=value ...`, so the host's stdlib levels and handlers apply
  (`uvicorn --log-level warning`, `logging.basicConfig(level=logging.INFO)`).
  With no logging configured at all, Python's last-resort handler prints
  warnings and errors to stderr, and the one line per tick attempt (INFO)
  stays quiet, as with any well-behaved library.

`headgate serve` is an application, so it does configure logging:
`configure_logging` below. Tracebacks are rendered plainly (never with
frames' local variables, which hold job payloads).

No line carries a password (`_redact`): Headgate masks its lines' text and
fields before they leave it, whichever way they go; where it renders the
lines itself (`configure_logging`, and the stdlib path's exceptions) it masks
what it renders, tracebacks included, so a store URL that reaches a line by a
path nobody foresaw (a driver's message inside an exception) is masked too.

No line carries a terminal control either: a field holds what a request sent
(the path a cross-site write named, a key), and an escape sequence or a bidi
override in it would reach the operator's terminal, or a newline forge a line.
Every character that is not printable is escaped (`\\x1b`, `\\u202e`, `\\n`) in
every field of every line, in the same places the passwords are masked; a
rendered traceback keeps its line breaks.

One writer to stderr (`STDERR`): `headgate serve`'s own lines (`say`), its log
lines, uvicorn's and any other library's last-resort warnings all go through
it, each line whole in one write under one lock. `print` writes a line and its
end in two calls, between which another thread's line could land (a fresh
clone's test run read `serving ... on http://...:46615/{"term": 1, ...`).
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from collections.abc import MutableMapping
from typing import Any, Final, TextIO, cast

import structlog

# structlog's writers keep a lock per file, which a fork must not leave held.
from headgate import _structlog_compat  # noqa: F401 (registers itself)
from headgate._forksafe import renew_in_forked_children
from headgate._redact import MASK, masked

__all__ = [
    "STDERR",
    "MaskSecrets",
    "configure_logging",
    "escape_unprintable",
    "escaped",
    "get_logger",
    "mask_secrets",
    "say",
]


class LineWriter(io.TextIOBase):
    """sys.stderr (whichever it is at the time: a test's capture, a host's
    redirect) written whole: each `write` in one call and flushed, under a lock
    every writer shares. Give it whole lines (`say`, a handler's record, a
    structlog WriteLogger's line with its end)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        renew_in_forked_children(self)

    def write(self, text: str) -> int:
        with self._lock:
            stream = sys.stderr
            written = stream.write(text)
            stream.flush()
            return written

    def flush(self) -> None:
        with self._lock:
            sys.stderr.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return sys.stderr.isatty()

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # a parent thread may have held it at the fork


STDERR: Final = LineWriter()


def say(line: str) -> None:
    """One line to stderr, whole, in one write (see the module)."""
    STDERR.write(f"{line}\n")


_RENDER: Final = structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
"""`event key=value ...` for a stdlib record's message; the record carries the
exception itself, so the host's handlers (a formatter, Sentry) render it."""


_MULTILINE_FIELDS: Final = frozenset({"exception", "stack"})
"""Rendered tracebacks (format_exc_info's, stack_info's): their line breaks are kept."""


def escaped(text: str, keep: str = "") -> str:
    """`text` with every character that is not printable (controls, C1, bidi
    overrides, line breaks) escaped as Python writes it (`\\x1b`, `\\u202e`),
    but those in `keep`."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def escape_unprintable(_logger: object, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: every field with its unprintable characters escaped
    (after `format_exc_info`, so the rendered traceback is too, its lines kept)."""
    for key, value in event_dict.items():
        keep = "\n" if key in _MULTILINE_FIELDS else ""
        event_dict[key] = _escaped_value(value, keep)
    return event_dict


def _escaped_value(value: object, keep: str = "") -> object:
    if isinstance(value, str):
        return escaped(value, keep)
    if isinstance(value, dict):
        return {_escaped_value(k): _escaped_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped_value(item) for item in value]
    return value  # numbers, None; anything else mask_secrets made its repr, a str


class MaskSecrets(logging.Filter):
    """A stdlib filter that masks passwords in a record's message and in its
    exception's rendering (which the formatter then prints as it is), and
    escapes their unprintable characters but line breaks and tabs (a message
    of uvicorn's, a traceback, may span lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = escaped(masked(record.getMessage()), keep="\n\t")
        record.args = None
        if record.exc_info and not record.exc_text:
            rendered = _FORMATTER.formatException(record.exc_info)
            record.exc_text = escaped(masked(rendered), keep="\n")
        if record.stack_info:
            record.stack_info = escaped(masked(record.stack_info), keep="\n")
        return True


_FORMATTER: Final = logging.Formatter()
_MASK_SECRETS: Final = MaskSecrets()


def mask_secrets(_logger: object, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """A structlog processor: every field with its passwords masked (after
    `format_exc_info`, so the rendered traceback is masked too)."""
    for key, value in event_dict.items():
        event_dict[key] = MASK if _is_password_field(key) else _masked_value(value)
    return event_dict


def _masked_value(value: object) -> object:
    if isinstance(value, str):
        return masked(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: MASK if _is_password_field(k) else _masked_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked_value(item) for item in value]
    return masked(repr(value))  # what a renderer would print: an exception, an object


def _is_password_field(key: object) -> bool:
    return isinstance(key, str) and key.lower().endswith("password")


class HeadgateLogger:
    """A logger that goes where the host sends logs (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._configured = structlog.get_logger(name)
        self._stdlib = logging.getLogger(name)
        if _MASK_SECRETS not in self._stdlib.filters:
            self._stdlib.addFilter(_MASK_SECRETS)

    def _emit(self, level: int, method: str, event: str, kwargs: dict[str, Any]) -> None:
        if structlog.is_configured():
            exc_info = kwargs.pop("exc_info", None)
            fields = _safe_fields(method, {"event": event, **kwargs})
            if exc_info is not None:
                fields["exc_info"] = exc_info
            getattr(self._configured, method)(fields.pop("event"), **fields)
        elif self._stdlib.isEnabledFor(level):  # a dropped line costs no rendering
            exc_info = kwargs.pop("exc_info", method == "exception")
            fields = escape_unprintable(None, method, {"event": event, **kwargs})
            message = _RENDER(self._stdlib, method, fields)
            self._stdlib.log(level, message, exc_info=exc_info)

    def debug(self, event: str, **kwargs: Any) -> None:
        self._emit(logging.DEBUG, "debug", event, kwargs)

    def info(self, event: str, **kwargs: Any) -> None:
        self._emit(logging.INFO, "info", event, kwargs)

    def warning(self, event: str, **kwargs: Any) -> None:
        self._emit(logging.WARNING, "warning", event, kwargs)

    def error(self, event: str, **kwargs: Any) -> None:
        self._emit(logging.ERROR, "error", event, kwargs)

    def exception(self, event: str, **kwargs: Any) -> None:
        """An error, with the exception being handled."""
        self._emit(logging.ERROR, "exception", event, kwargs)


def _safe_fields(method: str, fields: dict[str, Any]) -> MutableMapping[str, Any]:
    """A line's fields as they may leave Headgate: passwords masked, then
    unprintable characters escaped (a host's own renderer prints them as they are)."""
    safe: MutableMapping[str, Any] = escape_unprintable(
        None, method, mask_secrets(None, method, fields)
    )
    return safe


def get_logger(name: str) -> HeadgateLogger:
    return HeadgateLogger(name)


def configure_logging(level: int = logging.INFO, json_lines: bool | None = None) -> None:
    """For `headgate serve`: key=value lines on a terminal, JSON lines otherwise
    (for log shippers), on stderr, through `STDERR`, as the standard library's
    last-resort warnings (a library's, with no handler of its own)."""
    as_json = not sys.stderr.isatty() if json_lines is None else json_lines
    renderer = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            mask_secrets,
            escape_unprintable,
            renderer,
        ],
        # WriteLogger writes a line and its end in one call (PrintLogger prints).
        logger_factory=structlog.WriteLoggerFactory(cast(TextIO, STDERR)),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
    last_resort = logging.StreamHandler(cast(TextIO, STDERR))
    last_resort.setLevel(logging.WARNING)
    logging.lastResort = last_resort
