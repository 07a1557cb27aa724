"""Everything one memory store keeps, and the two locks that keep it consistent.

Writers (the event log's transactions, lease claims, heartbeats) queue on the
write lock, one at a time, as on a database's write lock. What they change
is applied to the committed state at commit, under the read lock, which
readers hold while they read: a reader sees every commit whole or not at
all, and never waits for a write in progress (a commit held for an instant
included), only for the moment a commit is applied.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from headgate._domain.activity import ActivityPoint
from headgate._domain.fair_share import Lane
from headgate._forksafe import WriterLock, renew_in_forked_children
from headgate._store.memory.events import CommittedLog
from headgate._store.memory.notifications import Notifications
from headgate._store.memory.queries import ReadModels
from headgate._store.memory.schema import empty_tables
from headgate._store.memory.tables import Table
from headgate._store.port import DeclaredHandler, Lease, WorkerRow


class MemoryState:
    """The committed log, read models, leases and heartbeats of one memory store."""

    def __init__(self) -> None:
        self.log = CommittedLog()
        self.tables: dict[str, Table[Any]] = empty_tables()
        self.models = ReadModels.of(self.tables)
        self.leases: dict[str, Lease] = {}
        self.workers: dict[str, WorkerRow] = {}
        self.activity: list[ActivityPoint] = []
        """The activity roll-up's points, oldest minute first."""
        self.rate_starts: dict[str, list[int]] = {}
        """Per rate class, when its jobs within the window were claimed (operational
        state, as the SQL store's rate_starts table)."""
        self.revoked_sessions: dict[str, int] = {}
        """Each ended login session's id, with when it would have expired
        (operational state, as the SQL store's revoked_sessions table)."""
        self.handler_declarations: dict[tuple[str, str], DeclaredHandler] = {}
        """(kind, declarations group) -> its handler's declaration (operational
        state, as the SQL store's handler_declarations table)."""
        self.queue_turns: dict[Lane, int] = {}
        """Each lane's current fair-share turn (operational state, as the SQL
        store's queue_turns table)."""
        self.compacted_up_to = 0
        """The log position up to which streams have been examined for trimming."""
        self.notifications = Notifications()
        self._write_lock = WriterLock()
        self._read_lock = threading.Lock()
        renew_in_forked_children(self)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """The one writer at a time."""
        with self._write_lock.held():
            yield

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Committed state, held still while it is read (or a commit applied)."""
        with self._read_lock:
            yield

    def wait_for_writer(self, timeout_s: float) -> None:
        """Return once no write is in flight (or after `timeout_s`)."""
        if self._write_lock.acquire(timeout_s):
            self._write_lock.release()

    def after_fork_in_child(self) -> None:
        """A child gets a copy of the state, its own from then on: a fresh read
        lock (a parent's thread may have held it at the fork; the write lock
        renews itself) and no listeners."""
        self._read_lock = threading.Lock()
        self.notifications.forget_all()
