"""The project's tasks, found by `manage.py headgate_worker` (it imports every
installed app's `tasks` module)."""

from __future__ import annotations

import os

from django_tasks import TaskContext, task

from tests.django_project.shop.models import Order


@task()
def ship(order_id: int) -> dict[str, str]:
    return {"shipped": Order.objects.get(id=order_id).item}


@task(takes_context=True, queue_name="emails", priority=10)
def mail(context: TaskContext, to: str) -> str:
    return f"mailed {to} on attempt {context.attempt}"


@task()
def refuse(reason: str) -> None:
    _check_stock(reason)


def _check_stock(reason: str) -> None:
    raise ValueError(reason)


@task(backend="elsewhere")
def note(text: str) -> str:
    return text.upper()


@task(backend="children")
def count_orders() -> dict[str, int]:
    """Runs in a child process: Django is set up there, and its ORM works."""
    return {"orders": Order.objects.count(), "pid": os.getpid()}
