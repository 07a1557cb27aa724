"""The handler of every Django task's jobs: it finds the task by the job's kind
and calls it with the job's arguments, as Django's own backends do.

It is one module-level function, so it runs in a thread of the worker or, with
`executor="process"` in the backend's OPTIONS, in a child process (which sets
Django up from DJANGO_SETTINGS_MODULE first). Django's database connections
are closed around each task when they are unusable or past their
CONN_MAX_AGE, as Django does around each request.
"""

from __future__ import annotations

from typing import Any

import django
from django.apps import apps
from django.db import close_old_connections
from django.utils import timezone

from headgate._json import JsonValue
from headgate._runtime.handlers import JobContext
from headgate.contrib.django._tasks import (
    FAILED,
    RUNNING,
    SUCCESSFUL,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from headgate.contrib.django.results import arguments_of, task_of

WORKER_NAME = "headgate"


def run_task(job: JobContext) -> JsonValue:
    """Run the Django task of this job; its return value is the job's result."""
    if not apps.ready:
        django.setup()
    task = task_of(job.kind)
    args, kwargs = arguments_of(job.payload)
    result = _running(task, job, args, kwargs)
    sender = type(task.get_backend())
    task_started.send(sender=sender, task_result=result)
    close_old_connections()
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
    except BaseException as error:
        result.errors.append(
            TaskError(exception_class_path=_path(type(error)), traceback=str(error))
        )
        _finish(result, FAILED)
        task_finished.send(sender=sender, task_result=result)
        raise
    finally:
        close_old_connections()
    _finish(result, SUCCESSFUL)
    object.__setattr__(result, "_return_value", value)
    task_finished.send(sender=sender, task_result=result)
    return value


def _running(
    task: Task[Any, Any], job: JobContext, args: list[Any], kwargs: dict[str, Any]
) -> TaskResult[Any]:
    now = timezone.now()
    return TaskResult(
        task=task,
        id=job.id,
        status=RUNNING,
        enqueued_at=None,
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=[WORKER_NAME] * job.attempt,  # so that TaskContext.attempt is the job's
    )


def _finish(result: TaskResult[Any], status: TaskResultStatus) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())


def _path(kind: type[BaseException]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"
