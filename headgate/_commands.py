"""The write side of the control API: validate, decide, append.

Each command validates every field before touching the store (a bad request
writes nothing), then decides and appends inside one serialised write
transaction of the store port, so it reads exactly the state it changes.
Every job a command creates passes the admission gate (`decisions.decide`);
a refusal becomes an exception here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final

from headgate import _actors as actors
from headgate import _tracing as tracing
from headgate._domain.admission import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_NOTE_LENGTH,
    MAX_QUEUE_LENGTH,
    AdmissionLimits,
    could_be_stored,
    kind_problem,
    require_fingerprint,
    require_kind,
    require_name,
    require_note,
    require_optional_key,
    require_payload,
)
from headgate._domain.cursors import MAX_PAGE
from headgate._domain.decisions import Candidate, Decision, Reason, decide
from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    DomainEvent,
    FingerprintQuarantined,
    FingerprintReleased,
    JobCancelled,
    JobEnqueued,
    JobFinished,
    JobRetried,
    ManualRunRequested,
    QueuePaused,
    QueueResumed,
    RateLimitCleared,
    RateLimitSet,
    RecordedEvent,
    ScheduleDefined,
    ScheduleDeleted,
    ScheduleUndeclared,
)
from headgate._domain.ids import (
    fingerprint_of_text,
    job_id_problem,
    manual_job_id,
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
from headgate._domain.limits import ConcurrencyLimit, RateLimit, scope_of
from headgate._domain.names import fingerprint_problem, require
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._domain.ownership import declared_definition
from headgate._domain.schedule_load import Ceilings, Load, load_problem
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, interval_problem, parse_spec
from headgate._domain.streams import (
    job_stream,
    limit_stream,
    manual_run_stream,
    quarantine_stream,
    queue_stream,
    rate_stream,
    schedule_stream,
)
from headgate._domain.tick_timing import TickTiming
from headgate._errors import (
    AdmissionRejected,
    ConcurrencyConflict,
    DuplicateJob,
    JobStateConflict,
    NotFound,
    TickHasJob,
    ValidationError,
)
from headgate._json import JsonValue
from headgate._model import PeriodicOrigin, RunNowResult
from headgate._projections import JOBS, SCHEDULES, JobRow, ScheduleRow
from headgate._projections.jobs import run_schedule_id
from headgate._projections.schedules import declared_of, definition_of
from headgate._store.port import NO_STREAM, JobFilter, Store, StreamAppend, WriteTransaction

CREATED: Final = "created"
UPDATED: Final = "updated"
UNCHANGED: Final = "unchanged"
BULK_CHUNK: Final = 500
"""Schedules per write transaction in put_schedules."""


@dataclass(frozen=True)
class Settings:
    """The server's settings a request is checked against (beyond the value
    objects' own rules): what this Headgate's RuntimeConfig says."""

    limits: AdmissionLimits
    min_interval_ms: int
    ceilings: Ceilings
    """The store-wide ceilings on schedules (`schedule_load`)."""


def require_allowed(
    definition: ScheduleDefinition, settings: Settings, only: Collection[str] | None = None
) -> None:
    """The rules a server's settings add to a definition: its spec ticks no more
    often than the minimum interval, its payload is within the size limit.
    `only`: check just these flat fields (the ones a change touches), so a
    schedule stored under laxer settings can still be paused or re-timed."""
    if only is None or "spec" in only:
        require("spec", interval_problem(parse_spec(definition.spec), settings.min_interval_ms))
    if only is None or "payload" in only:
        require_payload(definition.payload, settings.limits.max_payload_bytes)


def definitions_of(
    items: Iterable[object], settings: Settings, *, id_field: str = "schedule_id"
) -> list[tuple[str, ScheduleDefinition]]:
    """Every item of a put_schedules call, validated before anything is written.

    Each item is a mapping of the definition's flat fields (`SCHEDULE_FIELDS`)
    plus `id_field` (the schedule's id). The first bad item raises a
    ValidationError naming it by index and field (`schedules[3].spec: ...`); so
    does an id already given by an earlier item (one call defines each
    schedule once).
    """
    definitions: list[tuple[str, ScheduleDefinition]] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"schedules[{index}]"
        if not isinstance(item, Mapping):
            raise ValidationError(where, f"must be a mapping, got {type(item).__name__}")
        try:
            if id_field not in item:
                raise ValidationError(id_field, "is required")
            schedule_id = require_name(id_field, item[id_field])
            fields = {name: value for name, value in item.items() if name != id_field}
            definition = ScheduleDefinition.from_fields(fields)
            require_allowed(definition, settings)
        except ValidationError as error:
            raise ValidationError(f"{where}.{error.field}", error.rule) from None
        earlier = first_index.setdefault(schedule_id, index)
        if earlier != index:
            raise ValidationError(
                f"{where}.{id_field}",
                f"{schedule_id!r} is also schedules[{earlier}] (a call defines each schedule once)",
            )
        definitions.append((schedule_id, definition))
    return definitions


@dataclass(frozen=True)
class NewJob:
    """One job of an enqueue_many call: its kind checked, its options chosen."""

    kind: str
    payload: JsonValue
    options: JobOptions


@dataclass(frozen=True)
class Put:
    """One schedule to upsert: by an operator, or declared by the host's code."""

    schedule_id: str
    definition: ScheduleDefinition
    declared_by: str | None = None
    """The declarations group, when the host's code declares it (`periodic`):
    then `definition` is the code's, and the operator's overrides are kept."""
    changed_by: str | None = None
    """Who asks for it, when not what `declared_by` and the acting operator say
    (`_actors`): a runtime pausing what its code no longer declares."""


def _put_definitions(
    transaction: WriteTransaction,
    puts: Sequence[Put],
    *,
    name: int | None,
    first_ticks: dict[str, int] | None = None,
) -> list[tuple[ScheduleRow | None, str]]:
    """Upsert these schedules (distinct ids) in one write transaction: their
    rows read in one go, their streams' versions in one more, one append.
    Returns each one's outcome, in order, with its row for a single
    put_schedule (None in bulk, where nobody reads them). `name`: the index of the
    first definition in its call, to name an item in an error (None: a single
    put_schedule, whose errors name the field alone). `first_ticks`: specs'
    first ticks after an earlier instant of the same call (tenants' schedules
    often share a spec), still each spec's first tick after now while in the
    future; filled in here."""
    current = transaction.schedules([put.schedule_id for put in puts])
    now = transaction.now_ms
    ticks = {} if first_ticks is None else first_ticks
    results: list[tuple[ScheduleRow | None, str] | None] = []
    changed: list[tuple[int, ScheduleRow | None, ScheduleDefined]] = []
    for offset, put in enumerate(puts):
        row = current.get(put.schedule_id)
        live = row if row is not None and not row.deleted else None
        try:
            event = _defined(put, live, now, ticks)
        except ValidationError as error:
            if name is None:
                raise
            raise ValidationError(f"schedules[{name + offset}].{error.field}", error.rule) from None
        if event is None:
            assert live is not None
            results.append((live, UNCHANGED))
            continue
        results.append(None)
        changed.append((offset, live, event))
    if changed:
        streams = [schedule_stream(event.schedule_id) for _, _, event in changed]
        versions = transaction.stream_versions(streams)
        appended = transaction.append_units(
            [
                [StreamAppend(stream, versions[stream], (event,))]
                for stream, (_, _, event) in zip(streams, changed, strict=True)
            ]
        )
        for (offset, before, _), result in zip(changed, appended, strict=True):
            if isinstance(result, Exception):
                raise result
            # The row the projector wrote, folded the same way here (a definition
            # is a whole snapshot of the row) rather than read back; only a single
            # put_schedule returns it.
            row = SCHEDULES.apply(before, result[0]) if name is None else None
            results[offset] = (row, CREATED if before is None else UPDATED)
    return [result for result in results if result is not None]


def _defined(
    put: Put, live: ScheduleRow | None, now: int, ticks: dict[str, int]
) -> ScheduleDefined | None:
    """The event that makes the schedule what `put` asks, or None when it is
    that already. Its next run keeps the phase when the spec fires the same
    ticks, else it is the spec's first tick after now, and no tick comes before
    the start; an item's error is named by `Put`'s caller."""
    stored = definition_of(live) if live is not None else None
    previous = declared_of(live) if live is not None else None
    if put.declared_by is None:
        definition, declared = put.definition, previous
        declared_by = live.declared_by if live is not None else None
    else:
        declared, declared_by = put.definition, put.declared_by
        definition = declared_definition(put.definition, stored, previous)
    if (
        live is not None
        and stored is not None
        and stored.same_as(definition)
        and _same_declaration(previous, declared)
        and live.declared_by == declared_by
        and (declared is None or live.undeclared_at_ms is None)
    ):
        return None
    if live is not None and _fires_like(live.spec, definition.spec):
        next_run = live.next_run_ms  # the same ticks, perhaps respelled: same phase
    elif ticks.get(definition.spec, now) > now:
        next_run = ticks[definition.spec]
    else:
        next_run = _first_tick_after(definition.spec, now)
        ticks[definition.spec] = next_run
    timing = _timing_of(put.schedule_id, definition)
    if live is not None and live.start_at_ms != definition.start_at_ms:
        # A start moved earlier or dropped: the kept phase may sit at the old
        # start; it comes back to the first tick after now the new bounds allow.
        next_run = min(next_run, _first_allowed_after(timing, now))
    next_run = _not_before_start(timing, next_run)
    return ScheduleDefined(
        schedule_id=put.schedule_id,
        definition=definition,
        next_run_ms=next_run,
        last_enqueued_ms=live.last_enqueued_ms if live is not None else None,
        due_at_ms=timing.due_at_ms(next_run),
        declared=declared,
        declared_by=declared_by,
        changed_by=_changed_by(put),
    )


def _changed_by(put: Put) -> str:
    if put.changed_by is not None:
        return put.changed_by
    if put.declared_by is not None:
        return actors.code(put.declared_by)
    return actors.current()


def _same_declaration(one: ScheduleDefinition | None, other: ScheduleDefinition | None) -> bool:
    if one is None or other is None:
        return one is other
    return one.same_as(other)


def _timing_of(schedule_id: str, definition: ScheduleDefinition) -> TickTiming:
    return TickTiming(
        schedule_id,
        parse_spec(definition.spec),
        definition.start_at_ms,
        definition.end_at_ms,
        definition.jitter_ms,
    )


class Commands:
    def __init__(self, store: Store, settings: Settings) -> None:
        self._log = store.log
        self._reads = store.reads
        self._clock = store.clock
        self._settings = settings
        self._limits = settings.limits

    def put_schedule(self, put: Put) -> tuple[ScheduleRow, str]:
        """Create or replace a schedule's definition; returns the row and the outcome
        (CREATED, UPDATED or UNCHANGED).

        An unchanged spec keeps next_run_ms (the schedule's phase); a new or
        changed spec anchors to its first tick strictly after now. Either way
        no tick comes before `start_at_ms`, and one whose next tick is past
        `end_at_ms` is finished. A request identical to what is stored writes
        nothing.
        """
        require_allowed(put.definition, self._settings)
        self._require_within_ceilings([put], field=None)
        with self._log.write() as transaction:
            ((row, outcome),) = _put_definitions(transaction, [put], name=None)
        assert row is not None
        return row, outcome

    def update_schedule(self, schedule_id: str, changes: Mapping[str, object]) -> ScheduleRow:
        """Change some fields of a live schedule's definition (flat
        `SCHEDULE_FIELDS`), keeping the rest; only the changed fields are
        checked. NotFound for a schedule that does not exist; changing nothing,
        or to what it is, writes nothing."""
        with self._log.write() as transaction:
            row = _require_live_schedule(transaction, schedule_id)
            definition = definition_of(row).changed(changes)
            require_allowed(definition, self._settings, only=changes.keys())
            if "spec" in changes:
                self._require_within_ceilings([Put(schedule_id, definition)], field=None)
            ((updated, _),) = _put_definitions(
                transaction, [Put(schedule_id, definition)], name=None
            )
        assert updated is not None
        return updated

    def clear_overrides(self, schedule_id: str) -> ScheduleRow:
        """Make a schedule declared in code what its code declares again (a
        schedule only operators define has nothing to clear: ValidationError)."""
        with self._log.write() as transaction:
            row = _require_live_schedule(transaction, schedule_id)
            declared = declared_of(row)
            if declared is None:
                raise ValidationError(
                    "schedule_id",
                    f"schedule {schedule_id!r} is not declared in code: it has no overrides",
                )
            self._require_within_ceilings([Put(schedule_id, declared)], field=None)
            ((updated, _),) = _put_definitions(transaction, [Put(schedule_id, declared)], name=None)
        assert updated is not None
        return updated

    def put_schedules(self, puts: Sequence[Put], chunk: int = BULK_CHUNK) -> list[str]:
        """put_schedule for many validated definitions (distinct ids), `chunk` per
        write transaction; returns each one's outcome (CREATED, UPDATED or
        UNCHANGED), in order.

        Each chunk commits on its own (all of it or none), so other writers (the
        scheduler's ticks) wait for one chunk at most, never for the whole call.
        A store error stops the call: the chunks before it stay written (a note
        on the error says how many), and repeating the call is safe, since what
        is already stored writes nothing.
        """
        _require_ticks_left(puts, self._clock.now_ms())
        self._require_within_ceilings(puts, field="schedules")
        outcomes: list[str] = []
        first_ticks: dict[str, int] = {}
        for start in range(0, len(puts), chunk):
            part = puts[start : start + chunk]
            try:
                with self._log.write() as transaction:
                    done = _put_definitions(transaction, part, name=start, first_ticks=first_ticks)
            except Exception as error:
                if start:
                    error.add_note(
                        f"put_schedules: schedules[0:{start}] of {len(puts)} were "
                        "written before this error, the rest were not; repeating the call "
                        "is safe (what is already stored writes nothing)"
                    )
                raise
            outcomes.extend(outcome for _, outcome in done)
        return outcomes

    def _require_within_ceilings(self, puts: Sequence[Put], *, field: str | None) -> None:
        """ValidationError when these schedules would take the store past a
        ceiling (`schedule_load`), naming `field` ("schedules" for a bulk call;
        None: "spec" for the tick rate, "schedule_id" for the count)."""
        if not puts:
            return
        kept = self._reads.spec_counts(excluding=[put.schedule_id for put in puts])
        after = Load.of(kept).plus(put.definition.spec for put in puts)
        if not after.over(self._settings.ceilings):
            return  # the store as it was is read only for a write that would be refused
        before = Load.of(self._reads.spec_counts())
        problem = load_problem(before, after, self._settings.ceilings)
        if problem is not None:
            ceiling, rule = problem
            raise ValidationError(
                field or ("schedule_id" if ceiling == "max_schedules" else "spec"), rule
            )

    def undeclare(
        self, declared_by: str, still_declared: Collection[str], pause: bool
    ) -> list[str]:
        """Mark the live schedules declared by group `declared_by` that are not in
        `still_declared` undeclared (once), pausing them too with `pause`;
        returns their ids."""
        marked: list[str] = []
        with self._log.write() as transaction:
            rows = transaction.declared_schedules(declared_by)
            gone = [row for row in rows if row.schedule_id not in still_declared]
            fresh = [row for row in gone if row.undeclared_at_ms is None]
            if not fresh:
                return []
            streams = [schedule_stream(row.schedule_id) for row in fresh]
            versions = transaction.stream_versions(streams)
            units: list[list[StreamAppend]] = []
            for row, stream in zip(fresh, streams, strict=True):
                events: list[DomainEvent] = [ScheduleUndeclared(row.schedule_id, declared_by)]
                if pause and not row.paused:
                    paused = definition_of(row).restored_with({"paused": True})
                    by = actors.code(declared_by)
                    put = Put(row.schedule_id, paused, changed_by=by)
                    event = _defined(put, row, transaction.now_ms, {})
                    assert event is not None
                    events.insert(0, event)
                units.append([StreamAppend(stream, versions[stream], tuple(events))])
                marked.append(row.schedule_id)
            for result in transaction.append_units(units):
                if isinstance(result, Exception):
                    raise result
        return marked

    def delete_schedule(self, schedule_id: str) -> None:
        stream = schedule_stream(schedule_id)
        with self._log.write() as transaction:
            _require_live_schedule(transaction, schedule_id)
            version = transaction.stream_versions([stream])[stream]
            _append_one(
                transaction,
                [StreamAppend(stream, version, (ScheduleDeleted(schedule_id, actors.current()),))],
            )

    def run_now(self, schedule_id: str, idempotency_key: object) -> RunNowResult:
        """Enqueue now: one extra job, through the gate, next_run_ms untouched.

        The key's stream is created once; a repeat reads it back, whatever
        happened to the job or the schedule since.
        """
        key = require_optional_key("Idempotency-Key", idempotency_key, MAX_IDEMPOTENCY_KEY_LENGTH)
        if key is None:
            raise ValidationError("Idempotency-Key", "is required")
        if not could_be_stored(schedule_id):  # before hashing it into ids
            raise NotFound(f"no schedule {schedule_id!r}")
        stream = manual_run_stream(schedule_id, key)
        job_id = manual_job_id(schedule_id, key)
        with self._log.write() as transaction:
            earlier = transaction.first_events([stream, job_stream(job_id)])
            if stream in earlier or job_stream(job_id) in earlier:
                # The key's record outlives 24 hours; if it has been compacted
                # away the job it made may still be there: the same key, the same job.
                return RunNowResult(job_id, replayed=True)
            row = _require_live_schedule(transaction, schedule_id)
            definition = definition_of(row)
            job = JobEnqueued(
                job_id,
                definition.kind,
                definition.payload,
                definition.job,
                run_now_schedule_id=schedule_id,
            )
            # A schedule stored before the limits were lowered must meet today's
            # limits, as its automatic ticks do.
            job = self._admit(transaction, job, self._validated_payload(job))
            _append_one(
                transaction,
                [
                    StreamAppend(
                        stream, NO_STREAM, (ManualRunRequested(schedule_id, key, job.job_id),)
                    ),
                    StreamAppend(job_stream(job.job_id), NO_STREAM, (job,)),
                ],
            )
        return RunNowResult(job.job_id, replayed=False)

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
                (recorded,) = _append_one(transaction, [StreamAppend(stream, NO_STREAM, (job,))])
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
            refusal = _refusal(decision, candidate.job, self._limits)
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

    def _writing(self, within: object) -> AbstractContextManager[WriteTransaction]:
        """The store's own write transaction, or one in the host's (`within`)."""
        return self._log.write() if within is None else self._log.write_within(within)

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
            _append_one(transaction, [StreamAppend(job_stream(job_id), row.version, (event,))])
            if isinstance(event, JobRetried):
                transaction.notify_enqueued([row.queue])
            elif row.state == JobState.RUNNING:
                transaction.notify_jobs_taken()
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
            elif any(now[row.job_id].state == JobState.RUNNING for row in changed):
                transaction.notify_jobs_taken()
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
            _append_one(transaction, [StreamAppend(stream, version, (event,))])
            updated = transaction.job(job_id)
        assert updated is not None
        return updated

    def quarantine(self, fingerprint_value: str, note: str = "") -> None:
        stream = quarantine_stream(require_fingerprint(fingerprint_value))
        checked_note = require_note(note, MAX_NOTE_LENGTH)
        with self._log.write() as transaction:
            version = transaction.stream_versions([stream])[stream]
            event = FingerprintQuarantined(fingerprint_value, checked_note)
            _append_one(transaction, [StreamAppend(stream, version, (event,))])

    def release(self, fingerprint_value: str) -> None:
        """Make a fingerprint admissible again: NotFound unless it is quarantined,
        and a ValidationError naming the format for one that could never be (a
        malformed one an earlier build let an operator quarantine is released)."""
        if not could_be_stored(fingerprint_value):
            require("fingerprint", fingerprint_problem(fingerprint_value))
        stream = quarantine_stream(fingerprint_value)
        with self._log.write() as transaction:
            if not transaction.quarantined([fingerprint_value]):
                require("fingerprint", fingerprint_problem(fingerprint_value))
                raise NotFound(f"fingerprint {fingerprint_value} is not quarantined")
            version = transaction.stream_versions([stream])[stream]
            _append_one(
                transaction,
                [StreamAppend(stream, version, (FingerprintReleased(fingerprint_value),))],
            )

    def pause_queue(self, queue: object, note: str = "") -> None:
        """Stop claims from `queue` until it is resumed (running jobs finish). A
        queue need not exist to be paused: jobs enqueued to it wait."""
        name = require_name("queue", queue, MAX_QUEUE_LENGTH)
        checked_note = require_note(note, MAX_NOTE_LENGTH)
        self._set(queue_stream(name), QueuePaused(name, checked_note))

    def resume_queue(self, queue: object) -> None:
        """Let workers claim from `queue` again, and wake those that serve it."""
        name = require_name("queue", queue, MAX_QUEUE_LENGTH)
        self._set(queue_stream(name), QueueResumed(name), wake=[name])

    def set_limit(self, limit: ConcurrencyLimit) -> None:
        """Hold the jobs of `limit`'s scope to `limit.limit` running, fleet-wide
        (replacing that scope's limit), and wake the workers: a raised limit
        lets waiting jobs start."""
        event = ConcurrencyLimitSet(limit.queue, limit.kind, limit.partition_key, limit.limit)
        self._set(limit_stream(limit.scope), event, wake=[limit.queue] if limit.queue else [])

    def clear_limit(self, queue: str | None, kind: str | None, partition_key: str | None) -> bool:
        """Remove the limit on this scope; whether there was one."""
        return self._set(
            limit_stream(scope_of(queue, kind, partition_key)),
            ConcurrencyLimitCleared(queue, kind, partition_key),
            wake=[queue] if queue else [],
            clearing=True,
        )

    def set_rate_limit(self, rate: RateLimit) -> None:
        self._set(
            rate_stream(rate.rate_class), RateLimitSet(rate.rate_class, rate.limit, rate.per_ms)
        )

    def clear_rate_limit(self, rate_class: str) -> bool:
        return self._set(rate_stream(rate_class), RateLimitCleared(rate_class), clearing=True)

    def _set(
        self,
        stream: str,
        event: DomainEvent,
        *,
        wake: Collection[str] = (),
        clearing: bool = False,
    ) -> bool:
        """Append an operator's setting (a queue's pause, a limit, a rate class) to
        its own stream, waking the workers of the queues in `wake`. A clear
        (`clearing`) of a stream that holds no setting (empty, or cleared last)
        appends nothing. Whether it appended."""
        with self._log.write() as transaction:
            version = transaction.stream_versions([stream])[stream]
            if clearing and (version == 0 or type(self._last_event(stream)) is type(event)):
                return False
            _append_one(transaction, [StreamAppend(stream, version, (event,))])
            transaction.notify_enqueued(wake)
        return True

    def _last_event(self, stream: str) -> DomainEvent | None:
        events = self._log.read_stream(stream)
        return events[-1].event if events else None

    def _validated_payload(self, job: JobEnqueued) -> str:
        """The gate's validation, for every job: its kind (as the gate takes it: a
        schedule stored with a kind today's naming rule refuses still runs now),
        and its payload within today's limits. Returns the payload's canonical text."""
        require("kind", kind_problem(job.kind))
        return require_payload(job.payload, self._limits.max_payload_bytes)

    def _admit(
        self, transaction: WriteTransaction, job: JobEnqueued, payload_text: str
    ) -> JobEnqueued:
        """The admission gate, for a job created outside the scheduler
        (`payload_text`: what `_validated_payload` returned for this job);
        raises unless it admits the job as new. Returns the job to append."""
        candidate = Candidate(
            job, fingerprint_of_text(job.kind, payload_text), len(payload_text.encode())
        )
        limited = [job.queue] if self._limits.limit_for(job.queue) is not None else []
        facts = transaction.gate_facts([candidate], limited)
        decision = decide(candidate, facts, self._limits)
        refusal = _refusal(decision, job, self._limits)
        if refusal is not None:
            raise refusal
        return decision.admitted(job)


def _refusal(decision: Decision, job: JobEnqueued, limits: AdmissionLimits) -> Exception | None:
    """What a command raises for the gate's decision, or None when it admits the job."""
    if decision.append_job:
        return None
    if decision.reason is Reason.UNIQUE_KEY:
        assert job.unique_key is not None
        return DuplicateJob(job.unique_key, decision.job_id)
    if decision.reason is Reason.QUARANTINED:
        return AdmissionRejected(
            "quarantined", f"jobs of kind {job.kind!r} with this payload are quarantined"
        )
    if decision.reason is Reason.BACKPRESSURE:
        return AdmissionRejected(
            "backpressure",
            f"queue {job.queue!r} has {limits.limit_for(job.queue)} pending jobs, its limit",
        )
    if decision.reason is Reason.INVALID_REQUEST:
        return ValidationError("payload", "is not admissible under the current limits")
    # The job's id is taken (a replay, or an id collision): a command's ids are
    # fresh or checked first, so another writer got there in between.
    return ConcurrencyConflict(job_stream(job.job_id), NO_STREAM, None)


def _fires_like(stored: str, requested: str) -> bool:
    try:
        return parse_spec(stored).fires_like(parse_spec(requested))
    except InvalidSpec:  # a stored spec this version rejects: the new one replaces it
        return False


def _first_tick_after(spec: str, now_ms: int) -> int:
    try:
        return parse_spec(spec).next_tick_ms(now_ms)
    except InvalidSpec as error:  # no tick left before the calendar ends
        raise ValidationError("spec", str(error)) from None


def _require_ticks_left(puts: Sequence[Put], now_ms: int) -> None:
    """Before a bulk call writes its first chunk: every item has a tick left after
    now within its bounds, or the call fails naming it (a later chunk's write
    would find out only after earlier chunks committed). Checked once per spec
    and start: tenants' schedules mostly share them."""
    checked: set[tuple[str, int | None]] = set()
    for index, put in enumerate(puts):
        definition = put.definition
        bounds = (definition.spec, definition.start_at_ms)
        if bounds in checked:
            continue
        try:
            _first_allowed_after(_timing_of(put.schedule_id, definition), now_ms)
            checked.add(bounds)
        except ValidationError as error:
            field = "start_at_ms" if definition.start_at_ms is not None else "spec"
            raise ValidationError(f"schedules[{index}].{field}", error.rule) from None


def _first_allowed_after(timing: TickTiming, now_ms: int) -> int:
    try:
        return timing.first_tick_ms(now_ms)
    except InvalidSpec as error:  # no tick left before the calendar ends
        raise ValidationError("spec", str(error)) from None


def _not_before_start(timing: TickTiming, next_run_ms: int) -> int:
    try:
        return timing.not_before_start(next_run_ms)
    except InvalidSpec as error:  # no tick left before the calendar ends
        raise ValidationError("spec", str(error)) from None


def _require_live_schedule(transaction: WriteTransaction, schedule_id: str) -> ScheduleRow:
    row = transaction.schedule(schedule_id)
    if row is None or row.deleted:
        raise NotFound(f"no schedule {schedule_id!r}")
    return row


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


def _require_bulk_state(state: str | None, action: JobAction) -> None:
    allowed = sorted(ACTION_NEEDS[action])
    if state is None or state not in allowed:
        raise ValidationError(
            "state",
            f"a bulk {action.value} names one state of {', '.join(allowed)}, got {state!r}",
        )


def _append_one(transaction: WriteTransaction, unit: list[StreamAppend]) -> list[RecordedEvent]:
    (result,) = transaction.append_units([unit])
    if isinstance(result, Exception):
        raise result
    return result
