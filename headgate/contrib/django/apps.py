"""The Django app that brings the `headgate_worker` management command."""

from __future__ import annotations

from django.apps import AppConfig


class HeadgateConfig(AppConfig):  # type: ignore[misc]
    name = "headgate.contrib.django"
    label = "headgate"
    verbose_name = "Headgate"
