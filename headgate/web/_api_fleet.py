"""/api/v1 of the fleet: workers, declared handlers, the scheduler's health, quarantine."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from headgate._app import Headgate
from headgate._errors import NotFound
from headgate._model import QuarantineEntry
from headgate._wire.fleet import (
    HandlerList,
    HandlerOut,
    LeaseOut,
    SchedulerHealthOut,
    WorkerOut,
    WorkersOut,
)
from headgate._wire.queues import (
    QuarantineIn,
    QuarantineList,
    QuarantineOut,
)
from headgate.web._api import api_router, in_store
from headgate.web._params import QueryInt

router = api_router()


@router.get("/workers", response_model=WorkersOut, summary="Live workers and the scheduler")
async def list_workers(request: Request) -> WorkersOut:
    def read(hg: Headgate) -> WorkersOut:
        now_ms = hg.clock.now_ms()
        lease = hg.runtime.lease()
        return WorkersOut(
            workers=[WorkerOut.of(worker, now_ms) for worker in hg.runtime.workers()],
            scheduler=None if lease is None else LeaseOut.of(lease),
        )

    return await in_store(request, read, reads=True)


@router.get(
    "/handlers",
    response_model=HandlerList,
    summary="Declared handlers: the queue and defaults enqueue routes each kind by",
)
async def list_handlers(request: Request) -> HandlerList:
    handlers = await in_store(request, lambda hg: hg.runtime.declared_handlers(), reads=True)
    return HandlerList(handlers=[HandlerOut.of(handler) for handler in handlers])


@router.get(
    "/scheduler",
    response_model=SchedulerHealthOut,
    summary="Whether anybody fires the ticks (the scheduler lease and the oldest due schedule)",
)
async def scheduler_health(request: Request) -> SchedulerHealthOut:
    return SchedulerHealthOut.of(
        await in_store(request, lambda hg: hg.runtime.scheduler_health(), reads=True)
    )


@router.get("/quarantine", response_model=QuarantineList, summary="Quarantined fingerprints")
async def list_quarantine(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> QuarantineList:
    page = await in_store(request, lambda hg: hg.quarantine.list(limit, cursor), reads=True)
    return QuarantineList(
        entries=[QuarantineOut.of(entry) for entry in page.entries], next_cursor=page.next_cursor
    )


@router.put(
    "/quarantine/{fingerprint}",
    response_model=QuarantineOut,
    summary="Quarantine a fingerprint by hand, with a note",
)
async def quarantine(request: Request, fingerprint: str, body: QuarantineIn) -> QuarantineOut:
    def write(hg: Headgate) -> QuarantineEntry | None:
        hg.quarantine.add(fingerprint, body.note)
        return hg.quarantine.get(fingerprint)

    entry = await in_store(request, write)
    if entry is None:  # released by someone else since this request's write
        raise NotFound(f"fingerprint {fingerprint} was released meanwhile")
    return QuarantineOut.of(entry)


@router.delete(
    "/quarantine/{fingerprint}", status_code=204, summary="Release a quarantined fingerprint"
)
async def release(request: Request, fingerprint: str) -> Response:
    await in_store(request, lambda hg: hg.quarantine.release(fingerprint))
    return Response(status_code=204)
