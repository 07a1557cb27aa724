"""A backend's SQL where it differs: batches of keys, bulk writes, row locks,
conflicts, the server's clock."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import ColumnElement, Select, String, Table
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.selectable import TableValuedAlias

from headgate._store.sql.backends.log_order import LogOrder


class Dialect(ABC):
    """The statements whose SQL differs by database, for the adapter's queries and
    writes (everything else is written once, in SQLAlchemy Core)."""

    clock_is_local: bool
    """The store's clock is this host's (SQLite); else the server's is read."""

    positions_from_a_sequence: bool
    """The log's positions come from a sequence the schema makes (`backends.log_order`)."""
    updates_at_versions: bool = False
    """Whether `update_at_versions` saves a round trip over reading the versions
    first (a server's; an embedded database's reads cost none)."""

    @abstractmethod
    def is_one_of(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        """`column IN (values)`, for strings or integers, with one parameter however
        many values: the statement text is the same for every batch and nothing
        is rendered per value in Python."""

    @abstractmethod
    def each_of(self, values: Sequence[Any], like: ColumnElement[Any]) -> TableValuedAlias:
        """The values as the rows of a one-column table, `wanted.value`, for looking
        each value up on its own (in a correlated or LATERAL subquery): a lookup
        per value is planned as an index probe whatever the statistics say."""

    @abstractmethod
    def each_of_bound(self, name: str, like: ColumnElement[Any]) -> TableValuedAlias:
        """`each_of` for a statement built once: the values bound at each run, as
        the parameter `name` holding `batch_value(values)`."""

    @abstractmethod
    def is_one_of_bound(self, name: str, column: ColumnElement[Any]) -> ColumnElement[bool]:
        """`column IN (values)` for a statement built once, the values bound at
        each run as the parameter `name` holding `batch_value(values)` (another
        name, another parameter: a statement may hold several)."""

    @abstractmethod
    def batch_value(self, values: Sequence[Any]) -> Any:
        """What a parameter of `each_of_bound` is given for these values."""

    @abstractmethod
    def probing_indexes(self, connection: Connection) -> AbstractContextManager[None]:
        """Statements inside find their rows by index probes (see PostgreSQL's)."""

    @abstractmethod
    def write_settings(self) -> tuple[ColumnElement[Any], ...]:
        """Columns that, read with the log head by a write's first statement, make
        this transaction's settings for the hot path (no round trip of their
        own); `write_settings_made` is told once they are read."""

    @abstractmethod
    def write_settings_made(self, connection: Connection) -> None:
        """The write's first statement read `write_settings` on this connection."""

    @abstractmethod
    def write_settings_ended(self, connection: Connection) -> None:
        """The write's transaction is over: its settings with it."""

    @abstractmethod
    def scanning_tables(self, connection: Connection) -> AbstractContextManager[None]:
        """Statements inside may scan and hash whole tables (verify, replay): the
        planner's own choices, where a connection probes by default."""

    @abstractmethod
    def bulk_insert(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """INSERT every row (all rows have the same keys), in the connection's transaction."""

    @abstractmethod
    def bulk_update(
        self, connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        """UPDATE rows by key; each row holds the key and the columns to set."""

    def update_at_versions(
        self,
        connection: Connection,
        table: Table,
        key_column: str,
        rows: Sequence[dict[str, Any]],
        expected: Sequence[int],
    ) -> set[Any]:
        """Update each of `rows` (by key) only where its `version` column is the
        one `expected` gives (same order): the keys of the rows updated, in as
        few statements as `bulk_update`'s. Only where `updates_at_versions`."""
        raise NotImplementedError

    @abstractmethod
    def locked(self, query: Select[Any], *, shared: bool = False) -> Select[Any]:
        """`query`, locking the rows it reads until the transaction ends."""

    @abstractmethod
    def locked_skipping(self, query: Select[Any]) -> Select[Any]:
        """`query`, locking the rows it reads and passing over rows another writer
        holds (a claim beside another never waits for it nor takes its rows)."""

    @abstractmethod
    def log_order(self, head_table: str, sequence: str) -> LogOrder:
        """How the event log orders and fences its writes here (`backends.log_order`)."""

    @abstractmethod
    def first_of_each(self, table: Table, wanted: TableValuedAlias) -> Select[Any]:
        """Rows of `table` (the events) at version 1 of each stream in `wanted`
        (`each_of`, or `each_of_bound` for a statement built once)."""

    @abstractmethod
    def insert_if_absent(self, table: Table, key: str) -> Insert:
        """INSERT ... ON CONFLICT (key) DO NOTHING: two writers inserting at once is no error."""

    @abstractmethod
    def insert_or_replace(
        self, table: Table, keys: Sequence[str], values: dict[str, Any]
    ) -> Insert:
        """INSERT ... ON CONFLICT (keys) DO UPDATE with `values`: a row written by
        two writers at once ends as the last one left it, and neither fails."""

    @abstractmethod
    def commits_with_host(self, connection: Connection) -> bool:
        """Whether what runs on a host's connection now commits with the host's
        transaction (not on its own, as under autocommit)."""

    @abstractmethod
    def database_identity(self, connection: Connection) -> tuple[Any, ...]:
        """What names the database (and schema) the connection is on: equal for two
        connections to the same store, whatever URL each was opened by."""

    @abstractmethod
    def raise_to(self, table: Table, keys: Sequence[str], column: str) -> Insert:
        """INSERT ... ON CONFLICT (keys) DO UPDATE: the row's `column` becomes the
        greater of its value and the one inserted."""

    @abstractmethod
    def server_now_ms(self, connection: Connection) -> int:
        """The store's clock in epoch ms (only asked when not `clock_is_local`)."""

    @abstractmethod
    def is_stream_version_conflict(self, detail: str) -> bool:
        """Whether a unique-violation message is two appends of one stream version."""

    @abstractmethod
    def is_tick_origin_conflict(self, detail: str) -> bool:
        """Whether a unique-violation message is a second job for one (schedule, tick)."""


class code_point_order(FunctionElement[str]):  # noqa: N801 (an SQL function's name)
    """A text column compared and ordered code point by code point, on every backend.

    SQLite compares text so already (BINARY). PostgreSQL compares it by the
    database's collation, which may be a language's (en_US: `a-b` sorts between
    `ab` and `ac`); there it is the column under the "C" collation, whose order
    is the code points' (`postgresql.py` compiles it so). So a list in this
    order is the same on both backends, and
    `prefix <= value < prefix_upper_bound(prefix)` holds for exactly the values
    starting with the prefix. An index must name the same expression to serve it.
    """

    type = String()
    name = "code_point_order"
    inherit_cache = True


@compiles(code_point_order)
def _code_point_order_as_is(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))
