"""A store: the event log and the read models' interfaces, composed.

A write transaction is the event log's transaction plus the reads each
decision needs from the read models, in the same transaction; `Reads` is
every read model's committed-state reads; `Store` holds the parts.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Final

from headgate._clock import Clock
from headgate._store.port.activity import ActivityLog
from headgate._store.port.admission import QuarantineReads
from headgate._store.port.compaction import CompactionPolicy, CompactionReport
from headgate._store.port.event_log import EventLog
from headgate._store.port.figures import StoreFigures
from headgate._store.port.handlers import HandlerDeclarations
from headgate._store.port.job_queue import JobReads, Listener
from headgate._store.port.leases import Fence, Leases
from headgate._store.port.schedules import ScheduleReads
from headgate._store.port.sessions import SessionRevocations
from headgate._store.port.workers import Workers

SCHEMA_REVISION: Final = 28
"""The revision of the data this build keeps: the SQL adapter's newest migration
(`LATEST_VERSION` is this; a test checks that versions/ ends there). A store of
this build's own, like the memory store, is always at it."""


class Reads(ScheduleReads, JobReads, QuarantineReads, StoreFigures):
    """The read models, each read on its own short read transaction, seeing
    committed state only.

    Ids a store could not hold (NUL, lone surrogates, over-long) are simply
    absent: no query is sent with text the database would reject.
    """


class Store(ABC):
    """Everything Headgate keeps, in one database."""

    clock: Clock
    """Store time: what lease expiry and recorded instants are measured in."""
    log: EventLog
    leases: Leases
    workers: Workers
    reads: Reads
    activity: ActivityLog
    sessions: SessionRevocations
    """The console's ended login sessions (`sessions`)."""
    handlers: HandlerDeclarations
    """The handlers each group's code declares (`handlers`): enqueue's routing."""

    @abstractmethod
    def schema_revision(self) -> int:
        """The store's schema revision, read from it now, when it is this Headgate's
        and each of its tables is there and readable (what serving needs: a
        readiness probe's question). Raises StoreUnavailable when the store
        cannot be reached, SchemaBehind or SchemaTooNew when it is not at this
        revision (another build, or a restore, changed it since it was opened),
        SchemaIncomplete when a table is missing (StoreUnavailable or StoreError
        when one is there but cannot be read), StoreClosed after `close`."""

    @abstractmethod
    def listen(self, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        """Call `on_enqueued(queue)` (on a thread of the store's) whenever another
        process commits a job to a queue, or `on_enqueued(None)` where the store
        can only tell that something was committed (SQLite: look at every
        queue); None where the backend cannot tell (workers then poll).
        Notifications may be lost while reconnecting: they only shorten a wait,
        and polling covers the rest."""

    @abstractmethod
    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        """Keep what each stream needs and delete the rest, by the domain's retention
        rules (`headgate._domain.retention`), in small transactions (so other
        writers wait for one of them at most); stops between them once `cancel`
        is set. A rebuild from the compacted log reproduces the live
        projections exactly.

        The runtime runs it as a duty of the scheduler lease, with that lease's
        `fence`: every one of its transactions checks the term as it opens, so a
        holder paused past its lease's expiry writes nothing more (LeaseLost, and
        the run stops; what committed before stays, and the next holder's run
        takes up the rest). Without a fence it is an operator's action
        (`hg.runtime.compact`, `ops.compact`): it runs whoever holds the lease."""

    @abstractmethod
    def close(self) -> None:
        """Refuse further writes (StoreClosed) and release the connections; a write
        in flight finishes first."""
