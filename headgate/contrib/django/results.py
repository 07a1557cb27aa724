"""Headgate jobs as Django task results, and the job a task's enqueue makes.

A Django task's job has the task's dotted path (`Task.module_path`) as its
kind and `{"args": [...], "kwargs": {...}}` as its payload; its id is the
result's id. Its state reads as Django's statuses: pending is READY (a
failed attempt waiting for its retry too: Django's "ready to be executed
again"), running RUNNING, completed SUCCESSFUL, and failed, cancelled or
quarantined FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from django.utils.module_loading import import_string

from headgate._domain.lifecycle import FAILED_OUTCOMES
from headgate._json import JsonValue
from headgate._model import Job
from headgate.contrib.django._tasks import (
    FAILED,
    READY,
    RUNNING,
    SUCCESSFUL,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
)

STATUSES: Final = {
    "pending": READY,
    "running": RUNNING,
    "completed": SUCCESSFUL,
    "failed": FAILED,
    "cancelled": FAILED,
    "quarantined": FAILED,
}


def payload_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> JsonValue:
    return {"args": list(args), "kwargs": dict(kwargs)}


def arguments_of(payload: JsonValue) -> tuple[list[Any], dict[str, Any]]:
    if not isinstance(payload, dict):
        raise TypeError("a Django task's job carries {'args': [...], 'kwargs': {...}}")
    args = payload.get("args", [])
    kwargs = payload.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise TypeError("a Django task's job carries {'args': [...], 'kwargs': {...}}")
    return args, kwargs


def registered_task(
    kind: str, tasks: Mapping[str, Task[Any, Any]], result_id: str, backend: str
) -> Task[Any, Any]:
    """The task among `tasks` (those a backend has registered) whose jobs have this
    kind. Nothing is imported: a job's kind is whatever its enqueue said (the
    HTTP API takes any), so importing the module it names would run that
    module's code. A task registers itself when its module is imported (Django's
    `@task`), as every caller of `Task.get_result` has done."""
    task = tasks.get(kind)
    if task is None:
        raise TaskResultDoesNotExist(
            f"{result_id}: its job's kind {kind!r} is no task of the backend {backend!r} in "
            "this process (a task is known once the module defining it is imported)"
        )
    return task


def task_of(kind: str) -> Task[Any, Any]:
    """The task whose jobs have this kind (its module is imported if need be): for
    the handler of a backend's own jobs, whose kinds are its registered tasks',
    in a child process that has not imported them yet."""
    try:
        found = import_string(kind)
    except ImportError as error:
        raise TaskResultDoesNotExist(f"no task {kind!r}: {error}") from None
    if not isinstance(found, Task):
        raise TaskResultDoesNotExist(f"{kind!r} is not a task")
    return found


def result_of(job: Job, task: Task[Any, Any], backend: str) -> TaskResult[Any]:
    """What Django is told of a job."""
    args, kwargs = arguments_of(job.payload)
    ended = list(reversed(job.attempt_history))  # oldest first
    started = [a.started_at_ms for a in ended if a.started_at_ms is not None and a.attempt > 0]
    workers = [a.worker_id for a in ended if a.worker_id is not None and a.attempt > 0]
    running = job.running_attempt
    if running is not None:
        started.append(running.started_at_ms)
        workers.append(running.worker_id or "")
    status = STATUSES.get(job.state, READY)
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=job.id,
        status=status,
        enqueued_at=_when(job.created_at_ms),
        started_at=_when(started[0]) if started else None,
        last_attempted_at=_when(started[-1]) if started else None,
        finished_at=_when(job.updated_at_ms) if status in _FINISHED else None,
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=[
            TaskError(
                exception_class_path=_class_path(a.error_type),
                traceback=a.traceback or a.error_message or "",
            )
            for a in ended
            if a.outcome in FAILED_OUTCOMES and a.error_type is not None
        ],
        worker_ids=workers,
    )
    if status == SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


_FINISHED: Final = frozenset({SUCCESSFUL, FAILED})


def _when(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def _class_path(error_type: str) -> str:
    """A stored error type as an importable path: builtins are stored bare."""
    return error_type if "." in error_type else f"builtins.{error_type}"
