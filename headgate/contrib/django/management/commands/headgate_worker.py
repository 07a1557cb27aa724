"""`python manage.py headgate_worker`: run the project's Django tasks.

The tasks of every installed app's `tasks` module are imported (Celery's
habit), each a handler of the backend's Headgate, and workers run them on
the backend's QUEUES (or `--queue NAME=N`) until SIGTERM or Ctrl-C, which
give running tasks the shutdown timeout to finish. The flags are those of
`headgate worker`.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import autodiscover_modules

from headgate._logs import configure_logging
from headgate._runtime.config import DEFAULT_CAPACITY
from headgate._worker_flags import add_worker_flags, worker_config
from headgate.contrib.django._tasks import InvalidTaskBackendError, task_backends
from headgate.contrib.django.backend import HeadgateBackend


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run Headgate workers for this project's tasks (no scheduler, no web server)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--backend", default="default", help="the TASKS alias to run (default: default)"
        )
        add_worker_flags(parser)

    def handle(self, *args: object, **options: Any) -> None:
        alias = options["backend"]
        try:
            backend = task_backends[alias]
        except InvalidTaskBackendError as error:
            raise CommandError(f"--backend: no TASKS backend {alias!r} ({error})") from None
        if not isinstance(backend, HeadgateBackend):
            raise CommandError(
                f"--backend: TASKS[{alias!r}] is {type(backend).__name__}, not HeadgateBackend"
            )
        configure_logging()
        autodiscover_modules("tasks")
        tasks = len(backend.tasks)
        config = worker_config(
            argparse.Namespace(**options),
            default_queues=dict.fromkeys(sorted(backend.queues), DEFAULT_CAPACITY),
        )
        stopping = threading.Event()
        for handled in (signal.SIGTERM, signal.SIGINT):
            signal.signal(handled, lambda *_: stopping.set())
        hg = backend.headgate
        hg.start(config, scheduler=False)
        self.stderr.write(
            f"headgate: worker running {tasks} task(s) of TASKS[{alias!r}] on "
            f"{', '.join(sorted(config.queues or {}))}"
        )
        try:
            stopping.wait()
        finally:
            hg.stop()
        self.stderr.write("headgate: worker stopped")
