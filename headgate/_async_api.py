"""The thread pools a Headgate's coroutines run on, and an async host's connection.

`await hg.aenqueue(...)` runs `hg.enqueue(...)` (and `await hg.jobs.aget(...)`
`hg.jobs.get(...)`: `_facade/twins.py`) on a small thread pool of the
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

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


def is_async_host(connection: object) -> bool:
    """An SQLAlchemy AsyncConnection or AsyncSession (told by its `run_sync`
    coroutine: only the SQL adapter imports SQLAlchemy)."""
    return inspect.iscoroutinefunction(getattr(connection, "run_sync", None))


async def on_host(connection: Any, call: Callable[[Any], T]) -> T:
    """`call(sync)` on an async host's own connection or session (`run_sync`)."""
    result: T = await connection.run_sync(call)
    return result
