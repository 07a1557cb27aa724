"""Store URLs, engines, write transactions, and driver-error translation.

Each backend's engine settings are in `backends/`; here, what is the same
for both: which URLs are accepted, and how a driver's errors become
Headgate's own at the adapter's edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, make_url

from headgate._errors import (
    ConcurrencyConflict,
    ConstraintViolation,
    StoreError,
    StoreUnavailable,
    ValidationError,
)
from headgate._redact import masked, passwords_in, remember_secrets
from headgate._store.sql.backends import POSTGRESQL, SQLITE, backend_named, checked_store_url

BUSY_TIMEOUT_S: Final = 30.0
WRITE: Final = {"headgate_write": True}
"""Execution options marking a connection's transaction as a write."""


def parse_store_url(url: str) -> URL:
    """Validate a store URL (each backend checks its own; see backends/). Its
    passwords are masked in every message and log line from here on (`_redact`),
    those of a URL that does not parse included."""
    remember_secrets(*passwords_in(url))
    try:
        parsed: URL | None = make_url(url)
    except (sa_exc.ArgumentError, ValueError):
        parsed = None
    if parsed is None:  # raised here, the parser's own error (it may quote the URL) is no context
        raise ValidationError("store URL", f"{masked(repr(url))} is not a database URL")
    remember_secrets(parsed.password)
    _refuse_a_password_read_as_the_host(parsed)
    return checked_store_url(parsed)


def _refuse_a_password_read_as_the_host(parsed: URL) -> None:
    """An unencoded `@` in a password makes SQLAlchemy, which splits the URL at
    the first one, take the rest of the password for the host name: the driver
    would look it up in DNS and quote it in its error. No host name holds an
    `@`, so such a URL is refused, naming the fix and nothing of the URL."""
    if parsed.host is not None and "@" in parsed.host:
        raise ValidationError(
            "store URL",
            "an '@' in its password must be percent-encoded as %40 (as written, the rest "
            "of the password would be read as the host name)",
        )


def shown_url(url: URL) -> str:
    """The URL as messages may show it: every password masked (`_redact.masked`)."""
    return masked(url.render_as_string(hide_password=False))


def create_store_engine(
    url: str, busy_timeout_s: float = BUSY_TIMEOUT_S, *, single_connection: bool = False
) -> Engine:
    """An engine for `url`. `single_connection` (SQLite): one connection, reused
    by every caller, for a process's serialised writes (see SqlEventLog)."""
    parsed = parse_store_url(url)
    backend = backend_named(parsed.get_backend_name())
    return backend.connector.create_engine(
        parsed, busy_timeout_s, single_connection=single_connection
    )


@contextlib.contextmanager
def write_transaction(engine: Engine, where: str) -> Iterator[Connection]:
    """A connection inside a write transaction (BEGIN IMMEDIATE on SQLite)."""
    with (
        translated_errors(where),
        engine.execution_options(**WRITE).connect() as connection,
        connection.begin(),
    ):
        yield connection


@contextlib.contextmanager
def translated_errors(where: str) -> Iterator[None]:
    """Re-raise driver errors as Headgate's own, keeping the original as the cause
    (its text masked: see `_mask_in_place`)."""
    try:
        yield
    except StoreError:
        raise
    except sa_exc.SQLAlchemyError as error:
        _mask_in_place(error)
        raise _translated(error, where) from error


def _translated(error: sa_exc.SQLAlchemyError, where: str) -> StoreError:
    if isinstance(error, sa_exc.IntegrityError):
        detail = _first_line(error)
        if any(b.dialect.is_stream_version_conflict(detail) for b in (SQLITE, POSTGRESQL)):
            return ConcurrencyConflict(None, None, None)
        if any(b.dialect.is_tick_origin_conflict(detail) for b in (SQLITE, POSTGRESQL)):
            return ConstraintViolation(
                f"{where}: a second job for one (schedule, tick) was refused: each tick has "
                f"one job (ux_headgate_jobs_periodic_origin): {detail}"
            )
        return ConstraintViolation(f"{where}: a constraint rejected the write: {detail}")
    if isinstance(
        error,
        sa_exc.OperationalError
        | sa_exc.InterfaceError
        | sa_exc.TimeoutError
        | sa_exc.DisconnectionError,
    ):
        return StoreUnavailable(f"{where}: store unavailable: {_first_line(error)}")
    if isinstance(error, sa_exc.DBAPIError):
        return StoreError(f"{where}: store error: {_first_line(error)}")
    return StoreError(f"{where}: {_first_line(error)}")


def _mask_in_place(error: BaseException) -> None:
    """The driver's error and the one SQLAlchemy wraps it in, their texts masked
    (`_redact`): they stay the cause, whose type a log line names, and a driver
    may quote a password (a mistyped URL's, read as a database or host name)."""
    for each in (error, getattr(error, "orig", None)):
        if isinstance(each, BaseException) and each.args:
            each.args = tuple(masked(arg) if isinstance(arg, str) else arg for arg in each.args)


def _first_line(error: sa_exc.SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    text = str(original if original is not None else error).strip()
    return masked(text.splitlines()[0]) if text else type(error).__name__
