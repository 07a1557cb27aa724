"""Who makes a change to a schedule, as its definition events record it.

A schedule is changed by the host's code (its declarations, `Headgate.periodic`)
or by an operator, through one of the surfaces: the Python API, the HTTP API,
the console or the command line. Headgate has one token and no user accounts,
so an operator is told apart by surface only. The surface is set where the
request enters (the web app's `_attribution`, the CLI's commands) for the
calls made within it, as a context variable: every Headgate call under it,
on any thread the context is copied to, is recorded as that surface's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

CODE: Final = "code"
OPERATOR: Final = "operator"
PYTHON: Final = f"{OPERATOR}:python"
API: Final = f"{OPERATOR}:api"
CONSOLE: Final = f"{OPERATOR}:console"
CLI: Final = f"{OPERATOR}:cli"
SURFACES: Final = frozenset({PYTHON, API, CONSOLE, CLI})

_acting: ContextVar[str] = ContextVar("headgate_acting", default=PYTHON)


def code(declared_by: str) -> str:
    """The actor of a change the host's code made: its declarations group."""
    return f"{CODE}:{declared_by}"


def current() -> str:
    """The operator surface acting now (the Python API unless a surface said)."""
    return _acting.get()


@contextlib.contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """Record the changes made within the block as `actor`'s (one of SURFACES)."""
    if actor not in SURFACES:
        raise ValueError(f"unknown operator surface {actor!r}")
    token = _acting.set(actor)
    try:
        yield
    finally:
        _acting.reset(token)
