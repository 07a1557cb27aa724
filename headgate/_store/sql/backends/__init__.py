"""What differs between SQLite and PostgreSQL, decided here and nowhere else.

One `SqlBackend` per database (`SQLITE`, `POSTGRESQL`), found for any engine
or connection with `backend_of` (`dialect_of` for its SQL alone). Each is
three strategies, so a part of the adapter depends on the one it uses:

* `connector`: which URLs it takes, its engines' settings, and notifications
  between processes (`connector.py`);
* `dialect`: how a batch of keys is passed and looked up, bulk writes, row
  locks, conflicts, the server's clock (`dialect.py`);
* `maintenance`: checkpoints, vacuum after compaction, and what migrations
  need (`maintenance.py`).

Every other module of the adapter writes its SQL once, in SQLAlchemy Core.
Only `sqlite.py` and `postgresql.py` name a dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlalchemy import Engine
from sqlalchemy.engine import URL, Connection

from headgate._errors import ValidationError
from headgate._store.sql.backends import postgresql, sqlite
from headgate._store.sql.backends.connector import Connector
from headgate._store.sql.backends.dialect import Dialect, code_point_order
from headgate._store.sql.backends.maintenance import Maintenance

__all__ = [
    "POSTGRESQL",
    "SQLITE",
    "Connector",
    "Dialect",
    "Maintenance",
    "SqlBackend",
    "backend_named",
    "backend_of",
    "checked_store_url",
    "code_point_order",
    "dialect_of",
]


@dataclass(frozen=True)
class SqlBackend:
    """One database's strategies: how to connect to it, its SQL, its upkeep."""

    name: str
    connector: Connector
    dialect: Dialect
    maintenance: Maintenance


SQLITE: Final = SqlBackend(
    sqlite.NAME, sqlite.SqliteConnector(), sqlite.SqliteDialect(), sqlite.SqliteMaintenance()
)
POSTGRESQL: Final = SqlBackend(
    postgresql.NAME,
    postgresql.PostgresConnector(),
    postgresql.PostgresDialect(),
    postgresql.PostgresMaintenance(),
)
_BY_NAME: Final[dict[str, SqlBackend]] = {SQLITE.name: SQLITE, POSTGRESQL.name: POSTGRESQL}
_URL_SCHEMES: Final[dict[str, SqlBackend]] = {**_BY_NAME, "postgres": POSTGRESQL}
"""The backend each URL scheme names: the backends' own names, and `postgres`,
which SQLAlchemy no longer takes but Heroku- and Render-style URLs still use."""
IN_PROCESS_SCHEME: Final = "memory"
"""`memory://`, the in-process store (`headgate._store.memory`): never a database."""


def backend_named(name: str) -> SqlBackend:
    return _BY_NAME[name]


def checked_store_url(url: URL) -> URL:
    """The store URL as its backend takes it (its scheme and driver spelled as
    SQLAlchemy knows them); ValueError naming what is wrong."""
    scheme = url.drivername.partition("+")[0]
    if scheme == IN_PROCESS_SCHEME:
        raise ValidationError(
            "store URL",
            "memory:// is a store inside one process (for tests), with nothing another "
            "process can open or inspect; use sqlite:///path.db or postgresql://",
        )
    backend = _URL_SCHEMES.get(scheme)
    if backend is None:
        raise ValidationError(
            "store URL", f"{scheme!r} is not supported; use sqlite:///path.db or postgresql://"
        )
    return backend.connector.checked_url(url)


def backend_of(bind: Engine | Connection) -> SqlBackend:
    """The backend of an engine or connection (its SQLAlchemy dialect's name)."""
    return _BY_NAME[bind.dialect.name]


def dialect_of(bind: Engine | Connection) -> Dialect:
    """The SQL of an engine's or connection's backend."""
    return _BY_NAME[bind.dialect.name].dialect
