"""/api/v1 of flow control: queues (pauses, unserved work), concurrency limits, rate classes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from headgate._domain.shown import MAX_SHOWN, PAGE_SHOWN, busiest, queue_weight
from headgate._errors import NotFound
from headgate._wire.limits import (
    ConcurrencyLimitOut,
    LimitIn,
    LimitList,
    RateIn,
    RateList,
    RateOut,
)
from headgate._wire.queues import (
    QueueList,
    QueueOut,
    QueuePauseIn,
    UnservedList,
    UnservedOut,
)
from headgate.web._api import api_router, in_store
from headgate.web._params import QueryInt

router = api_router()


@router.get("/queues", response_model=QueueList, summary="Queues: paused or not, jobs waiting")
async def list_queues(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> QueueList:
    """The paused queues and the busiest others (most jobs pending and running),
    `limit` in all, by name; `more`: how many were left out."""
    shown = busiest(
        await in_store(request, lambda hg: hg.queues.list(), reads=True), limit, queue_weight
    )
    return QueueList(queues=[QueueOut.of(status) for status in shown.items], more=shown.more)


@router.post(
    "/queues/{queue}/pause",
    response_model=QueueOut,
    summary="Pause a queue: no process claims its jobs until it is resumed (running ones finish)",
)
async def pause_queue(request: Request, queue: str, body: QueuePauseIn | None = None) -> QueueOut:
    note = "" if body is None else body.note
    return QueueOut.of(await in_store(request, lambda hg: hg.queues.pause(queue, note)))


@router.post(
    "/queues/{queue}/resume",
    response_model=QueueOut,
    summary="Resume a paused queue (resuming one that is not paused changes nothing)",
)
async def resume_queue(request: Request, queue: str) -> QueueOut:
    return QueueOut.of(await in_store(request, lambda hg: hg.queues.resume(queue)))


@router.get(
    "/unserved",
    response_model=UnservedList,
    summary="Pending jobs no live worker runs, by queue and kind",
)
async def list_unserved(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> UnservedList:
    """The `limit` (queue, kind) with the most pending jobs; `more`: how many
    were left out."""
    unserved = await in_store(request, lambda hg: hg.runtime.unserved(), reads=True)
    shown = busiest(unserved, limit, lambda work: work.pending)
    return UnservedList(unserved=[UnservedOut.of(work) for work in shown.items], more=shown.more)


@router.get(
    "/limits", response_model=LimitList, summary="Concurrency limits, with their running jobs"
)
async def list_limits(request: Request) -> LimitList:
    limits = await in_store(request, lambda hg: hg.limits.list(), reads=True)
    return LimitList(limits=[ConcurrencyLimitOut.of(limit) for limit in limits])


@router.put(
    "/limits",
    response_model=ConcurrencyLimitOut,
    summary="Set the fleet-wide limit on running jobs of a scope (queue, kind, partition key)",
)
async def set_limit(request: Request, body: LimitIn) -> ConcurrencyLimitOut:
    status = await in_store(
        request,
        lambda hg: hg.limits.set(
            queue=body.queue, kind=body.kind, partition_key=body.partition_key, limit=body.limit
        ),
    )
    return ConcurrencyLimitOut.of(status)


@router.delete(
    "/limits",
    status_code=204,
    summary="Remove the limit on exactly this scope (404 if it has none)",
)
async def clear_limit(
    request: Request,
    queue: Annotated[str | None, Query()] = None,
    kind: Annotated[str | None, Query()] = None,
    partition_key: Annotated[str | None, Query()] = None,
) -> Response:
    cleared = await in_store(
        request, lambda hg: hg.limits.clear(queue=queue, kind=kind, partition_key=partition_key)
    )
    if not cleared:
        raise NotFound("no limit on that scope")
    return Response(status_code=204)


@router.get(
    "/rates",
    response_model=RateList,
    summary="Rate classes, with their starts in the window ending now",
)
async def list_rate_limits(request: Request) -> RateList:
    rates = await in_store(request, lambda hg: hg.rates.list(), reads=True)
    return RateList(rate_limits=[RateOut.of(rate) for rate in rates])


@router.put(
    "/rates/{rate_class}",
    response_model=RateOut,
    summary="Set a rate class's limit: at most `limit` of its jobs start in any `per_ms`",
)
async def set_rate_limit(request: Request, rate_class: str, body: RateIn) -> RateOut:
    status = await in_store(
        request, lambda hg: hg.rates.set(rate_class, limit=body.limit, per_ms=body.per_ms)
    )
    return RateOut.of(status)


@router.delete(
    "/rates/{rate_class}",
    status_code=204,
    summary="Remove a rate class's limit (404 if it has none)",
)
async def clear_rate_limit(request: Request, rate_class: str) -> Response:
    if not await in_store(request, lambda hg: hg.rates.clear(rate_class)):
        raise NotFound(f"rate class {rate_class!r} has no limit")
    return Response(status_code=204)
