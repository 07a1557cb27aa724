"""The HTTP control API, /api/v1: a thin translation to the Headgate object, one
router per noun (`_api_schedules`, `_api_jobs`, `_api_fleet`, `_api_flow`,
`_api_activity`, `_history_api`) over what they share here.

Every route is a coroutine: its store calls run on the Headgate's own bounded
pool (`_async_api`; reads on threads of their own, so that they never queue
behind writes waiting for the writer), the ones a request makes together in
one turn of it (`in_store`), and the rest (parsing, validation, the answer's
JSON) on the event loop. A request thus crosses to a thread once, where sync routes crossed for
each dependency, the route itself and its answer's serialization, and the
store sees at most the pool's threads at once, however many clients wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request

from headgate._app import Headgate
from headgate._errors import ValidationError
from headgate._operator import operator_of
from headgate._wire.errors import ErrorOut

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in {
        400: "Malformed request",
        401: "Missing or wrong token (when HEADGATE_API_TOKEN is set)",
        404: "No such schedule, job or quarantined fingerprint",
        409: "Conflict with stored state (e.g. a job's state does not allow the action)",
        413: "Body over 1 MiB",
        415: "Body is not JSON",
        422: "Invalid input: the message names the field and the rule",
        429: "The queue is full (backpressure)",
        503: "The store is unavailable",
    }.items()
}


T = TypeVar("T")


async def _each_query_parameter_once(request: Request) -> None:
    """A query parameter given twice is refused (422), where FastAPI would take
    the last of them silently."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            raise ValidationError(name, "is given more than once")
        seen.add(name)


def api_router() -> APIRouter:
    """A router of /api/v1 (one per noun), with the API's errors and query rule."""
    return APIRouter(
        prefix="/api/v1", responses=ERRORS, dependencies=[Depends(_each_query_parameter_once)]
    )


def headgate_of(request: Request) -> Headgate:
    hg: Headgate = request.app.state.headgate
    return hg


async def in_store(request: Request, call: Callable[[Headgate], T], *, reads: bool = False) -> T:
    """`call(hg)` on the Headgate's pool: the store calls of one request, together
    (with `reads`, calls that write nothing: on the reads' threads, never queued
    behind writes waiting for the writer)."""
    hg = headgate_of(request)
    return await operator_of(hg).on_pool(lambda: call(hg), reads=reads)
