"""A namespace's coroutines, derived from its methods.

    class Jobs(Namespace):
        def get(self, job_id: str) -> Job: ...
        aget = twin(get, reads=True)

`await hg.jobs.aget(job_id)` runs `hg.jobs.get(job_id)` on the Headgate's own
thread pool (`_async_api.AsyncPool`: the reads' with `reads`, a call that
writes nothing), so the event loop never waits on the store, with the same
signature for mypy. The names follow Django's habit: an `a` before the name of
the same operation on the same object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from headgate._core import Core

P = ParamSpec("P")
T = TypeVar("T")
N = TypeVar("N", bound="Namespace")


class Namespace:
    """One noun's operations on a Headgate (`hg.<name>`)."""

    name = ""
    """The attribute it is on a Headgate."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"<hg.{self.name} of Headgate>"


def twin(
    method: Callable[Concatenate[N, P], T], *, reads: bool = False
) -> Callable[Concatenate[N, P], Coroutine[Any, Any, T]]:
    """The coroutine of `method`: it runs on the Headgate's pool (the reads'
    with `reads`) in a copy of the caller's context."""

    name = method.__name__

    async def on_pool(self: N, /, *args: P.args, **kwargs: P.kwargs) -> T:
        synchronous: Callable[P, T] = getattr(self, name)  # as the instance has it now
        call = functools.partial(synchronous, *args, **kwargs)
        return await self._core.async_pool.run(call, reads=reads)

    owner = method.__qualname__.rpartition(".")[0]
    on_pool.__name__ = f"a{name}"
    on_pool.__qualname__ = f"{owner}.a{name}"
    on_pool.__doc__ = f"`{name}`, awaited (on the Headgate's thread pool)."
    on_pool.__wrapped__ = method  # type: ignore[attr-defined]  # its signature, for inspect
    return on_pool
