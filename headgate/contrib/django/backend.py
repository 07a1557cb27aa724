"""`HeadgateBackend`: Django tasks as Headgate jobs.

Settings::

    TASKS = {
        "default": {
            "BACKEND": "headgate.contrib.django.HeadgateBackend",
            "QUEUES": ["default", "emails"],  # the queues tasks may name
            "OPTIONS": {"max_attempts": 5, "timeout_s": 300},
        }
    }

OPTIONS, every one optional:

* `database`: the Django database alias the store lives in ("default"). Its
  tables sit beside Django's; an enqueue inside `transaction.atomic()` on it
  is written in that transaction, so the job commits or rolls back with the
  caller's rows.
* `url`: a store elsewhere (a Headgate store URL) instead. An enqueue inside
  an atomic block on `database` is then written at its commit
  (`transaction.on_commit`), under an id chosen at once; a process that dies
  between the commit and that write loses the job, as with every on_commit.
* `executor`, and the job options of a handler (`max_attempts`, `timeout_s` or
  `timeout_ms`, `start_within_ms`, `rate_class`): every task's job defaults,
  as for `Headgate.handler`. Headgate retries a failed task (25 attempts with
  backoff by default); `"max_attempts": 1` is Django's own habit.

Each task is a handler of kind `Task.module_path`, on its `queue_name`, with
its `priority` and `run_after`. Its result is the job (`get_result(id)`), whose
task is found among the tasks this process has registered, never by importing
the module a job's kind names.
`python manage.py headgate_worker` runs the tasks of every installed app's
`tasks` module.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction

from headgate._app import Headgate
from headgate._domain.ids import new_job_id
from headgate._domain.option_keywords import JobOptionArgs, job_options
from headgate._domain.options import JobOptions
from headgate._errors import NotFound, ValidationError
from headgate._logs import get_logger
from headgate._operator import operator_of
from headgate._runtime.handlers import Executor, handler_spec, require_executor
from headgate.contrib.django._tasks import (
    READY,
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    task_backends,
    task_enqueued,
)
from headgate.contrib.django.connection import lent, store_url
from headgate.contrib.django.results import payload_of, registered_task, result_of
from headgate.contrib.django.runner import run_task

log = get_logger("headgate.django")

TASK_OWN: Final = frozenset({"queue", "priority"})
"""The options each task sets itself (`Task.queue_name`, `Task.priority`)."""
JOB_DEFAULTS: Final = frozenset(JobOptionArgs.__annotations__) - TASK_OWN
"""The handler options OPTIONS may set for every task: every option a handler
takes (`JobOptionArgs`) but those each task sets itself."""
OWN_OPTIONS: Final = frozenset({"database", "url", "executor"})


class HeadgateBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._shared = _shared(alias, self.options)

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]:
        """The tasks of this backend this process has seen, by kind (module path)."""
        return dict(self._shared.tasks)

    @property
    def headgate(self) -> Headgate:
        """This backend's Headgate (one per alias and process), opened on first use."""
        return self._shared.headgate()

    def keeps_store_in(self, database: str) -> bool:
        """Whether this backend's store lives in the Django database `database`."""
        return self._shared.same_database and self._shared.database == database

    def validate_task(self, task: Task[Any, Any]) -> None:
        """Django's checks, then the task's handler is registered (so that a
        worker, or `headgate.drain()` in a test, runs it)."""
        super().validate_task(task)
        self._shared.register(task)

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        self.validate_task(task)
        payload = payload_of(args, kwargs)
        run_at = task.run_after
        options = JobOptions(
            queue=task.queue_name,
            priority=task.priority,
            run_at_ms=None if run_at is None else int(run_at.timestamp() * 1000),
        )
        hg = self.headgate
        database = self._shared.database
        host = connections[database]
        if not host.in_atomic_block:
            job = operator_of(hg).enqueue_job(task.module_path, payload, options)
        elif self._shared.same_database:
            with lent(host) as connection:
                job = operator_of(hg).enqueue_job(
                    task.module_path, payload, options, connection=connection
                )
        else:
            return self._enqueue_on_commit(task, payload, options, database)
        result = result_of(job, task, self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any]:
        try:
            job = self.headgate.jobs.get(result_id)
        except (NotFound, ValidationError):
            raise TaskResultDoesNotExist(result_id) from None
        task = registered_task(job.kind, self._shared.tasks, result_id, self.alias)
        return result_of(job, task, self.alias)

    def _enqueue_on_commit(
        self, task: Task[Any, Any], payload: Any, options: JobOptions, database: str
    ) -> TaskResult[Any]:
        hg = self.headgate
        operator_of(hg).check_job(
            task.module_path, payload, options
        )  # a bad argument fails here, not at commit
        job_id = new_job_id()

        def write() -> None:
            try:
                operator_of(hg).enqueue_job(task.module_path, payload, options, job_id=job_id)
            except Exception as error:
                log.error(
                    "a task to enqueue at its commit was not written: it is lost",
                    job_id=job_id,
                    kind=task.module_path,
                    error_type=type(error).__name__,
                )
                raise

        # robust: a failure is logged (by Django too) and the host's other
        # on_commit callbacks still run; its rows are committed by now.
        transaction.on_commit(write, using=database, robust=True)
        args, kwargs = payload["args"], payload["kwargs"]
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=job_id,
            status=READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result


