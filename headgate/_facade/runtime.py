"""`hg.runtime`: what the processes sharing the store are doing (its workers,
the scheduler lease, whether ticks are fired, work nobody serves), whether
this Headgate can serve, and the runtime's upkeep done now (compaction)."""

from __future__ import annotations

import builtins

from headgate._errors import (
    SchemaBehind,
    SchemaIncomplete,
    SchemaTooNew,
    StoreClosed,
    StoreError,
    error_type_of,
)
from headgate._facade.twins import Namespace, twin
from headgate._model import (
    RUNNING_SHOWN,
    DeclaredHandler,
    LeaseStatus,
    Readiness,
    SchedulerHealth,
    UnservedWork,
    WorkerStatus,
)
from headgate._redact import masked
from headgate._store.port import CompactionReport, JobFilter

_NOT_READY_BECAUSE: dict[type[StoreError], str] = {
    StoreClosed: "store_closed",
    SchemaBehind: "schema_behind",
    SchemaTooNew: "schema_too_new",
    SchemaIncomplete: "schema_incomplete",
}
"""Readiness reasons by error; any other store error: `store_unreachable`."""


class Runtime(Namespace):
    """The fleet on a Headgate's store: `hg.runtime.workers()`, `hg.runtime.readiness()`."""

    name = "runtime"

    def workers(self) -> builtins.list[WorkerStatus]:
        """The live worker processes sharing this store, each with the jobs it runs
        (of the first RUNNING_SHOWN running jobs)."""
        running: dict[str, builtins.list[str]] = {}
        where = JobFilter(state="running")
        for row in self._core.reads.jobs_page(where, RUNNING_SHOWN, None).items:
            if row.worker_id is not None:
                running.setdefault(row.worker_id, []).append(row.job_id)
        return [
            WorkerStatus(
                row.worker_id,
                row.host,
                row.pid,
                dict(row.queues),
                row.running,
                row.overdue,
                row.started_at_ms,
                row.heartbeat_at_ms,
                row.expires_at_ms,
                tuple(running.get(row.worker_id, ())),
                row.kinds,
            )
            for row in self._core.store.workers.live(self._core.clock.now_ms())
        ]

    def lease(self) -> LeaseStatus | None:
        """Who holds the scheduler duty now, or None when nobody does."""
        return self._core.lease_status()

    def scheduler_health(self) -> SchedulerHealth:
        """Whether anybody fires the ticks: `no_scheduler` when schedules have been
        due past a takeover's time and no process holds the scheduler lease (a
        fleet of workers and no scheduler), `behind` when one does and they wait
        anyway, else `ok` (`_domain/scheduler_watch.py`). Two reads: the lease,
        and the oldest due schedule on the due index."""
        return self._core.scheduler_health()

    def unserved(self) -> builtins.list[UnservedWork]:
        """Pending jobs no live worker can run, by (queue, kind): no worker serves
        the queue with a handler of the kind (each waits until one starts)."""
        serving = self._core.serving.current(fresh=True)
        pending = self._core.reads.pending_work()
        return [
            UnservedWork(queue, kind, count, serving.reason(queue, kind) or "")
            for (queue, kind), count in serving.unserved(pending).items()
        ]

    def declared_handlers(self) -> builtins.list[DeclaredHandler]:
        """The handlers every declarations group's code has declared (each records
        its own when a runtime with handlers starts), by kind then group: what
        enqueue routes a kind by where no handler of it is registered."""
        return [DeclaredHandler.from_row(row) for row in self._core.store.handlers.declared()]

    def readiness(self) -> Readiness:
        """Whether this Headgate can serve: reads the store's schema revision and
        each of its tables now, and says why not instead of raising (a probe's
        question: see GET /readyz)."""
        try:
            revision = self._core.store.schema_revision()
        except StoreError as error:
            reason = _NOT_READY_BECAUSE.get(type(error), "store_unreachable")
            return Readiness(False, reason, masked(str(error)), error_type=error_type_of(error))
        return Readiness(True, schema_revision=revision)

    def compact(self) -> CompactionReport:
        """Compact the log now (the lease holder does it once a minute anyway).

        An operator's action: it needs no lease and runs unfenced, in this
        process or any other, beside the holder's own runs (their transactions are
        serialised, and each deletes only what no stream needs). The holder's
        runs are a duty of its lease and carry its fence."""
        return self._core.store.compact()

    aworkers = twin(workers, reads=True)
    areadiness = twin(readiness, reads=True)
