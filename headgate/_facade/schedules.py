"""`hg.schedules`: schedules defined, read, paused, run now, and their history."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from typing_extensions import Unpack

from headgate._commands import Put, definitions_of
from headgate._domain.admission import require_name
from headgate._domain.definition_history import parse_instant
from headgate._domain.option_keywords import ScheduleArgs, definition_from, job_options
from headgate._domain.options import SCHEDULE_KEYWORDS, ScheduleDefinition
from headgate._domain.schedule_health import AlertKind
from headgate._domain.spec import InvalidSpec, parse_spec
from headgate._domain.tick_timing import TickTiming
from headgate._errors import NotFound, ValidationError
from headgate._facade.twins import Namespace, twin
from headgate._history import CHANGES_SHOWN, History, ScheduleAsOf, ScheduleChanges
from headgate._model import (
    EnqueueEvent,
    EnqueueEventsPage,
    EnqueueNowResult,
    Job,
    JobsPage,
    PutScheduleResult,
    PutSchedulesResult,
    Schedule,
    ScheduleHealth,
    ScheduleRunsPage,
    SchedulesPage,
    UpcomingRun,
)
from headgate._runtime.schedule_alerts import ScheduleAlert
from headgate._store.port import JobFilter

if TYPE_CHECKING:
    from headgate._core import Core


class Schedules(Namespace):
    """A Headgate's schedules: `hg.schedules.put("nightly", spec="0 9 * * *", kind=...)`."""

    name = "schedules"

    def put(
        self, schedule_id: str, *, spec: str, kind: str, **options: Unpack[ScheduleArgs]
    ) -> Schedule:
        """Create or replace a schedule (an upsert: every field not given takes its
        default, as the API's PUT does; `update` changes some and keeps the
        rest). Invalid input raises ValidationError and writes nothing.

        `spec` says when it ticks, `kind` (and `payload`) what each tick
        enqueues; `on_missed` and `backfill_max` what it does with ticks
        missed while nobody fired them; no tick fires before `start_at_ms` or
        after `end_at_ms` (epoch ms); each tick is enqueued a stable delay in
        [0, jitter_ms) after it (at most an hour); `paused` stops its ticks,
        keeping its phase; `queue`, `max_attempts` and `timeout_ms` (or
        `timeout_s`) are its jobs' options (None: the handler's). Each field is
        described in `ScheduleDefinition`. An unchanged spec keeps its phase.
        On a schedule declared in code (`periodic`), what differs from the
        declaration is an override, which survives deploys until cleared
        (`clear_overrides`)."""
        definition = definition_from(spec=spec, kind=kind, **options)
        return put_definition(self._core, schedule_id, definition).schedule

    def put_many(self, schedules: Iterable[Mapping[str, object]]) -> PutSchedulesResult:
        """Create or replace many schedules at once: `put` for each item, in bulk
        (thousands a second).

        Each item is a mapping of `put`'s keyword names plus `schedule_id`:
        `{"schedule_id": "t7-nightly", "spec": "0 9 * * *", "kind": "report.build",
        "payload": {"tenant": 7}}`. Every item is validated before anything is
        written: the first bad one raises ValidationError naming it by index and
        field (`schedules[3].spec: ...`), and so does an id given twice. Then
        they are written 500 per transaction, each one all or nothing (so the
        scheduler's ticks never wait for the whole call), with `put`'s rules: an
        unchanged spec keeps its phase, an identical item writes nothing, a
        changed spec re-anchors after now. A store error partway leaves the
        chunks before it written (a note on the error says how many); repeating
        the call is safe.
        """
        items = [
            {**item, **job_options(item)} if isinstance(item, Mapping) else item
            for item in schedules
        ]
        definitions = definitions_of(items, self._core.settings)
        return put_all(self._core, [Put(schedule_id, d) for schedule_id, d in definitions])

    def update(
        self,
        schedule_id: str,
        *,
        spec: str | None = None,
        kind: str | None = None,
        **changes: Unpack[ScheduleArgs],
    ) -> Schedule:
        """Change some fields of a schedule, keeping the others (PATCH in the API):
        a field left out is unchanged, one given as None is cleared (`end_at_ms=None`).
        NotFound for a schedule that does not exist; only the changed fields are
        checked, so a schedule stored under older rules can still be re-timed."""
        given: dict[str, object] = dict(job_options(changes, SCHEDULE_KEYWORDS))
        if spec is not None:
            given["spec"] = spec
        if kind is not None:
            given["kind"] = kind
        return update_fields(self._core, schedule_id, given)

    def clear_overrides(self, schedule_id: str) -> Schedule:
        """Make a schedule declared in code (`periodic`) what its code declares
        again, dropping every operator change (a pause included); a
        ValidationError for a schedule only operators define."""
        row = self._core.commands.clear_overrides(schedule_id)
        self._core.poke_scheduler()
        return Schedule.from_row(row)

    def pause(self, schedule_id: str) -> Schedule:
        """Stop a schedule's ticks, keeping its phase; pausing a paused one is a no-op."""
        return update_fields(self._core, schedule_id, {"paused": True})

    def resume(self, schedule_id: str) -> Schedule:
        """Let a paused schedule tick again. The ticks it missed meanwhile follow its
        missed-run policy, as after downtime: skip and run_once enqueue the latest
        due tick, backfill up to its limit. Resuming a running one is a no-op."""
        return update_fields(self._core, schedule_id, {"paused": False})

    def delete(self, schedule_id: str) -> None:
        """Delete a schedule; its enqueue history stays readable."""
        self._core.commands.delete_schedule(schedule_id)

    def enqueue_now(self, schedule_id: str, idempotency_key: str) -> EnqueueNowResult:
        """Enqueue now: one extra job; the same key always returns the same job."""
        return self._core.commands.enqueue_now(schedule_id, idempotency_key)

    def get(self, schedule_id: str) -> Schedule:
        """A schedule; NotFound for one that does not exist (or was deleted)."""
        row = self._core.reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return Schedule.from_row(row)

    def deleted(self, schedule_id: str) -> Schedule | None:
        """A deleted schedule as it was last defined (its enqueue history stays
        readable), or None when no schedule of that id was deleted."""
        row = self._core.reads.schedule(schedule_id)
        return Schedule.from_row(row) if row is not None and row.deleted else None

    def upcoming(self, schedule_id: str, count: int = 5) -> builtins.list[UpcomingRun]:
        """The next `count` (1-100) ticks the schedule fires if nothing changes,
        oldest first, from its durable next_run_ms: each with the instant it is
        enqueued at (its jitter included), none past its end; none while it is
        paused or finished. A next_run_ms already past (the scheduler is behind
        or stopped) comes first: the missed-run policy decides what of it fires."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 100:
            raise ValidationError("count", f"must be an integer from 1 to 100, got {count!r}")
        row = self._core.reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        if row.paused or row.finished:
            return []
        try:
            spec = parse_spec(row.spec)
        except InvalidSpec:  # stored by an earlier version that read it differently
            return []
        timing = TickTiming(row.schedule_id, spec, row.start_at_ms, row.end_at_ms, row.jitter_ms)
        runs = timing.upcoming(row.next_run_ms, row.due_at_ms, count)
        return [UpcomingRun(tick, instant) for tick, instant in runs]

    def runs(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> ScheduleRunsPage:
        """What became of the schedule's runs (its ticks' jobs and its Enqueue
        now's, `manual`), newest first, the newest 100; they outlive the schedule
        (compaction keeps each schedule's newest 100 runs' jobs)."""
        return self._core.runs.runs(schedule_id, limit, cursor)

    def manual_runs(self, schedule_id: str, limit: int = 20, cursor: str | None = None) -> JobsPage:
        """The jobs a schedule's Enqueue now made, newest first (also after the
        schedule is deleted), apart from its ticks' jobs."""
        where = JobFilter(run_now_schedule_id=schedule_id)
        page = self._core.reads.jobs_page(where, limit, cursor)
        return JobsPage([Job.from_row(row) for row in page.items], page.next_cursor)

    def health(self, schedule_id: str) -> ScheduleHealth:
        """How the schedule is doing now, from its newest 100 runs: its state (ok,
        failing, late, missing, paused), last success and failure, consecutive
        failures, run durations and its last run. NotFound for no such schedule."""
        return self._core.runs.health(schedule_id)

    def health_of(self, schedules: Sequence[Schedule]) -> dict[str, ScheduleHealth]:
        """The health of each of these schedules (a page of `list`), by id, from
        one read of their runs."""
        return self._core.runs.health_of(schedules)

    def as_of(self, schedule_id: str, as_of: int | str) -> ScheduleAsOf:
        """The schedule as it stood at `as_of` (epoch ms or ISO-8601), folded from
        its events up to then: its definition, timing, and who made the change in
        force. Says so (`state`) when it did not exist yet or the instant is
        before the oldest event compaction kept; NotFound when the log keeps none."""
        instant = parse_instant("as_of", as_of)
        return History(self._core.store.log).schedule_as_of(schedule_id, instant)

    def changes(
        self,
        schedule_id: str,
        *,
        since: int | str | None = None,
        until: int | str | None = None,
        limit: int = CHANGES_SHOWN,
    ) -> ScheduleChanges:
        """The schedule's definition changes after `since` up to `until` (epoch ms
        or ISO-8601; default: from the start, to now), oldest first, each with
        who made it and what differs from the one before (a payload by its keys,
        never its values); the newest `limit` (1-100)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise ValidationError("limit", f"must be an integer from 1 to 100, got {limit!r}")
        since_ms = 0 if since is None else parse_instant("since", since)
        until_ms = self._core.clock.now_ms() if until is None else parse_instant("until", until)
        history = History(self._core.store.log)
        return history.schedule_changes(schedule_id, since_ms, until_ms, limit)

    def enqueue_events(
        self, schedule_id: str, limit: int = 30, cursor: str | None = None
    ) -> EnqueueEventsPage:
        """The schedule's automatic enqueue attempts, newest first (the newest 100)."""
        page = self._core.reads.enqueue_history(schedule_id, limit, cursor)
        return EnqueueEventsPage(
            [EnqueueEvent.from_row(row) for row in page.items], page.next_cursor
        )

    def on_failure(
        self,
        target: Callable[[ScheduleAlert], object] | str,
        *,
        schedule: str | None = None,
        after_failures: int = 1,
    ) -> None:
        """Call `target` (a callable, or an http(s) URL to POST the alert to as
        JSON) once when `schedule`'s runs (every schedule's, for None) have
        failed `after_failures` times in a row; not again until it has
        recovered. Called in this process, off the job path, when one of its
        workers records the run's end (`_runtime/schedule_alerts.py`)::

            hg.schedules.on_failure(page_oncall, schedule="nightly-report", after_failures=2)
        """
        self._core.alerts.add(AlertKind.FAILURE, target, schedule, after_failures)

    def on_recovery(
        self,
        target: Callable[[ScheduleAlert], object] | str,
        *,
        schedule: str | None = None,
        after_failures: int = 1,
    ) -> None:
        """Call `target` once when a run of `schedule` succeeds after at least
        `after_failures` failures in a row (the pair of `on_failure`)."""
        self._core.alerts.add(AlertKind.RECOVERY, target, schedule, after_failures)

    def list(
        self,
        limit: int = 200,
        cursor: str | None = None,
        *,
        search: str | None = None,
        health: str | None = None,
    ) -> SchedulesPage:
        """Schedules ordered by id (code point by code point); with `search`, those
        whose id starts with it; with `health` (ok, failing, late, missing or
        paused: see `ScheduleHealth`), those in that state now. Pass next_cursor
        back for the next page."""
        wanted = self._core.runs.filter(health)
        page = self._core.reads.schedules_page(limit, cursor, search, wanted)
        return SchedulesPage([Schedule.from_row(row) for row in page.items], page.next_cursor)

    aput = twin(put)
    aput_many = twin(put_many)
    aupdate = twin(update)
    apause = twin(pause)
    aresume = twin(resume)
    adelete = twin(delete)
    aenqueue_now = twin(enqueue_now)
    aget = twin(get, reads=True)
    aruns = twin(runs, reads=True)
    ahealth = twin(health, reads=True)
    aenqueue_events = twin(enqueue_events, reads=True)
    alist = twin(list, reads=True)


def put_definition(
    core: Core, schedule_id: str, definition: ScheduleDefinition
) -> PutScheduleResult:
    """`put` with a ScheduleDefinition made beforehand, saying whether it created
    the schedule, updated it or found it so already."""
    require_name("id", schedule_id)
    row, outcome = core.commands.put_schedule(Put(schedule_id, definition))
    core.poke_scheduler()
    return PutScheduleResult(Schedule.from_row(row), outcome)


def update_fields(core: Core, schedule_id: str, changes: Mapping[str, object]) -> Schedule:
    """`update` with the changes as a mapping of flat field names
    (`SCHEDULE_FIELDS`), as the API's PATCH body gives them."""
    row = core.commands.update_schedule(schedule_id, changes)
    core.poke_scheduler()
    return Schedule.from_row(row)


def put_all(core: Core, puts: Sequence[Put]) -> PutSchedulesResult:
    """Write these checked puts in bulk (`put_many`'s and the declarations' path)."""
    try:
        outcomes = core.commands.put_schedules(puts)
    finally:
        core.poke_scheduler()  # a chunk may have been written before an error
    return PutSchedulesResult(
        {put.schedule_id: outcome for put, outcome in zip(puts, outcomes, strict=True)}
    )
