"""GET /metrics: Headgate's metrics in Prometheus' text format, for a scraper.

Behind the same optional token as the rest of the app (Prometheus sends it as
`Authorization: Bearer <token>`: `authorization: {credentials: ...}` in a
scrape config), and left out of the OpenAPI document: it is for scrapers,
not API clients. A store that cannot be read still gets an answer, with this
process's counters and `headgate_store_up 0` (headgate._metrics).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from headgate._app import Headgate
from headgate._metrics import CONTENT_TYPE, exposition

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    # A plain (sync) route: the store's figures are read on a worker thread,
    # never on the event loop.
    hg: Headgate = request.app.state.headgate
    return Response(exposition(hg.metrics.registry), media_type=CONTENT_TYPE)
