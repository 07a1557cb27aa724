"""/api/v1/jobs: enqueue, read, count, cancel and retry jobs, one or in bulk."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request

from headgate._app import JOB_COUNT_CAP
from headgate._domain.lifecycle import JobState
from headgate._domain.options import JOB_OPTION_FIELDS, JobOptions
from headgate._operator import operator_of
from headgate._wire.jobs import JobCountsOut, JobIn, JobList, JobOut, JobsBulkIn, JobsBulkOut
from headgate.web._api import api_router, headgate_of, in_store
from headgate.web._params import QueryInt

router = api_router()


@router.post("/jobs", status_code=201, response_model=JobOut, summary="Enqueue an ordinary job")
async def enqueue(request: Request, body: JobIn) -> JobOut:
    fields = body.model_dump()
    origin = fields["periodic_origin"]
    options = JobOptions(**{name: fields[name] for name in JOB_OPTION_FIELDS})
    job = await in_store(
        request,
        lambda hg: operator_of(hg).enqueue_job(fields["kind"], fields["payload"], options, origin),
    )
    return JobOut.of(job)


@router.get("/jobs", response_model=JobList, summary="List jobs, newest first")
async def list_jobs(
    request: Request,
    *,
    state: Annotated[JobState | None, Query()] = None,
    queue: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255)] = None,
    schedule_id: Annotated[str | None, Query(max_length=255)] = None,
    search: Annotated[
        str | None,
        Query(
            max_length=255,
            description="A job id, a unique key, or (with schedule_id) an idempotency key",
        ),
    ] = None,
    limit: Annotated[QueryInt, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobList:
    page = await headgate_of(request).jobs.alist(
        state=state,
        queue=queue,
        kind=kind,
        schedule_id=schedule_id,
        search=search,
        limit=limit,
        cursor=cursor,
    )
    return JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)


@router.get(
    "/jobs:count",
    response_model=JobCountsOut,
    summary="Count jobs per state (bounded), with the filters of GET /jobs",
)
async def count_jobs(
    request: Request,
    *,
    queue: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255)] = None,
    schedule_id: Annotated[str | None, Query(max_length=255)] = None,
    search: Annotated[str | None, Query(max_length=255)] = None,
) -> JobCountsOut:
    counts = await headgate_of(request).jobs.acount(
        queue=queue, kind=kind, schedule_id=schedule_id, search=search
    )
    return JobCountsOut(counts=counts, cap=JOB_COUNT_CAP)


@router.post(
    "/jobs:retry",
    response_model=JobsBulkOut,
    summary="Retry the jobs matching filters (one retryable state; at most 1,000 a call)",
)
async def retry_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(await headgate_of(request).jobs.aretry_many(**_bulk_filters(body)))


@router.post(
    "/jobs:cancel",
    response_model=JobsBulkOut,
    summary="Cancel the jobs matching filters (pending or running; at most 1,000 a call)",
)
async def cancel_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(await headgate_of(request).jobs.acancel_many(**_bulk_filters(body)))


def _bulk_filters(body: JobsBulkIn) -> dict[str, Any]:
    return {**body.model_dump(), "state": body.state.value}


@router.get("/jobs/{job_id}", response_model=JobOut, summary="Inspect a job and its attempts")
async def get_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await headgate_of(request).jobs.aget(job_id))


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a pending or running job (409 from any other state)",
)
async def cancel_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await headgate_of(request).jobs.acancel(job_id))


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Run a failed, cancelled or quarantined job again (409 from any other state)",
)
async def retry_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await headgate_of(request).jobs.aretry(job_id))
