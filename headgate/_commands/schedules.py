"""The schedules' commands: define (one or in bulk, by an operator or the host's
code), change, clear overrides, undeclare, delete, and enqueue now."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from headgate import _actors as actors
from headgate._commands.base import BULK_CHUNK, CommandBase, Settings, append_one
from headgate._domain.admission import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    could_be_stored,
    require_name,
    require_optional_key,
    require_payload,
)
from headgate._domain.events import (
    DomainEvent,
    JobEnqueued,
    ManualRunRequested,
    ScheduleDefined,
    ScheduleDeleted,
    ScheduleUndeclared,
)
from headgate._domain.ids import manual_job_id
from headgate._domain.names import require
from headgate._domain.options import ScheduleDefinition
from headgate._domain.ownership import declared_definition
from headgate._domain.schedule_load import Load, load_problem
from headgate._domain.spec import InvalidSpec, interval_problem, parse_spec
from headgate._domain.streams import job_stream, manual_run_stream, schedule_stream
from headgate._domain.tick_timing import TickTiming
from headgate._errors import NotFound, ValidationError
from headgate._model import EnqueueNowResult
from headgate._projections import SCHEDULES, ScheduleRow
from headgate._projections.schedules import declared_of, definition_of
from headgate._store.port import NO_STREAM, StreamAppend, WriteTransaction

CREATED: Final = "created"
UPDATED: Final = "updated"
UNCHANGED: Final = "unchanged"


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


class ScheduleCommands(CommandBase):
    """Schedules defined, changed and deleted, and their Enqueue now."""

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
            append_one(
                transaction,
                [StreamAppend(stream, version, (ScheduleDeleted(schedule_id, actors.current()),))],
            )

    def enqueue_now(self, schedule_id: str, idempotency_key: object) -> EnqueueNowResult:
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
                return EnqueueNowResult(job_id, replayed=True)
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
            append_one(
                transaction,
                [
                    StreamAppend(
                        stream, NO_STREAM, (ManualRunRequested(schedule_id, key, job.job_id),)
                    ),
                    StreamAppend(job_stream(job.job_id), NO_STREAM, (job,)),
                ],
            )
        return EnqueueNowResult(job.job_id, replayed=False)


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
