"""The jobs' commands: enqueue (one, or many in bulk, in the store's transaction
or the host's), cancel, retry (one or in bulk), and finish (for tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from headgate import _tracing as tracing
from headgate._commands.base import BULK_CHUNK, CommandBase, append_one, gate_refusal
from headgate._domain.admission import could_be_stored, require_kind, require_payload
from headgate._domain.cursors import MAX_PAGE
from headgate._domain.decisions import Candidate, decide
from headgate._domain.events import JobCancelled, JobEnqueued, JobFinished, JobRetried
from headgate._domain.ids import (
    fingerprint_of_text,
    job_id_problem,
    new_job_id,
    new_job_ids,
    tick_job_id,
    tick_unique_key,
)
from headgate._domain.lifecycle import (
    ACTION_NEEDS,
    BULK_MAX,
    FINISHED_AS,
    JobAction,
    JobState,
    allows,
    refusal,
)
from headgate._domain.names import require
from headgate._domain.options import JobOptions
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._domain.streams import job_stream
from headgate._errors import JobStateConflict, NotFound, TickHasJob, ValidationError
from headgate._json import JsonValue
from headgate._model import PeriodicOrigin
from headgate._projections import JOBS, JobRow
from headgate._projections.jobs import run_schedule_id
from headgate._store.port import (
    JOBS_ENDED,
    NO_STREAM,
    JobFilter,
    StreamAppend,
    WriteTransaction,
)


@dataclass(frozen=True)
class NewJob:
    """One job of an enqueue_many call: its kind checked, its options chosen."""

    kind: str
    payload: JsonValue
    options: JobOptions


class JobCommands(CommandBase):
    """Jobs enqueued and moved through their lifecycle by hand."""

    def enqueue(
        self,
        kind: object,
        payload: JsonValue,
        options: JobOptions,
        periodic_origin: object = None,
        *,
        within: object = None,
        job_id: str | None = None,
    ) -> JobRow:
        """An ordinary job with its `options` (its queue chosen: the caller knows
        the handlers), to run at `options.run_at_ms` (None: now); written in the
        host's transaction `within` (a SQLAlchemy Connection or Session) when
        given (`EventLog.write_within`), else committed before it returns.
        `job_id`, made beforehand with `new_job_id`, names it for a host that
        must tell its id before the write (an enqueue at its commit).

        With `periodic_origin` (schedule, tick) the job is credited to that tick,
        and one job per tick holds: it takes the tick's own identity (the id and
        unique key the scheduler would give it), and is refused unless the
        schedule exists (ValidationError on periodic_origin.schedule_id), the
        tick has no job yet (TickHasJob, naming the tick's job, in whatever
        state), and the scheduler has passed the tick (tick_ms before the
        schedule's next_run_ms; a tick still to come is the scheduler's to make:
        ValidationError on periodic_origin.tick_ms). So an enqueue credits a tick
        the scheduler skipped (a manual backfill), never one it fires.
        """
        assert options.queue is not None, "the caller chooses the queue"
        origin = _origin(periodic_origin)
        chosen = job_id is not None
        if job_id is None:
            job_id = new_job_id()
        elif origin is not None:
            raise ValidationError("job_id", "a tick's job takes the tick's own id")
        else:
            require("job_id", job_id_problem(job_id))
        if origin is not None:
            tick_key = tick_unique_key(origin.schedule_id, origin.tick_ms)
            if options.unique_key not in (None, tick_key):
                raise ValidationError(
                    "unique_key",
                    f"a job with a periodic_origin holds its tick's key {tick_key!r}; "
                    "leave unique_key out",
                )
            job_id = tick_job_id(origin.schedule_id, origin.tick_ms)
            options = options.keyed(tick_key)
        checked_kind = require_kind(kind)
        with tracing.enqueue_span(checked_kind, options.queue) as carried:
            job = JobEnqueued(
                job_id,
                checked_kind,
                payload,
                options,
                origin.schedule_id if origin else None,
                origin.tick_ms if origin else None,
                trace_context=carried,
            )
            # Checked before the write lock: a bad request must not queue behind writers.
            payload_text = self._validated_payload(job)
            stream = job_stream(job.job_id)
            with self._writing(within) as transaction:
                if origin is not None:
                    _require_unclaimed_tick(transaction, origin, job.unique_key or "")
                elif not chosen:  # new_job_id's: nobody has it yet (a chosen one: NO_STREAM)
                    transaction.new_streams([stream])
                job = self._admit(transaction, job, payload_text)
                (recorded,) = append_one(transaction, [StreamAppend(stream, NO_STREAM, (job,))])
                transaction.notify_enqueued([job.queue])
        row = JOBS.apply(None, recorded)  # the row its projection made of it, not read back
        assert row is not None
        return row

    def enqueue_many(
        self,
        jobs: Sequence[NewJob],
        *,
        within: object = None,
        chunk: int = BULK_CHUNK,
    ) -> list[JobRow]:
        """enqueue for many jobs (their queues chosen), their rows in order.

        Every job is checked before anything is written (a bad payload, or a
        unique key given twice, raises ValidationError naming `jobs[i]`). Then
        they go `chunk` per write transaction, each through the admission gate
        as one batch and all of it or none: a job the gate refuses (a unique key
        held, a quarantined fingerprint, a full queue) raises its error for the
        chunk, a note naming the job. Without `within`, chunks before a failure
        stay written (a note says how many); with it, every chunk is written in
        one savepoint of the host's transaction, and a refusal undoes them all
        (whether the host then commits or rolls back)."""
        queues = {new.options.queue for new in jobs}
        kinds = {new.kind for new in jobs}
        with tracing.enqueue_span(
            kinds.pop() if len(kinds) == 1 else "many kinds",
            queues.pop() if len(queues) == 1 else None,
            len(jobs),
        ) as carried:
            return self._enqueue_checked(jobs, within, chunk, carried)

    def _enqueue_checked(
        self, jobs: Sequence[NewJob], within: object, chunk: int, carried: str | None
    ) -> list[JobRow]:
        checked: list[tuple[JobEnqueued, str]] = []
        keys: dict[str, int] = {}
        for index, (new, job_id) in enumerate(zip(jobs, new_job_ids(len(jobs)), strict=True)):
            job = JobEnqueued(job_id, new.kind, new.payload, new.options, trace_context=carried)
            try:
                payload_text = self._validated_payload(job)
            except ValidationError as error:
                raise ValidationError(f"jobs[{index}].{error.field}", error.rule) from None
            if job.unique_key is not None:
                earlier = keys.setdefault(job.unique_key, index)
                if earlier != index:
                    raise ValidationError(
                        f"jobs[{index}].unique_key",
                        f"{job.unique_key!r} is also jobs[{earlier}]'s (one job holds a key)",
                    )
            checked.append((job, payload_text))
        rows: list[JobRow] = []
        if within is not None:
            # One write in the host's transaction (one savepoint): a refused job
            # undoes the whole call even if the host catches it and commits.
            with self._writing(within) as transaction:
                for start in range(0, len(checked), chunk):
                    rows.extend(self._admit_chunk(transaction, checked[start : start + chunk]))
            return rows
        for start in range(0, len(checked), chunk):
            try:
                with self._writing(None) as transaction:
                    rows.extend(self._admit_chunk(transaction, checked[start : start + chunk]))
            except Exception as error:
                if start:
                    error.add_note(
                        f"enqueue_many: jobs[0:{start}] of {len(checked)} were enqueued "
                        "before this error, the rest were not"
                    )
                raise
        return rows

    def _admit_chunk(
        self, transaction: WriteTransaction, checked: Sequence[tuple[JobEnqueued, str]]
    ) -> list[JobRow]:
        """The gate's decisions on a chunk of new jobs as one batch (each sees the
        ones before it), and the admitted jobs appended; raises for a refusal."""
        transaction.new_streams(job_stream(job.job_id) for job, _ in checked)
        candidates = [
            Candidate(job, fingerprint_of_text(job.kind, text), len(text.encode()))
            for job, text in checked
        ]
        limited = sorted(
            {c.job.queue for c in candidates if self._limits.limit_for(c.job.queue) is not None}
        )
        facts = transaction.gate_facts(candidates, limited)
        admitted: list[JobEnqueued] = []
        for candidate in candidates:
            decision = decide(candidate, facts, self._limits)
            refusal = gate_refusal(decision, candidate.job, self._limits)
            if refusal is not None:
                refusal.add_note(f"enqueue_many: refused job {candidate.job.job_id}")
                raise refusal
            admitted.append(decision.admitted(candidate.job))
        units = [[StreamAppend(job_stream(job.job_id), NO_STREAM, (job,))] for job in admitted]
        rows: list[JobRow] = []
        for result in transaction.append_units(units):
            if isinstance(result, Exception):
                raise result
            (recorded,) = result
            row = JOBS.apply(None, recorded)
            assert row is not None
            rows.append(row)
        transaction.notify_enqueued(sorted({job.queue for job in admitted}))
        return rows

    def check_payload(self, payload: JsonValue) -> None:
        """A job's payload checked as enqueue checks it (ValidationError), unwritten."""
        require_payload(payload, self._limits.max_payload_bytes)

    def cancel_job(self, job_id: str) -> JobRow:
        """Cancel a pending or running job (a running one's worker is told to stop, and
        whatever its handler returns is not recorded)."""
        return self._transition(job_id, JobCancelled, JobAction.CANCEL)

    def retry_job(self, job_id: str) -> JobRow:
        """Send a failed, cancelled or quarantined job back to run now, its attempt and
        crash counts reset (its fingerprint stays quarantined until released)."""
        return self._transition(job_id, JobRetried, JobAction.RETRY)

    def _transition(
        self, job_id: str, event_type: type[JobCancelled | JobRetried], action: JobAction
    ) -> JobRow:
        with self._log.write() as transaction:
            row = transaction.job(job_id)
            if row is None:
                raise NotFound(f"no job {job_id!r}")
            refused = refusal(action, job_id, row.state)
            if refused is not None:
                raise JobStateConflict(refused)
            event = event_type(job_id, run_schedule_id(row))
            append_one(transaction, [StreamAppend(job_stream(job_id), row.version, (event,))])
            if isinstance(event, JobRetried):
                transaction.notify_enqueued([row.queue])
            else:
                _announce_cancelled(transaction, running=row.state == JobState.RUNNING)
            updated = transaction.job(job_id)
        assert updated is not None
        return updated

    def bulk_transition(self, where: JobFilter, action: JobAction, limit: object) -> BulkOutcome:
        """Cancel or retry the newest `limit` jobs `where` matches (one state, which
        the action must allow), each its own event at the version it was read at:
        a job that moved on meanwhile (claimed and ended, retried, cancelled) is
        skipped and counted, never an error, and never stops the others."""
        _require_bulk_state(where.state, action)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= BULK_MAX:
            raise ValidationError(
                "limit", f"must be an integer from 1 to {BULK_MAX}, got {limit!r}"
            )
        candidates, more = self._bulk_candidates(where, limit)
        event_of = JobRetried if action is JobAction.RETRY else JobCancelled
        with self._log.write() as transaction:
            now = transaction.jobs([row.job_id for row in candidates])
            chosen = [
                row
                for row in candidates
                if row.job_id in now and allows(action, now[row.job_id].state)
            ]
            results = transaction.append_units(
                [
                    [StreamAppend(job_stream(row.job_id), row.version, (event_of(row.job_id),))]
                    for row in chosen
                ]
            )
            changed = [
                row
                for row, result in zip(chosen, results, strict=True)
                if not isinstance(result, Exception)
            ]
            if action is JobAction.RETRY and changed:
                transaction.notify_enqueued(sorted({row.queue for row in changed}))
            elif changed:
                running = any(now[row.job_id].state == JobState.RUNNING for row in changed)
                _announce_cancelled(transaction, running=running)
        return BulkOutcome(
            tuple(row.job_id for row in changed), len(candidates) - len(changed), more
        )

    def _bulk_candidates(self, where: JobFilter, limit: int) -> tuple[list[JobRow], bool]:
        """The newest `limit` matching rows (read a page at a time), and whether more match."""
        rows: list[JobRow] = []
        cursor: str | None = None
        while True:
            page = self._reads.jobs_page(where, min(MAX_PAGE, limit - len(rows)), cursor)
            rows.extend(page.items)
            cursor = page.next_cursor
            if cursor is None or len(rows) >= limit:
                return rows, cursor is not None

    def finish_job(self, job_id: str, state: object) -> JobRow:
        finished = {state.value: state for state in FINISHED_AS}
        if not isinstance(state, str) or state not in finished:
            raise ValidationError("state", f"must be one of {', '.join(finished)}, got {state!r}")
        stream = job_stream(job_id)
        with self._log.write() as transaction:
            row = transaction.job(job_id)
            if row is None:
                raise NotFound(f"no job {job_id!r}")
            if not allows(JobAction.FINISH, row.state):
                raise ValidationError("state", f"job {job_id} already finished as {row.state}")
            version = transaction.stream_versions([stream])[stream]
            event = JobFinished(job_id, finished[state], run_schedule_id(row))
            append_one(transaction, [StreamAppend(stream, version, (event,))])
            updated = transaction.job(job_id)
        assert updated is not None
        return updated


