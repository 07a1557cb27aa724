"""The operations a request handler calls, as coroutines on the Headgate object.

`await hg.aenqueue(...)` runs `hg.enqueue(...)` on a small thread pool of the
Headgate's own (`ASYNC_THREADS`), so the event loop never waits on the store:
the store's writes stay the synchronous, group-committed ones every other
caller shares, and calls made at once from many requests share commits too.
The names follow Django's habit (`aget`, `acreate`: an `a` before the name of
the same operation on the same object), so a host has one object to set up and
one set of handlers.

A job joins an async host's transaction when `connection` is an SQLAlchemy
AsyncConnection or AsyncSession: the enqueue then runs on the host's own
connection through SQLAlchemy's `run_sync`, whose driver calls are awaited on
the loop, so it blocks the loop no more than the host's own queries do.

A cancelled await does not undo an enqueue already under way on the pool: the
job may still be written, as a request that timed out after its INSERT.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from typing_extensions import Unpack

from headgate._domain.lifecycle import BULK_MAX
from headgate._domain.options import EnqueueArgs, ScheduleArgs
from headgate._json import JsonValue

if TYPE_CHECKING:
    from headgate._app import Headgate
    from headgate._model import (
        BulkResult,
        EnqueueEventsPage,
        Job,
        JobsPage,
        PutSchedulesResult,
        RunNowResult,
        Schedule,
        ScheduleHealth,
        ScheduleRunsPage,
        SchedulesPage,
    )

ASYNC_THREADS: Final = 32
"""Threads a Headgate runs its coroutines' writes on: more writes than this at
once wait their turn. A write waiting for the writer holds a thread but no CPU,
and the writes queued together share one transaction and its commit (group
commit), so fewer threads would mean more commits: on a slow disk, 8 made half
the writes a second of 32."""
READ_THREADS: Final = 8
"""Threads for the coroutines' reads, of their own so that a read never queues
behind writes waiting for the writer; a read works the CPU while it runs."""

T = TypeVar("T")


class AsyncPool:
    """The thread pools, one for writes and one for reads, each made at its
    first call and shut at close()."""

    def __init__(self) -> None:
        self._executors: dict[bool, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    async def run(self, call: Callable[[], T], *, reads: bool = False) -> T:
        """`call()` on the pool (the reads' with `reads`: a call that writes
        nothing), in a copy of the caller's context (its structlog and tracing
        context go with it), awaited without blocking the loop."""
        with self._lock:
            executor = self._executors.get(reads)
            if executor is None:
                prefix = "headgate-async-read" if reads else "headgate-async"
                executor = self._executors[reads] = ThreadPoolExecutor(
                    READ_THREADS if reads else ASYNC_THREADS, thread_name_prefix=prefix
                )
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            executor, functools.partial(context.run, call)
        )

    def close(self) -> None:
        """Wait for the calls under way (each was asked for), then free the threads."""
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.shutdown(wait=True)


def _is_async_host(connection: object) -> bool:
    """An SQLAlchemy AsyncConnection or AsyncSession (told by its `run_sync`
    coroutine: only the SQL adapter imports SQLAlchemy)."""
    return inspect.iscoroutinefunction(getattr(connection, "run_sync", None))


class AsyncOperations:
    """Headgate's coroutines (mixed into Headgate; see the module's docstring)."""

    _async: AsyncPool

    async def aenqueue(
        self,
        kind: str,
        payload: JsonValue = None,
        *,
        periodic_origin: object = None,
        connection: object = None,
        **options: Unpack[EnqueueArgs],
    ) -> Job:
        """`enqueue`, awaited; `connection` may be an AsyncConnection or AsyncSession."""
        if _is_async_host(connection):
            return await _on_host(
                connection,
                lambda sync: _sync(self).enqueue(
                    kind, payload, periodic_origin=periodic_origin, connection=sync, **options
                ),
            )
        return await self._async.run(
            lambda: _sync(self).enqueue(
                kind, payload, periodic_origin=periodic_origin, connection=connection, **options
            )
        )

    async def aenqueue_many(
        self, jobs: Iterable[Mapping[str, object]], *, connection: object = None
    ) -> list[Job]:
        """`enqueue_many`, awaited; `connection` as for `aenqueue`."""
        items = list(jobs)
        if _is_async_host(connection):
            return await _on_host(
                connection, lambda sync: _sync(self).enqueue_many(items, connection=sync)
            )
        return await self._async.run(lambda: _sync(self).enqueue_many(items, connection=connection))

    async def arun_now(self, schedule_id: str, idempotency_key: str) -> RunNowResult:
        return await self._async.run(lambda: _sync(self).run_now(schedule_id, idempotency_key))

    async def aget_job(self, job_id: str) -> Job:
        return await self._async.run(lambda: _sync(self).get_job(job_id), reads=True)

    async def alist_jobs(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobsPage:
        return await self._async.run(
            lambda: _sync(self).list_jobs(
                state=state,
                queue=queue,
                kind=kind,
                schedule_id=schedule_id,
                search=search,
                limit=limit,
                cursor=cursor,
            ),
            reads=True,
        )

    async def acount_jobs(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        return await self._async.run(
            lambda: _sync(self).count_jobs(
                queue=queue, kind=kind, schedule_id=schedule_id, search=search
            ),
            reads=True,
        )

    async def aretry_jobs(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        return await self._async.run(
            lambda: _sync(self).retry_jobs(
                state=state,
                queue=queue,
                kind=kind,
                schedule_id=schedule_id,
                search=search,
                limit=limit,
            )
        )

    async def acancel_jobs(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        return await self._async.run(
            lambda: _sync(self).cancel_jobs(
                state=state,
                queue=queue,
                kind=kind,
                schedule_id=schedule_id,
                search=search,
                limit=limit,
            )
        )

    async def acancel_job(self, job_id: str) -> Job:
        return await self._async.run(lambda: _sync(self).cancel_job(job_id))

    async def aretry_job(self, job_id: str) -> Job:
        return await self._async.run(lambda: _sync(self).retry_job(job_id))

    async def aput_schedule(
        self, schedule_id: str, *, spec: str, kind: str, **options: Unpack[ScheduleArgs]
    ) -> Schedule:
        return await self._async.run(
            lambda: _sync(self).put_schedule(schedule_id, spec=spec, kind=kind, **options)
        )

    async def aput_schedules(self, schedules: Iterable[Mapping[str, object]]) -> PutSchedulesResult:
        items = list(schedules)
        return await self._async.run(lambda: _sync(self).put_schedules(items))

    async def aupdate_schedule(
        self,
        schedule_id: str,
        *,
        spec: str | None = None,
        kind: str | None = None,
        **changes: Unpack[ScheduleArgs],
    ) -> Schedule:
        return await self._async.run(
            lambda: _sync(self).update_schedule(schedule_id, spec=spec, kind=kind, **changes)
        )

    async def apause_schedule(self, schedule_id: str) -> Schedule:
        return await self._async.run(lambda: _sync(self).pause_schedule(schedule_id))

    async def aresume_schedule(self, schedule_id: str) -> Schedule:
        return await self._async.run(lambda: _sync(self).resume_schedule(schedule_id))

    async def adelete_schedule(self, schedule_id: str) -> None:
        await self._async.run(lambda: _sync(self).delete_schedule(schedule_id))

    async def aenqueue_events(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> EnqueueEventsPage:
        return await self._async.run(
            lambda: _sync(self).enqueue_events(schedule_id, limit, cursor), reads=True
        )

    async def aschedule_runs(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> ScheduleRunsPage:
        return await self._async.run(
            lambda: _sync(self).schedule_runs(schedule_id, limit, cursor), reads=True
        )

    async def aschedule_health(self, schedule_id: str) -> ScheduleHealth:
        return await self._async.run(lambda: _sync(self).schedule_health(schedule_id), reads=True)

    async def aget_schedule(self, schedule_id: str) -> Schedule:
        return await self._async.run(lambda: _sync(self).get_schedule(schedule_id), reads=True)

    async def alist_schedules(
        self,
        limit: int = 200,
        cursor: str | None = None,
        *,
        search: str | None = None,
        health: str | None = None,
    ) -> SchedulesPage:
        return await self._async.run(
            lambda: _sync(self).list_schedules(limit, cursor, search=search, health=health),
            reads=True,
        )


async def on_pool(hg: Headgate, call: Callable[[], T], *, reads: bool = False) -> T:
    """`call()` on `hg`'s pool (the reads' with `reads`), as its coroutines run
    theirs: for code of this package whose one request makes several calls (the
    web app's routes: a schedule and its health), each request then takes one
    turn of the pool."""
    return await hg._async.run(call, reads=reads)


def _sync(operations: AsyncOperations) -> Headgate:
    """The Headgate these coroutines are mixed into, with its synchronous calls."""
    return cast("Headgate", operations)


async def _on_host(connection: Any, call: Callable[[Any], T]) -> T:
    """`call(sync)` on an async host's own connection or session (`run_sync`)."""
    result: T = await connection.run_sync(call)
    return result
