"""Django's Tasks framework, from Django itself (6.0 and later) or from the
`django-tasks` package that brought it to earlier versions (which the type
checker reads: the two have one API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskBackendError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
else:
    try:
        from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskError
        from django.tasks.exceptions import InvalidTaskBackendError, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import InvalidTaskBackendError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started

# Django's TextChoices read as tuples to a type checker without Django's stubs.
READY = cast("TaskResultStatus", TaskResultStatus.READY)
RUNNING = cast("TaskResultStatus", TaskResultStatus.RUNNING)
SUCCESSFUL = cast("TaskResultStatus", TaskResultStatus.SUCCESSFUL)
FAILED = cast("TaskResultStatus", TaskResultStatus.FAILED)

__all__ = [
    "FAILED",
    "READY",
    "RUNNING",
    "SUCCESSFUL",
    "BaseTaskBackend",
    "InvalidTaskBackendError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
