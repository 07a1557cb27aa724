"""The operations only Headgate's own surfaces call: the web API and console,
the command line, the Django backend. Not public: their shapes follow what
those surfaces need (a definition made beforehand, a PATCH body's fields, a
job id chosen before the write), and may change with them.

    operator_of(hg).put_definition(schedule_id, definition)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from headgate._commands import NewJob
from headgate._core import Core
from headgate._domain.job_rules import DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT_MS
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._facade.queues import queue_status
from headgate._facade.schedules import put_definition, update_fields
from headgate._json import JsonValue
from headgate._model import (
    Job,
    JobSettings,
    PutScheduleResult,
    QueueStatus,
    Schedule,
    SettingInForce,
)

T = TypeVar("T")


class Operator:
    """One Headgate's operations for its surfaces (see the module's docstring)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def put_definition(self, schedule_id: str, definition: ScheduleDefinition) -> PutScheduleResult:
        """`hg.schedules.put` with a ScheduleDefinition made beforehand, saying
        whether it created the schedule, updated it or found it so already."""
        return put_definition(self._core, schedule_id, definition)

    def update_schedule_fields(self, schedule_id: str, changes: Mapping[str, object]) -> Schedule:
        """`hg.schedules.update` with the changes as a mapping of flat field names
        (`SCHEDULE_FIELDS`), as the API's PATCH body gives them."""
        return update_fields(self._core, schedule_id, changes)

    def count_schedules(self, *, search: str | None = None, health: str | None = None) -> int:
        """How many schedules `hg.schedules.list` pages through with this `search`
        and `health`."""
        return self._core.reads.schedule_count(search, self._core.runs.filter(health))

    def enqueue_job(
        self,
        kind: str,
        payload: JsonValue,
        options: JobOptions,
        periodic_origin: object = None,
        connection: object = None,
        *,
        job_id: str | None = None,
    ) -> Job:
        """`hg.enqueue` with its options as a JobOptions made beforehand; `job_id`,
        a UUID made beforehand (`_domain.ids.new_job_id`), names the job before it
        is written (for an integration that enqueues at its host's commit, and
        must say the id first). The kind and payload are checked as `hg.enqueue`
        checks them (a task's signature, the handlers' declarations): every
        surface enqueues by kind."""
        self._core.check_kind(kind, payload)
        return self._core.enqueue_job(
            kind, payload, options, periodic_origin, connection, job_id=job_id
        )

    def check_job(self, kind: str, payload: JsonValue, options: JobOptions) -> None:
        """What enqueue_job checks before it writes (the payload, the queue its
        kind goes to), raising its ValidationError, with nothing written: for an
        integration that enqueues later, at its host's commit."""
        self._core.check_kind(kind, payload)
        self._core.chosen_at_enqueue(kind, options)
        self._core.commands.check_payload(payload)

    def enqueue_new_jobs(self, new_jobs: Sequence[NewJob], connection: object = None) -> list[Job]:
        """`hg.enqueue_many` of jobs checked beforehand."""
        return self._core.enqueue_new_jobs(new_jobs, connection)

    def job_settings(self, job: Job) -> JobSettings:
        """The attempt limit and timeout `job` runs under, and where each comes
        from: its own, else its kind's handler's (if registered here), else
        Headgate's default, which a handler registered only in another process
        may override."""
        spec = self._core.handlers.get(job.kind)
        return JobSettings(
            SettingInForce.of(
                job.max_attempts, spec.max_attempts if spec else None, DEFAULT_MAX_ATTEMPTS
            ),
            SettingInForce.of(
                job.timeout_ms, spec.timeout_ms if spec else None, DEFAULT_TIMEOUT_MS
            ),
        )

    def queue_status(self, queue: str) -> QueueStatus:
        """One queue's status (a queue nobody used yet: not paused, no jobs)."""
        return queue_status(self._core, queue)

    def revoke_session(self, session_id: str, expires_at_ms: int) -> None:
        """End a login session (`headgate.web`'s console logout) in every process on
        this store, restarted ones included, until `expires_at_ms`, when it would
        have expired anyway. `session_id`: the session's own id (1 to 64 of
        base64url's characters; else ValueError), not its secret value."""
        self._core.store.sessions.revoke(session_id, expires_at_ms)

    def session_revoked(self, session_id: str) -> bool:
        """Whether `revoke_session` ended this session (in any process) and it has
        not expired since: read from the store at each call."""
        return self._core.store.sessions.is_revoked(session_id)

    async def on_pool(self, call: Callable[[], T], *, reads: bool = False) -> T:
        """`call()` on the Headgate's pool (the reads' with `reads`), as its
        coroutines run theirs: for a surface whose one request makes several
        calls (the web app's routes: a schedule and its health), each request
        then takes one turn of the pool."""
        return await self._core.async_pool.run(call, reads=reads)

    def give_back_running_jobs_now(self) -> None:
        """Cut short a stop that waits for running handlers (what a second Ctrl-C
        does): their jobs are given back at once, unfinished and uncounted, for
        another worker to run. Safe from a signal handler; nothing if no stop
        waits, or until one starts."""
        self._core.give_back_asked.set()
        pool = self._core.stopping_pool
        if pool is not None:
            pool.give_back_now()


class _HasOperator(Protocol):
    @property
    def _operator(self) -> Operator: ...


def operator_of(hg: _HasOperator) -> Operator:
    """The operator service of this Headgate."""
    return hg._operator
