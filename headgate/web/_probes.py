"""Probes for load balancers and orchestrators (Kubernetes' liveness and readiness).

`/healthz`: the process answers (it reads nothing, so a store outage never gets
a healthy process restarted). `/readyz`: it can serve, its store answering at
this build's schema revision with every table the API reads there and readable
(a row of each, every column: a table dropped by hand would make every API call
a 503 while the revision still read right); its answer also says whether
anybody fires the ticks (`scheduler`), which does not decide readiness. Both
are open without the API token (probes carry none) and left out of the OpenAPI
document: they are for the infrastructure, not API clients
(docs/reference/http-api.md documents them). A reason is a stable
code and a sentence; the error behind it, which may name the store's host, goes
only to the log.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from headgate._app import Headgate
from headgate._errors import StoreError
from headgate.web._errors import log

HEALTH_PATHS: Final = frozenset({"/healthz", "/readyz"})
_REASONS: Final = {
    "store_unreachable": "the store cannot be reached",
    "store_closed": "this Headgate was closed",
    "schema_behind": "the store's schema is behind this build: start a process that migrates it",
    "schema_too_new": "a newer Headgate migrated the store: upgrade this one",
    "schema_incomplete": "a table this build needs is missing from the store: see the log",
}
router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """Async, so it answers on the event loop even while every worker thread is busy."""
    return JSONResponse({"status": "ok"})


def _scheduler(hg: Headgate) -> dict[str, str]:
    """Whether anybody fires the ticks: a detail of readiness, not a condition of
    it (an API with no scheduler anywhere still serves; the fleet needs one)."""
    try:
        health = hg.runtime.scheduler_health()
    except StoreError:
        return {"state": "unknown", "message": "the store could not be read"}
    return {"state": health.state, "message": health.message}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    hg: Headgate = request.app.state.headgate
    readiness = hg.runtime.readiness()
    if readiness.ready:
        return JSONResponse(
            {
                "status": "ready",
                "schema_revision": readiness.schema_revision,
                "scheduler": _scheduler(hg),
            }
        )
    reason = readiness.reason or "store_unreachable"
    log.warning(
        "not ready", reason=reason, error_type=readiness.error_type, detail=readiness.detail
    )
    return JSONResponse(
        {"status": "unavailable", "reason": reason, "message": _REASONS[reason]},
        status_code=503,
    )
