"""Headgate as a backend of Django's Tasks framework (`django.tasks` in Django 6,
the `django-tasks` package before it).

In settings::

    INSTALLED_APPS = [..., "django_tasks", "headgate.contrib.django"]
    TASKS = {"default": {"BACKEND": "headgate.contrib.django.HeadgateBackend"}}

then `@task` functions enqueue Headgate jobs (`my_task.enqueue(...)`), inside
the caller's transaction when the store lives in the same database, and
`python manage.py headgate_worker` runs them. See `backend.HeadgateBackend`.
"""

from headgate.contrib.django.backend import HeadgateBackend

__all__ = ["HeadgateBackend"]
