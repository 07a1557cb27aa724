"""How a backend is connected to: its URLs, its engines, and its notifications
between processes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection

from sqlalchemy import Engine
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql.dml import Update

from headgate._store.port import Listener


class Connector(ABC):
    """URL checks, engine settings, and LISTEN/NOTIFY where there is one."""

    explicit_transactions: bool
    """The writer's connection is in autocommit and the store sends BEGIN and
    COMMIT itself, each with the statement beside it in one round trip
    (PostgreSQL); else the driver's transactions (SQLite's BEGIN IMMEDIATE)."""
    one_writer_connection: bool
    """Every write of a process shares one connection (SQLite: its page cache,
    dropped whenever another connection writes, stays warm; PostgreSQL: its
    prepared statements and its session's planner settings)."""

    @abstractmethod
    def checked_url(self, url: URL) -> URL:
        """The store URL as this backend takes it (its drivername one SQLAlchemy
        knows); ValueError naming what is wrong."""

    @abstractmethod
    def is_missing(self, url: URL) -> bool:
        """True when the URL names no store that exists yet (and opening it would make
        one); False when it may exist (a server says so only once connected to);
        StoreUnopenable when it names a place no store can be at (a directory)."""

    @abstractmethod
    def check_openable(self, url: URL) -> None:
        """StoreUnopenable naming the place, when the URL names one where no store
        can be opened; nothing when it may be (a server says so only when
        connected to)."""

    @abstractmethod
    def create_engine(
        self, url: URL, busy_timeout_s: float, *, single_connection: bool = False
    ) -> Engine:
        """An engine with Headgate's session settings."""

    @abstractmethod
    def inspecting_engine(self, url: URL) -> Engine:
        """An engine whose connections only read and change nothing on connecting
        (none of Headgate's session settings): for finding out what a URL holds
        before opening it as a store."""

    @abstractmethod
    def finish_write(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> str | None:
        """The last statement of a write transaction before its commit: the log
        head moved to `position` (`move_head`, a constant statement binding
        `position`; None: nothing was appended), and listening processes told,
        when this commits, that jobs were enqueued on these queues (nothing is
        sent where the backend cannot notify). Returned, to be sent with the
        COMMIT, where the backend's transactions are explicit; else run now
        (None returned)."""

    @abstractmethod
    def finish_write_now(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> None:
        """`finish_write`, run now through SQLAlchemy on a host's connection (any of
        its drivers, sync or async): the host's COMMIT is not ours to send."""

    @abstractmethod
    def listen(self, url: URL, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        """A listener calling `on_enqueued(queue)` for notifications from other
        processes (`on_enqueued(None)`: something changed, look at every queue);
        None where the backend has none."""
