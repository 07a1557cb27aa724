"""`hg.jobs`: jobs read, listed, counted, retried and cancelled."""

from __future__ import annotations

from collections.abc import Collection

from headgate._core import JOB_COUNT_CAP, job_filter
from headgate._domain.definition_history import parse_instant
from headgate._domain.lifecycle import BULK_MAX, JobAction
from headgate._facade.twins import Namespace, twin
from headgate._history import History, JobAsOf
from headgate._model import BulkResult, Job, JobAttempt, JobsPage


class Jobs(Namespace):
    """A Headgate's jobs: `hg.jobs.get(job_id)`, `hg.jobs.retry(job_id)`."""

    name = "jobs"

    def get(self, job_id: str) -> Job:
        """A job, with its newest attempts (newest first) and, if it is due and
        pending, what holds it back (`waiting_for`)."""
        return self._core.get_job(job_id)

    def as_of(self, job_id: str, as_of: int | str) -> JobAsOf:
        """The job as its events left it at `as_of` (epoch ms or ISO-8601): its
        state, attempts and errors then. NotFound when the log keeps none of
        its events (compaction removes a finished job whole)."""
        instant = parse_instant("as_of", as_of)
        return History(self._core.store.log).job_as_of(job_id, instant)

    def count(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        """Per state, the jobs `list` with these filters shows, each counted up to
        JOB_COUNT_CAP (a count of JOB_COUNT_CAP means that many or more:
        counting stops there so that a page showing them stays quick)."""
        where = job_filter(None, queue, kind, schedule_id, search)
        return self._core.reads.state_counts(where, JOB_COUNT_CAP)

    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttempt]:
        """Each job's newest ended attempt (its duration and error), by job id,
        in one read; jobs that have none are left out."""
        rows = self._core.reads.latest_attempts(job_ids)
        return {job_id: JobAttempt.from_row(row) for job_id, row in rows.items()}

    def waiting_for(self, job: Job) -> tuple[str, ...]:
        """Why a due pending job has not started, in words: its queue paused, a
        full concurrency limit, a used-up rate class, no live worker running its
        kind on its queue (unless a handler of its kind is registered in this
        process, which runs it: `drain`, `start`). Empty: nothing holds it back
        but free workers, or it is not pending and due."""
        return self._core.waiting_for(job)

    def cancel(self, job_id: str) -> Job:
        """Cancel a pending or running job; JobStateConflict from any other state. A
        running one's handler is told (`job.cancelled`): at once in this process,
        and in another as soon as it hears of it (on PostgreSQL a notification, on
        SQLite its next look at the file, within about 50 ms)."""
        job = Job.from_row(self._core.commands.cancel_job(job_id))
        self._core.tell_workers_jobs_taken()
        return job

    def retry(self, job_id: str) -> Job:
        """Run a failed, cancelled or quarantined job again, now, with its attempt and
        crash counts reset; JobStateConflict from any other state."""
        job = Job.from_row(self._core.commands.retry_job(job_id))
        self._core.poke_workers()
        return job

    def retry_many(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        """`retry` for the newest `limit` (at most BULK_MAX) jobs `list` shows with
        these filters; `state` is required and one retry allows. A job that
        changed state since it was read is skipped and counted, not an error."""
        where = job_filter(state, queue, kind, schedule_id, search)
        outcome = self._core.commands.bulk_transition(where, JobAction.RETRY, limit)
        if outcome.changed:
            self._core.poke_workers()
        return BulkResult(
            "retry", len(outcome.changed), outcome.skipped, outcome.more, outcome.changed
        )

    def cancel_many(
        self,
        *,
        state: str,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = BULK_MAX,
    ) -> BulkResult:
        """`cancel` for the newest `limit` (at most BULK_MAX) pending or running jobs
        `list` shows with these filters; `state` is required. A job that changed
        state since it was read is skipped and counted, not an error."""
        where = job_filter(state, queue, kind, schedule_id, search)
        outcome = self._core.commands.bulk_transition(where, JobAction.CANCEL, limit)
        if outcome.changed:
            self._core.tell_workers_jobs_taken()
        return BulkResult(
            "cancel", len(outcome.changed), outcome.skipped, outcome.more, outcome.changed
        )

    def list(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        kind: str | None = None,
        schedule_id: str | None = None,
        search: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobsPage:
        """Jobs, newest first, filtered; pass next_cursor back for the next page.
        `schedule_id`: the jobs that schedule made, its ticks' and its Enqueue
        now's (`Job.run_now_schedule_id` tells the manual ones). `search`: the
        job with this id, the jobs with this unique key, and, with `schedule_id`,
        the job its Enqueue now made with this idempotency key."""
        where = job_filter(state, queue, kind, schedule_id, search)
        page = self._core.reads.jobs_page(where, limit, cursor)
        return JobsPage([Job.from_row(row) for row in page.items], page.next_cursor)

    aget = twin(get, reads=True)
    acount = twin(count, reads=True)
    acancel = twin(cancel)
    aretry = twin(retry)
    aretry_many = twin(retry_many)
    acancel_many = twin(cancel_many)
    alist = twin(list, reads=True)
