"""The store port: everything Headgate keeps, as small interfaces by capability.

The runtime, the commands and the `Headgate` facade depend on these
interfaces only. Two implementations serve them: `headgate._store.sql`
(SQLAlchemy, on SQLite or PostgreSQL, the only code that knows a database
dialect) and `headgate._store.memory` (one process's own, for tests). What
every implementation must guarantee is written in each interface's
docstrings and proved by the contract suite in `tests/store/contract/`, one
module per capability, which runs against each of them.

The capabilities, each with the part a write transaction answers (read in the
transaction that changes what it reads) and the part read on its own:

| Capability | In a write transaction | Read on its own |
|---|---|---|
| the event log (`event_log`) | `LogTransaction` | `EventLog` |
| schedule reads (`schedules`) | `ScheduleLookups` | `ScheduleReads` |
| the job queue (`job_queue`) | `JobQueue` | `JobReads` |
| admission facts (`admission`) | `AdmissionFacts` | `QuarantineReads` |
| the worker registry (`workers`) | `WorkerRescue` | `Workers` |
| store figures, for metrics (`figures`) | | `StoreFigures` |
| leases (`leases`) | (a `Fence` on the write) | `Leases` |
| the activity roll-up (`activity`) | | `ActivityLog` |
| ended login sessions (`sessions`) | | `SessionRevocations` |
| handler declarations (`handlers`) | | `HandlerDeclarations` |

`WriteTransaction` composes the first column, `Reads` the read models of the
second, and `Store` holds the parts with `compact` (by the domain's retention
rules, `headgate._domain.retention`), `listen` and `close` (`store`).

Errors are Headgate's own (`headgate._errors`), never a driver's:
`StoreUnavailable` (unreachable, locked past the busy timeout),
`StoreClosed`, `ProjectionsRebuilding`, `LeaseLost`, `ConcurrencyConflict`,
`ConstraintViolation` and `StoreError` for the rest.
"""

from headgate._store.port.activity import ActivityLog
from headgate._store.port.admission import AdmissionFacts, QuarantineReads
from headgate._store.port.compaction import DAY_MS, CompactionPolicy, CompactionReport
from headgate._store.port.event_log import (
    ANY_VERSION,
    MAX_STREAM_ID_LENGTH,
    NO_STREAM,
    EventLog,
    LogTransaction,
    StreamAppend,
    Unit,
    UnitResult,
)
from headgate._store.port.figures import StoreFigures
from headgate._store.port.handlers import DeclaredHandler, HandlerDeclaration, HandlerDeclarations
from headgate._store.port.job_queue import (
    JOBS_ENDED,
    JOBS_TAKEN,
    SLOTS_FREED,
    STATE_COUNT_CAP,
    JobFilter,
    JobQueue,
    JobReads,
    LimitsState,
    Listener,
)
from headgate._store.port.leases import Fence, Lease, LeaseHolder, Leases
from headgate._store.port.paging import Page
from headgate._store.port.schedules import (
    HealthFilter,
    RunRead,
    ScheduleLookups,
    ScheduleReads,
)
from headgate._store.port.sessions import (
    MAX_SESSION_ID_LENGTH,
    SessionRevocations,
    is_session_id,
)
from headgate._store.port.store import SCHEMA_REVISION, Reads, Store
from headgate._store.port.workers import (
    ProcessIdentity,
    WorkerBeat,
    WorkerRescue,
    WorkerRow,
    Workers,
)
from headgate._store.port.write_transaction import WriteTransaction

__all__ = [
    "ANY_VERSION",
    "DAY_MS",
    "JOBS_ENDED",
    "JOBS_TAKEN",
    "MAX_SESSION_ID_LENGTH",
    "MAX_STREAM_ID_LENGTH",
    "NO_STREAM",
    "SCHEMA_REVISION",
    "SLOTS_FREED",
    "STATE_COUNT_CAP",
    "ActivityLog",
    "AdmissionFacts",
    "CompactionPolicy",
    "CompactionReport",
    "DeclaredHandler",
    "EventLog",
    "Fence",
    "HandlerDeclaration",
    "HandlerDeclarations",
    "HealthFilter",
    "JobFilter",
    "JobQueue",
    "JobReads",
    "Lease",
    "LeaseHolder",
    "Leases",
    "LimitsState",
    "Listener",
    "LogTransaction",
    "Page",
    "ProcessIdentity",
    "QuarantineReads",
    "Reads",
    "RunRead",
    "ScheduleLookups",
    "ScheduleReads",
    "SessionRevocations",
    "Store",
    "StoreFigures",
    "StreamAppend",
    "Unit",
    "UnitResult",
    "WorkerBeat",
    "WorkerRescue",
    "WorkerRow",
    "Workers",
    "WriteTransaction",
    "is_session_id",
]
