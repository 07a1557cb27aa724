"""The Django app that brings the `headgate_worker` management command, and
opens the task backends' stores with Django's connections to their databases."""

from __future__ import annotations

from django.apps import AppConfig


class HeadgateConfig(AppConfig):  # type: ignore[misc]
    name = "headgate.contrib.django"
    label = "headgate"
    verbose_name = "Headgate"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created  # noqa: PLC0415

        from headgate.contrib.django.backend import open_stores_on  # noqa: PLC0415

        connection_created.connect(open_stores_on, dispatch_uid="headgate-open-stores")
