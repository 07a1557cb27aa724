"""Logging for `headgate serve`: structured lines on stderr.

The library itself never configures logging; a host service decides. These
are the settings the standalone server uses.
"""

from __future__ import annotations

import logging
import sys

import structlog


def default_to_stderr() -> None:
    """If the host has not configured structlog, send its lines to stderr, not stdout.

    structlog's out-of-the-box default prints to stdout, which would mix
    Headgate's log lines into a host program's output. Its tracebacks also
    show every frame's local variables when `rich` is installed, and those
    hold job payloads: ours are plain. A host that configures structlog
    itself (before or after) is not affected.
    """
    if not structlog.is_configured():
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.StackInfoRenderer(),
                structlog.dev.set_exc_info,
                structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
                structlog.dev.ConsoleRenderer(
                    colors=sys.stderr.isatty(),  # no escape codes in a host's log files
                    exception_formatter=structlog.dev.plain_traceback,
                ),
            ],
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )


def configure_logging(level: int = logging.INFO, json_lines: bool | None = None) -> None:
    """Key=value lines on a terminal, JSON lines otherwise (for log shippers)."""
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
