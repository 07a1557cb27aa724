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
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final

import structlog

# structlog's writers keep a lock per file, which a fork must not leave held.
from headgate import _structlog_compat  # noqa: F401 (registers itself)

__all__ = ["configure_logging", "get_logger"]

_RENDER: Final = structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
"""`event key=value ...` for a stdlib record's message; the record carries the
exception itself, so the host's handlers (a formatter, Sentry) render it."""


class HeadgateLogger:
    """A logger that goes where the host sends logs (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._configured = structlog.get_logger(name)
        self._stdlib = logging.getLogger(name)

    def _emit(self, level: int, method: str, event: str, kwargs: dict[str, Any]) -> None:
        if structlog.is_configured():
            getattr(self._configured, method)(event, **kwargs)
        elif self._stdlib.isEnabledFor(level):  # a dropped line costs no rendering
            exc_info = kwargs.pop("exc_info", method == "exception")
            message = _RENDER(self._stdlib, method, {"event": event, **kwargs})
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


def get_logger(name: str) -> HeadgateLogger:
    return HeadgateLogger(name)


def configure_logging(level: int = logging.INFO, json_lines: bool | None = None) -> None:
    """For `headgate serve`: key=value lines on a terminal, JSON lines otherwise
    (for log shippers), on stderr."""
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
            renderer,
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