def _require_unclaimed_tick(
    transaction: WriteTransaction, origin: PeriodicOrigin, tick_key: str
) -> None:
    """One job per tick: an enqueue may credit only a tick of a live schedule that
    has no job and that the scheduler has passed (it never fires it again)."""
    schedule_id, tick_ms = origin.schedule_id, origin.tick_ms
    row = transaction.schedule(schedule_id)
    if row is None or row.deleted:
        raise ValidationError("periodic_origin.schedule_id", f"no schedule {schedule_id!r}")
    existing = transaction.job_for_tick(schedule_id, tick_ms)
    if existing is not None:
        raise TickHasJob(schedule_id, tick_ms, existing.job_id, tick_key)
    if tick_ms >= row.next_run_ms:
        raise ValidationError(
            "periodic_origin.tick_ms",
            f"tick {tick_ms} of schedule {schedule_id!r} is not before its next run "
            f"({row.next_run_ms}): the scheduler makes that tick's job when it fires it; "
            "an enqueue may credit only a tick the scheduler has passed",
        )


def _origin(value: object) -> PeriodicOrigin | None:
    if value is None:
        return None
    if isinstance(value, PeriodicOrigin):
        return value
    if isinstance(value, dict):
        schedule_id, tick_ms = value.get("schedule_id"), value.get("tick_ms")
    elif isinstance(value, tuple) and len(value) == 2:
        schedule_id, tick_ms = value
    else:
        raise ValidationError("periodic_origin", "must be {schedule_id, tick_ms} or null")
    if schedule_id is None or tick_ms is None:
        raise ValidationError("periodic_origin", "needs both schedule_id and tick_ms, or neither")
    in_range = isinstance(tick_ms, int) and 0 <= tick_ms <= MAX_INSTANT_MS
    if isinstance(tick_ms, bool) or not in_range:
        raise ValidationError(
            "periodic_origin.tick_ms", f"must be an integer of epoch ms, 0 to {MAX_INSTANT_MS}"
        )
    if not isinstance(schedule_id, str):
        raise ValidationError(
            "periodic_origin.schedule_id", f"must be a string, got {type(schedule_id).__name__}"
        )
    if not could_be_stored(schedule_id):  # before hashing it into the tick's id
        raise ValidationError("periodic_origin.schedule_id", f"no schedule {schedule_id!r}")
    return PeriodicOrigin(schedule_id, tick_ms)


@dataclass(frozen=True)
class BulkOutcome:
    changed: tuple[str, ...]
    """The jobs retried or cancelled."""
    skipped: int
    """Jobs read as matching that changed state before the write: left as they are."""
    more: bool
    """More jobs match than this call took."""


def _announce_cancelled(transaction: WriteTransaction, *, running: bool) -> None:
    """A cancel ends its jobs: whoever waits on one (`JobHandle.wait`, in any
    process) is told at once (`JOBS_ENDED`), and a running one's worker is told to
    stop it (`notify_jobs_taken`)."""
    transaction.notify_enqueued([JOBS_ENDED])
    if running:
        transaction.notify_jobs_taken()


def _require_bulk_state(state: str | None, action: JobAction) -> None:
    allowed = sorted(ACTION_NEEDS[action])
    if state is None or state not in allowed:
        raise ValidationError(
            "state",
            f"a bulk {action.value} names one state of {', '.join(allowed)}, got {state!r}",
        )