@dataclass
class _Shared:
    """What every thread's instance of one backend alias shares in a process."""

    alias: str
    database: str
    url: str | None
    executor: Executor
    defaults: dict[str, Any]
    """Every task's job options (`Headgate.handler`'s keywords), checked."""
    tasks: dict[str, Task[Any, Any]] = field(default_factory=dict)
    opened: Headgate | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def same_database(self) -> bool:
        return self.url is None

    def headgate(self) -> Headgate:
        with self.lock:
            if self.opened is None:
                url = self.url or store_url(connections[self.database].settings_dict)
                self.opened = Headgate(url)
                for task in self.tasks.values():
                    self._add_handler(self.opened, task)
            return self.opened

    def register(self, task: Task[Any, Any]) -> None:
        with self.lock:
            if task.module_path in self.tasks:
                return
            self.tasks[task.module_path] = task
            if self.opened is not None:
                self._add_handler(self.opened, task)

    def _add_handler(self, hg: Headgate, task: Task[Any, Any]) -> None:
        register = hg.handler(
            task.module_path, executor=self.executor, queue=task.queue_name, **self.defaults
        )
        register(run_task)


_SHARED: dict[str, _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _shared(alias: str, options: Mapping[str, Any]) -> _Shared:
    with _SHARED_LOCK:
        shared = _SHARED.get(alias)
        if shared is None:
            shared = _SHARED[alias] = _configured(alias, options)
        return shared


def _configured(alias: str, options: Mapping[str, Any]) -> _Shared:
    where = f"TASKS[{alias!r}]['OPTIONS']"
    unknown = sorted(set(options) - JOB_DEFAULTS - OWN_OPTIONS)
    if unknown:
        known = ", ".join(sorted(JOB_DEFAULTS | OWN_OPTIONS))
        raise ImproperlyConfigured(f"{where}: unknown option {unknown[0]!r} (known: {known})")
    database = options.get("database", "default")
    url = options.get("url")
    if not isinstance(database, str) or (url is not None and not isinstance(url, str)):
        raise ImproperlyConfigured(f"{where}: 'database' and 'url' are strings")
    try:
        executor = require_executor(options.get("executor", "thread"))
        defaults = {name: options[name] for name in JOB_DEFAULTS if name in options}
        handler_spec("task", run_task, JobOptions(**job_options(defaults)), executor=executor)
    except ValidationError as error:
        raise ImproperlyConfigured(f"{where}: {error}") from None
    return _Shared(alias, database, url, executor, defaults)


_WARNED_NOT_OPENED: set[str] = set()
"""The task backends whose store did not open with their database, warned of."""


def forget_backends() -> None:
    """Close every backend's Headgate and forget them (for tests that change TASKS)."""
    with _SHARED_LOCK:
        shared = list(_SHARED.values())
        _SHARED.clear()
        _WARNED_NOT_OPENED.clear()
    for each in shared:
        if each.opened is not None:
            each.opened.close()


def open_stores_on(sender: object, connection: Any, **_: object) -> None:
    """Open the store of every Headgate task backend kept in the database Django
    has just connected to (Django's `connection_created`), before Django begins
    a transaction on it: opening a store writes (its schema), and inside an
    atomic block on SQLite the write lock is the block's, so a store first
    opened by an enqueue there would wait for a lock it can never get.

    A store that cannot open now (an in-memory test database, a store not
    yet reachable) is left to open at its first use, which raises there; it
    is warned of once per backend, not at every connection Django opens."""
    from django.conf import settings  # noqa: PLC0415 (read at the signal, once Django is set up)

    for alias in getattr(settings, "TASKS", {}):
        try:
            backend = task_backends[alias]
            if not isinstance(backend, HeadgateBackend):
                continue
            if backend.keeps_store_in(connection.alias):
                backend.headgate  # noqa: B018 (opened on first use)
        except Exception as error:
            with _SHARED_LOCK:
                warned = alias in _WARNED_NOT_OPENED
                _WARNED_NOT_OPENED.add(alias)
            if warned:
                continue
            log.warning(
                "a Headgate task backend's store did not open with its database; "
                "it opens at its first use",
                backend=alias,
                error_type=type(error).__name__,
            )
