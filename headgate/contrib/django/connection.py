"""Django's database connections as Headgate sees them: the store URL of a
Django database, and a Django connection lent to SQLAlchemy for one enqueue
inside its transaction.

A lent connection is Django's own DBAPI connection behind a SQLAlchemy
`Connection`. Django keeps the transaction and the connection's life:
SQLAlchemy's commit, rollback and close of it do nothing, so only Django's
`atomic` block decides whether the job commits with the host's rows. Nor does
SQLAlchemy's set-up of a new connection (SQL functions, notice handlers)
reach it: lent again at each enqueue, it would pile up on Django's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

SQLITE_ENGINE = "django.db.backends.sqlite3"
POSTGRESQL_ENGINE = "django.db.backends.postgresql"


def store_url(settings: Mapping[str, Any]) -> str:
    """The Headgate store URL of a Django database (its `DATABASES` entry)."""
    engine = settings.get("ENGINE")
    if engine == SQLITE_ENGINE:
        name = str(settings.get("NAME", ""))
        if name in ("", ":memory:") or name.startswith("file:"):
            raise ImproperlyConfigured(
                "Headgate's store needs a SQLite file other processes can open; this "
                f"database is {name!r}: give the TASKS backend an OPTIONS 'url'"
            )
        return f"sqlite:///{name}"
    if engine == POSTGRESQL_ENGINE:
        options = settings.get("OPTIONS") or {}
        query = {"options": options["options"]} if "options" in options else {}
        url = URL.create(
            "postgresql+psycopg",
            username=settings.get("USER") or None,
            password=settings.get("PASSWORD") or None,
            host=settings.get("HOST") or None,
            port=int(settings["PORT"]) if settings.get("PORT") else None,
            database=settings.get("NAME") or None,
            query=query,
        )
        return url.render_as_string(hide_password=False)
    raise ImproperlyConfigured(
        f"Headgate's store runs on SQLite or PostgreSQL; this database's ENGINE is "
        f"{engine!r}: give the TASKS backend an OPTIONS 'url'"
    )


class _Lent:
    """A DBAPI connection lent by Django: everything passes through but the end
    of its transaction and of its life, which stay Django's."""

    def __init__(self, raw: Any) -> None:
        object.__setattr__(self, "_raw", raw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._raw, name, value)

    def commit(self) -> None:
        """Django commits, at the end of its atomic block."""

    def rollback(self) -> None:
        """Django rolls back, at the end of its atomic block."""

    def close(self) -> None:
        """Django closes its connections itself."""

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        """SQLAlchemy's SQLite dialect would put its own REGEXP and FLOOR on every
        connection it is given, over Django's (which differ on NULLs and
        numbers); Django's stay."""

    def add_notice_handler(self, *args: Any, **kwargs: Any) -> None:
        """SQLAlchemy's psycopg dialect would add a notice handler to every
        connection it is given, one more at each enqueue; Django's connection
        keeps its own."""


_ENGINES: dict[str, Engine] = {}
_LENDING: list[Any] = []
"""The connection being lent, for the engine's creator (under _LOCK)."""
_LOCK = threading.Lock()


def _engine(raw: Any) -> Engine:
    """An engine that hands out the DBAPI connection being lent, one per driver
    (its dialect is set up on the first connection it is lent)."""
    driver = type(raw).__module__.split(".")[0]
    url = {"sqlite3": "sqlite://", "psycopg": "postgresql+psycopg://"}.get(driver)
    if url is None:
        raise ImproperlyConfigured(
            f"Headgate enqueues in Django's transaction on sqlite3 or psycopg (3), not {driver}"
        )
    engine = _ENGINES.get(url)
    if engine is None:
        # No hstore lookup: psycopg's reads only its own Connection, not a lent one.
        extra = {"use_native_hstore": False} if driver == "psycopg" else {}
        engine = create_engine(url, poolclass=NullPool, creator=_current_lent, **extra)
        _ENGINES[url] = engine
    return engine


def _current_lent() -> Any:
    return _LENDING[-1]


@contextmanager
def lent(django_connection: Any) -> Iterator[Connection]:
    """A SQLAlchemy Connection on Django's connection, in its transaction: for
    `Headgate.enqueue(..., connection=)` inside `transaction.atomic()`."""
    django_connection.ensure_connection()
    raw = django_connection.connection
    engine = _engine(raw)
    with _LOCK:
        _LENDING.append(_Lent(raw))
        try:
            connection = engine.connect()
        finally:
            _LENDING.pop()
    try:
        connection.begin()
        yield connection
    finally:
        connection.close()
