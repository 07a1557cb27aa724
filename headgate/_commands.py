"""The write side of the control API: validate, decide, append.

Each command validates every field before touching the store (a bad request
writes nothing), then decides and appends inside one serialised write
transaction of the store port, so it reads exactly the state it changes.
Every job a command creates passes the admission gate (`decisions.decide`);
a refusal becomes an exception here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from headgate._domain.admission import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    MAX_NOTE_LENGTH,
    MAX_QUEUE_LENGTH,
    MAX_UNIQUE_KEY_LENGTH,
    AdmissionLimits,
    could_be_stored,
    kind_problem,
    require_bool,
    require_bounds,
    require_fingerprint,
    require_jitter_ms,
    require_kind,
    require_max_attempts,
    require_name,
    require_note,
    require_optional_key,
    require_payload,
    require_policy,
    require_timeout_ms,
)
from headgate._domain.decisions import Candidate, Decision, Reason, decide
from headgate._domain.events import (
    UNFINISHED_STATES,
    DomainEvent,
    FingerprintQuarantined,
    FingerprintReleased,
    JobCancelled,
    JobEnqueued,
    JobFinished,
    JobRetried,
    JobState,
    ManualRunRequested,
    MissedRunPolicy,
    ScheduleDefined,
    ScheduleDeleted,
)
from headgate._domain.ids import (
    fingerprint_of_text,
    manual_job_id,
    new_job_id,
    tick_job_id,
    tick_unique_key,
)
from headgate._domain.names import fingerprint_problem, require
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, interval_problem, parse_spec
from headgate._domain.streams import (
    job_stream,
    manual_run_stream,
    quarantine_stream,
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
from headgate._json import JsonValue, canonical_json
from headgate._model import PeriodicOrigin, RunNowResult
from headgate._projections import SCHEDULES, JobRow, ScheduleRow
from headgate._store.port import NO_STREAM, Store, StreamAppend, WriteTransaction


@dataclass(frozen=True)
class ScheduleDefinition:
    """A validated put_schedule request."""

    schedule_id: str
    spec: str
    kind: str
    queue: str
    payload: JsonValue
    on_missed: str
    backfill_limit: int
    paused: bool
    max_attempts: int | None = None
    timeout_ms: int | None = None
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    jitter_ms: int = 0


def validate_definition(
    schedule_id: object,
    *,
    spec: object,
    kind: object,
    payload: JsonValue,
    queue: object,
    on_missed: object,
    backfill_limit: object,
    paused: object,
    limits: AdmissionLimits,
    min_interval_ms: int,
    max_attempts: object = None,
    timeout_s: object = None,
    start_at_ms: object = None,
    end_at_ms: object = None,
    jitter_ms: object = None,
) -> ScheduleDefinition:
    identifier = require_name("id", schedule_id)
    if not isinstance(spec, str):
        raise ValidationError("spec", f"must be a string, got {type(spec).__name__}")
    try:
        parsed = parse_spec(spec)
    except InvalidSpec as error:
        raise ValidationError("spec", str(error)) from None
    require("spec", interval_problem(parsed, min_interval_ms))
    policy, limit = require_policy(on_missed, backfill_limit)
    require_payload(payload, limits.max_payload_bytes)
    start, end = require_bounds(start_at_ms, end_at_ms)
    jitter = require_jitter_ms(jitter_ms)
    if start is not None and end is not None:
        _require_tick_between(TickTiming(identifier, parsed, start, end), start, end)
    return ScheduleDefinition(
        schedule_id=identifier,
        spec=parsed.text,
        kind=require_kind(kind),
        queue=require_name("queue", queue, MAX_QUEUE_LENGTH),
        payload=payload,
        on_missed=policy.value,
        backfill_limit=limit,
        paused=require_bool("paused", paused),
        max_attempts=None if max_attempts is None else require_max_attempts(max_attempts),
        timeout_ms=None if timeout_s is None else require_timeout_ms(timeout_s),
        start_at_ms=start,
        end_at_ms=end,
        jitter_ms=jitter,
    )


def _require_tick_between(timing: TickTiming, start: int, end: int) -> None:
    try:
        first = timing.first_tick_ms(start - 1) if start > 0 else timing.spec.next_tick_ms(0)
    except InvalidSpec:
        first = None
    if first is None or first > end:
        raise ValidationError(
            "end_at_ms", f"no tick of '{timing.spec.text}' falls from start_at_ms to end_at_ms"
        )


CREATED: Final = "created"
UPDATED: Final = "updated"
UNCHANGED: Final = "unchanged"
BULK_CHUNK: Final = 500
"""Schedules per write transaction in put_schedules."""
_DEFINITION_FIELDS: Final = frozenset(
    {
        "spec",
        "kind",
        "payload",
        "queue",
        "on_missed",
        "backfill_limit",
        "paused",
        "start_at_ms",
        "end_at_ms",
        "jitter_ms",
    }
)
_REQUIRED_FIELDS: Final = ("spec", "kind")


def validate_definitions(
    items: Iterable[object],
    *,
    limits: AdmissionLimits,
    min_interval_ms: int,
    id_field: str = "schedule_id",
    name: str = "schedules",
) -> list[ScheduleDefinition]:
    """Validate every item of a put_schedules call before anything is written.

    Each item is a mapping of put_schedule's keyword names plus `id_field`
    (the schedule's id). The first bad item raises a ValidationError naming it
    by index and field (`schedules[3].spec: ...`); so does an id already given
    by an earlier item (one call defines each schedule once).
    """
    definitions: list[ScheduleDefinition] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"{name}[{index}]"
        if not isinstance(item, Mapping):
            raise ValidationError(where, f"must be a mapping, got {type(item).__name__}")
        unknown = sorted(
            str(key) for key in item if key != id_field and key not in _DEFINITION_FIELDS
        )
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", "is not a known field")
        for required in (id_field, *_REQUIRED_FIELDS):
            if required not in item:
                raise ValidationError(f"{where}.{required}", "is required")
        try:
            definition = validate_definition(
                item[id_field],
                spec=item["spec"],
                kind=item["kind"],
                payload=item.get("payload"),
                queue=item.get("queue", "default"),
                on_missed=item.get("on_missed", "skip"),
                backfill_limit=item.get("backfill_limit", 1),
                paused=item.get("paused", False),
                limits=limits,
                min_interval_ms=min_interval_ms,
                start_at_ms=item.get("start_at_ms"),
                end_at_ms=item.get("end_at_ms"),
                jitter_ms=item.get("jitter_ms"),
            )
        except ValidationError as error:
            field = id_field if error.field == "id" else error.field
            raise ValidationError(f"{where}.{field}", error.rule) from None
        earlier = first_index.setdefault(definition.schedule_id, index)
        if earlier != index:
            raise ValidationError(
                f"{where}.{id_field}",
                f"{definition.schedule_id!r} is also {name}[{earlier}] "
                "(a call defines each schedule once)",
            )
        definitions.append(definition)
    return definitions


def _put_definitions(
    transaction: WriteTransaction,
    definitions: Sequence[ScheduleDefinition],
    *,
    name: int | None,
    first_ticks: dict[str, int] | None = None,
) -> list[tuple[ScheduleRow | None, str]]:
    """Upsert these definitions (distinct ids) in one write transaction: their
    rows read in one go, their streams' versions in one more, one append.
    Returns each one's outcome, in order, with its row for a single
    put_schedule (None in bulk, where nobody reads them). `name`: the index of the
    first definition in its call, to name an item in an error (None: a single
    put_schedule, whose errors name the field alone). `first_ticks`: specs'
    first ticks after an earlier instant of the same call (tenants' schedules
    often share a spec), still each spec's first tick after now while in the
    future; filled in here."""
    current = transaction.schedules([d.schedule_id for d in definitions])
    now = transaction.now_ms
    ticks = {} if first_ticks is None else first_ticks
    results: list[tuple[ScheduleRow | None, str] | None] = []
    changed: list[tuple[int, ScheduleRow | None, ScheduleDefined]] = []
    for offset, definition in enumerate(definitions):
        row = current.get(definition.schedule_id)
        live = row is not None and not row.deleted
        if live and row is not None and _same(row, definition):
            results.append((row, UNCHANGED))
            continue
        if live and row is not None and _fires_like(row.spec, definition.spec):
            next_run = row.next_run_ms  # the same ticks, perhaps respelled: same phase
        elif ticks.get(definition.spec, now) > now:
            next_run = ticks[definition.spec]
        else:
            try:
                next_run = _first_tick_after(definition.spec, now)
            except ValidationError as error:
                if name is None:
                    raise
                raise ValidationError(f"schedules[{name + offset}].spec", error.rule) from None
            ticks[definition.spec] = next_run
        timing = _timing_of(definition)
        try:
            if live and row is not None and row.start_at_ms != definition.start_at_ms:
                # A start moved earlier or dropped: the kept phase may sit at the old
                # start; it comes back to the first tick after now the new bounds allow.
                next_run = min(next_run, _first_allowed_after(timing, now))
            next_run = _not_before_start(timing, next_run)
        except ValidationError as error:
            if name is None:
                raise
            raise ValidationError(f"schedules[{name + offset}].{error.field}", error.rule) from None
        results.append(None)
        event = _defined_event(definition, row, next_run, timing.due_at_ms(next_run))
        changed.append((offset, row if live else None, event))
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


def _timing_of(definition: ScheduleDefinition) -> TickTiming:
    return TickTiming(
        definition.schedule_id,
        parse_spec(definition.spec),
        definition.start_at_ms,
        definition.end_at_ms,
        definition.jitter_ms,
    )


def _defined_event(
    definition: ScheduleDefinition,
    current: ScheduleRow | None,
    next_run_ms: int,
    due_at_ms: int | None,
) -> ScheduleDefined:
    return ScheduleDefined(
        schedule_id=definition.schedule_id,
        spec=definition.spec,
        kind=definition.kind,
        queue=definition.queue,
        payload=definition.payload,
        on_missed=MissedRunPolicy(definition.on_missed),
        backfill_limit=definition.backfill_limit,
        paused=definition.paused,
        next_run_ms=next_run_ms,
        last_enqueued_ms=current.last_enqueued_ms if current is not None else None,
        max_attempts=definition.max_attempts,
        timeout_ms=definition.timeout_ms,
        start_at_ms=definition.start_at_ms,
        end_at_ms=definition.end_at_ms,
        jitter_ms=definition.jitter_ms,
        due_at_ms=due_at_ms,
    )


class Commands:
    def __init__(self, store: Store, limits: AdmissionLimits) -> None:
        self._log = store.log
        self._clock = store.clock
        self._limits = limits

    def put_schedule(self, definition: ScheduleDefinition) -> tuple[ScheduleRow, bool]:
        """Create or change a schedule; returns (row, created).

        An unchanged spec keeps next_run_ms (the schedule's phase); a new or
        changed spec anchors to its first tick strictly after now. Either way
        no tick comes before `start_at_ms`, and one whose next tick is past
        `end_at_ms` is finished. A request identical to what is stored writes
        nothing.
        """
        with self._log.write() as transaction:
            ((row, outcome),) = _put_definitions(transaction, [definition], name=None)
        assert row is not None
        return row, outcome == CREATED

    def put_schedules(
        self, definitions: Sequence[ScheduleDefinition], chunk: int = BULK_CHUNK
    ) -> list[str]:
        """put_schedule for many validated definitions (distinct ids), `chunk` per
        write transaction; returns each one's outcome (CREATED, UPDATED or
        UNCHANGED), in order.

        Each chunk commits on its own (all of it or none), so other writers (the
        scheduler's ticks) wait for one chunk at most, never for the whole call.
        A store error stops the call: the chunks before it stay written (a note
        on the error says how many), and repeating the call is safe, since what
        is already stored writes nothing.
        """
        _require_ticks_left(definitions, self._clock.now_ms())
        outcomes: list[str] = []
        first_ticks: dict[str, int] = {}
        for start in range(0, len(definitions), chunk):
            part = definitions[start : start + chunk]
            try:
                with self._log.write() as transaction:
                    done = _put_definitions(transaction, part, name=start, first_ticks=first_ticks)
            except Exception as error:
                if start:
                    error.add_note(
                        f"put_schedules: schedules[0:{start}] of {len(definitions)} were "
                        "written before this error, the rest were not; repeating the call "
                        "is safe (what is already stored writes nothing)"
                    )
                raise
            outcomes.extend(outcome for _, outcome in done)
        return outcomes

    def set_paused(self, schedule_id: str, paused: bool) -> ScheduleRow:
        """Pause or resume a schedule, keeping its phase: resumed, the ticks it
        missed follow its missed-run policy, exactly as after downtime. Asking
        for the state it is already in writes nothing."""
        stream = schedule_stream(schedule_id)
        with self._log.write() as transaction:
            row = _require_live_schedule(transaction, schedule_id)
            if row.paused == paused:
                return row
            event = ScheduleDefined(
                schedule_id=row.schedule_id,
                spec=row.spec,
                kind=row.kind,
                queue=row.queue,
                payload=_payload(row),
                on_missed=MissedRunPolicy(row.on_missed),
                backfill_limit=row.backfill_limit,
                paused=paused,
                next_run_ms=row.next_run_ms,
                last_enqueued_ms=row.last_enqueued_ms,
                max_attempts=row.max_attempts,
                timeout_ms=row.timeout_ms,
                start_at_ms=row.start_at_ms,
                end_at_ms=row.end_at_ms,
                jitter_ms=row.jitter_ms,
                due_at_ms=_due_at(row),
            )
            version = transaction.stream_versions([stream])[stream]
            _append_one(transaction, [StreamAppend(stream, version, (event,))])
            changed = transaction.schedule(schedule_id)
        assert changed is not None
        return changed

    def delete_schedule(self, schedule_id: str) -> None:
        stream = schedule_stream(schedule_id)
        with self._log.write() as transaction:
            _require_live_schedule(transaction, schedule_id)
            version = transaction.stream_versions([stream])[stream]
            _append_one(
                transaction, [StreamAppend(stream, version, (ScheduleDeleted(schedule_id),))]
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
            job = JobEnqueued(
                job_id, row.kind, row.queue, _payload(row), None, run_now_schedule_id=schedule_id
            )
            # A schedule stored before the limits were lowered must meet today's
            # limits, as its automatic ticks do.
            self._admit(transaction, job, self._validated_payload(job))
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
        payload: JsonValue = None,
        *,
        queue: object = "default",
        unique_key: object = None,
        periodic_origin: object = None,
        run_at_ms: object = None,
        max_attempts: object = None,
        timeout_s: object = None,
    ) -> JobRow:
        """An ordinary job, to run at `run_at_ms` (None: now), with its own attempts
        and timeout (None: its handler's).

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
        origin = _origin(periodic_origin)
        key = require_optional_key("unique_key", unique_key, MAX_UNIQUE_KEY_LENGTH)
        job_id = new_job_id()
        if origin is not None:
            tick_key = tick_unique_key(origin.schedule_id, origin.tick_ms)
            if key not in (None, tick_key):
                raise ValidationError(
                    "unique_key",
                    f"a job with a periodic_origin holds its tick's key {tick_key!r}; "
                    "leave unique_key out",
                )
            job_id, key = tick_job_id(origin.schedule_id, origin.tick_ms), tick_key
        job = JobEnqueued(
            job_id,
            require_kind(kind),
            require_name("queue", queue, MAX_QUEUE_LENGTH),
            payload,
            key,
            origin.schedule_id if origin else None,
            origin.tick_ms if origin else None,
            run_at_ms=_run_at(run_at_ms),
            max_attempts=None if max_attempts is None else require_max_attempts(max_attempts),
            timeout_ms=None if timeout_s is None else require_timeout_ms(timeout_s),
        )
        # Checked before the write lock: a bad request must not queue behind writers.
        payload_text = self._validated_payload(job)
        with self._log.write() as transaction:
            if origin is not None:
                _require_unclaimed_tick(transaction, origin, job.unique_key or "")
            self._admit(transaction, job, payload_text)
            _append_one(transaction, [StreamAppend(job_stream(job.job_id), NO_STREAM, (job,))])
            transaction.notify_enqueued([job.queue])
            row = transaction.job(job.job_id)
        assert row is not None
        return row

    def cancel_job(self, job_id: str) -> JobRow:
        """Cancel a pending or running job (a running one's worker is told to stop, and
        whatever its handler returns is not recorded)."""
        return self._transition(
            job_id, JobCancelled(job_id), allowed=UNFINISHED_STATES, action="cancel"
        )

    def retry_job(self, job_id: str) -> JobRow:
        """Send a failed, cancelled or quarantined job back to run now, its attempt and
        crash counts reset (its fingerprint stays quarantined until released)."""
        return self._transition(
            job_id,
            JobRetried(job_id),
            allowed=frozenset({JobState.FAILED, JobState.CANCELLED, JobState.QUARANTINED}),
            action="retry",
        )

    def _transition(
        self, job_id: str, event: DomainEvent, *, allowed: frozenset[JobState], action: str
    ) -> JobRow:
        with self._log.write() as transaction:
            row = transaction.job(job_id)
            if row is None:
                raise NotFound(f"no job {job_id!r}")
            if JobState(row.state) not in allowed:
                *others, last = sorted(state.value for state in allowed)
                states = f"{', '.join(others)} or {last}" if others else last
                raise JobStateConflict(
                    f"cannot {action} job {job_id}: it is {row.state} "
                    f"({action} needs a {states} job)"
                )
            _append_one(transaction, [StreamAppend(job_stream(job_id), row.version, (event,))])
            if isinstance(event, JobRetried):
                transaction.notify_enqueued([row.queue])
            updated = transaction.job(job_id)
        assert updated is not None
        return updated

    def finish_job(self, job_id: str, state: object) -> JobRow:
        finished = {s.value: s for s in (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)}
        if not isinstance(state, str) or state not in finished:
            raise ValidationError("state", f"must be one of {', '.join(finished)}, got {state!r}")
        stream = job_stream(job_id)
        with self._log.write() as transaction:
            row = transaction.job(job_id)
            if row is None:
                raise NotFound(f"no job {job_id!r}")
            if row.state != JobState.PENDING.value:
                raise ValidationError("state", f"job {job_id} already finished as {row.state}")
            version = transaction.stream_versions([stream])[stream]
            event = JobFinished(job_id, finished[state])
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

    def _validated_payload(self, job: JobEnqueued) -> str:
        """The gate's validation, for every job: its kind (as the gate takes it: a
        schedule stored with a kind today's naming rule refuses still runs now),
        and its payload within today's limits. Returns the payload's canonical text."""
        require("kind", kind_problem(job.kind))
        return require_payload(job.payload, self._limits.max_payload_bytes)

    def _admit(self, transaction: WriteTransaction, job: JobEnqueued, payload_text: str) -> None:
        """The admission gate, for a job created outside the scheduler
        (`payload_text`: what `_validated_payload` returned for this job);
        raises unless it admits the job as new."""
        candidate = Candidate(
            job, fingerprint_of_text(job.kind, payload_text), len(payload_text.encode())
        )
        limited = [job.queue] if self._limits.limit_for(job.queue) is not None else []
        facts = transaction.gate_facts([candidate], limited)
        refusal = _refusal(decide(candidate, facts, self._limits), job, self._limits)
        if refusal is not None:
            raise refusal


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


def _same(row: ScheduleRow, definition: ScheduleDefinition) -> bool:
    return (
        row.spec == definition.spec
        and row.kind == definition.kind
        and row.queue == definition.queue
        and row.payload == canonical_json(definition.payload)
        and row.on_missed == definition.on_missed
        and row.backfill_limit == definition.backfill_limit
        and row.paused == definition.paused
        and row.max_attempts == definition.max_attempts
        and row.timeout_ms == definition.timeout_ms
        and row.start_at_ms == definition.start_at_ms
        and row.end_at_ms == definition.end_at_ms
        and row.jitter_ms == definition.jitter_ms
    )


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


def _require_ticks_left(definitions: Sequence[ScheduleDefinition], now_ms: int) -> None:
    """Before a bulk call writes its first chunk: every item has a tick left after
    now within its bounds, or the call fails naming it (a later chunk's write
    would find out only after earlier chunks committed). Checked once per spec
    and start: tenants' schedules mostly share them."""
    checked: set[tuple[str, int | None]] = set()
    for index, definition in enumerate(definitions):
        bounds = (definition.spec, definition.start_at_ms)
        if bounds in checked:
            continue
        try:
            _first_allowed_after(_timing_of(definition), now_ms)
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


def _due_at(row: ScheduleRow) -> int | None:
    """When a re-stated row's next_run_ms is due (None: at itself, as when its
    stored spec no longer parses and cannot be jittered)."""
    if not row.jitter_ms:
        return None
    try:
        spec = parse_spec(row.spec)
    except InvalidSpec:
        return None
    return TickTiming(row.schedule_id, spec, row.start_at_ms, None, row.jitter_ms).instant_ms(
        row.next_run_ms
    )


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


def _payload(row: ScheduleRow) -> JsonValue:
    return json.loads(row.payload)


def _run_at(value: object) -> int | None:
    if value is None:
        return None
    in_range = isinstance(value, int) and 0 <= value <= MAX_INSTANT_MS
    if isinstance(value, bool) or not in_range:
        raise ValidationError("run_at_ms", f"must be an integer of epoch ms, 0 to {MAX_INSTANT_MS}")
    assert isinstance(value, int)
    return value


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


def _append_one(transaction: WriteTransaction, unit: list[StreamAppend]) -> None:
    (result,) = transaction.append_units([unit])
    if isinstance(result, Exception):
        raise result
