"""/api/v1's activity roll-up and spec preview."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from headgate._domain.spec import MAX_INSTANT_MS
from headgate._wire.activity import ActivityList, ActivityPointOut
from headgate._wire.schedules import (
    SpecPreview,
    preview,
)
from headgate.web._api import api_router, headgate_of, in_store
from headgate.web._params import QueryInt

router = api_router()


@router.get(
    "/activity",
    response_model=ActivityList,
    summary="The per-minute activity roll-up (default: the last three hours)",
)
async def activity(
    request: Request, since_ms: Annotated[QueryInt | None, Query(ge=0, le=MAX_INSTANT_MS)] = None
) -> ActivityList:
    points = await in_store(request, lambda hg: hg.metrics.activity(since_ms), reads=True)
    return ActivityList(points=[ActivityPointOut.of(point) for point in points])


@router.get(
    "/spec-preview", response_model=SpecPreview, summary="Validate a spec and show its next ticks"
)
async def spec_preview(
    request: Request, spec: Annotated[str, Query(max_length=1024)]
) -> SpecPreview:
    hg = headgate_of(request)
    return preview(spec, hg.clock.now_ms(), hg.config.min_interval_ms)
