"""`headgate schedules`: list, show, put, update, pause, resume, delete and
run schedules, what became of their runs (and, in `_history`, what they were
and how their definitions changed), as the control API's /periodic endpoints
do (the conventions of `_common`: --db, --json, exit statuses)."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence

from headgate._app import open_existing
from headgate._domain.describe import describe_in_words, missed_run_label, overlap_label
from headgate._domain.options import SCHEDULE_DEFAULTS, SCHEDULE_FIELDS, ScheduleDefinition
from headgate._domain.schedule_health import RECENT_RUNS as RUNS_KEPT
from headgate._domain.spec import InvalidSpec, parse_spec
from headgate._model import Schedule, ScheduleHealth, ScheduleRun
from headgate._operator import operator_of
from headgate._run_reads import HEALTH_STATES
from headgate.cli import _history as history
from headgate.cli._common import Commands, command, noun, paged, print_next
from headgate.cli._options import add_option_flags, given, refuse_none_given
from headgate.cli._output import (
    iso,
    print_fields,
    print_json,
    print_table,
    printable,
    shown_json,
)
from headgate.cli._settings import add_runtime_settings, runtime_config

HISTORY_SHOWN = 10
"""Enqueue attempts `schedules show` prints."""
RUNS_SHOWN = 10
"""Runs `schedules show` prints."""


def add_commands(commands: Commands) -> None:
    """`headgate schedules`."""
    group = noun(commands, "schedules", "list, change and run schedules")
    show = _add_schedule_reads(group)
    history.add_schedule_history(group, show)
    _add_schedule_writes(group)
    for name, help_text, handler in (
        ("delete", "delete a schedule (its enqueue history stays)", _schedules_delete),
        ("pause", "stop a schedule's ticks, keeping its phase", _schedules_pause),
        ("resume", "let a paused schedule tick again (missed ticks follow its policy)", _resume),
    ):
        command(group, name, help_text, handler).add_argument("schedule_id", metavar="ID")
    enqueue_now = command(
        group,
        "enqueue-now",
        "enqueue one extra job now",
        _schedules_enqueue_now,
        formerly="run-now",
    )
    enqueue_now.add_argument("schedule_id", metavar="ID")
    enqueue_now.add_argument(
        "--idempotency-key",
        metavar="K",
        help="the same key always gives the same job (default: a new one, printed)",
    )


def _add_schedule_writes(group: Commands) -> None:
    """`schedules put`, `update` and `clear-overrides`: a flag per field of the
    definition (`_options`)."""
    put = command(
        group,
        "put",
        "create or replace a schedule (a full replace: flags left out take their defaults)",
        _schedules_put,
    )
    put.add_argument("schedule_id", metavar="ID")
    add_option_flags(put, SCHEDULE_FIELDS, defaults=SCHEDULE_DEFAULTS, required=("spec", "kind"))
    update = command(
        group, "update", "change some fields of a schedule, keeping the rest", _schedules_update
    )
    update.add_argument("schedule_id", metavar="ID")
    add_option_flags(update, SCHEDULE_FIELDS, changes=True)
    add_runtime_settings(update)
    clear = command(
        group,
        "clear-overrides",
        "make a schedule declared in code what its code declares again",
        _schedules_clear_overrides,
    )
    clear.add_argument("schedule_id", metavar="ID")
    add_runtime_settings(put)


def _schedules_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.schedules.list(args.limit, args.cursor, search=args.search, health=args.health)
        judged = hg.schedules.health_of(page.schedules)
    if args.json:
        from headgate._wire.schedules import ScheduleList, ScheduleOut  # noqa: PLC0415 (--json only)

        print_json(
            ScheduleList(
                schedules=[ScheduleOut.of(s, judged.get(s.id)) for s in page.schedules],
                next_cursor=page.next_cursor,
            )
        )
        return 0
    print_table(
        ("ID", "SPEC", "KIND", "HEALTH", "LAST RUN", "NEXT RUN"),
        (
            (
                s.id,
                s.spec,
                s.kind,
                _health_word(judged[s.id]),
                _last_run_word(judged[s.id].last_run),
                iso(s.next_run_ms),
            )
            for s in page.schedules
        ),
        empty="no schedules",
    )
    print_next(page.next_cursor)
    return 0


def _schedules_show(args: argparse.Namespace) -> int:
    if args.as_of is not None:
        return history.print_schedule_as_of(args)
    with open_existing(args.db, read_only=True) as hg:
        deleted = hg.schedules.deleted(args.schedule_id)
        schedule = deleted if deleted is not None else hg.schedules.get(args.schedule_id)
        health = None if deleted is not None else hg.schedules.health_of([schedule])[schedule.id]
        runs = hg.schedules.runs(args.schedule_id, RUNS_SHOWN).runs
        events = hg.schedules.enqueue_events(args.schedule_id, HISTORY_SHOWN).events
    if args.json:
        from headgate._wire.schedules import (  # noqa: PLC0415 (--json only)
            EventOut,
            ScheduleOut,
            ScheduleRunOut,
        )

        body = ScheduleOut.of(schedule, health).model_dump(mode="json")
        body["deleted"] = deleted is not None
        body["runs"] = [ScheduleRunOut.of(run).model_dump(mode="json") for run in runs]
        body["enqueue_events"] = [EventOut.of(e).model_dump(mode="json") for e in events]
        print_json(body)
        return 0
    if deleted is not None:
        print("deleted: this is how it was last defined (its runs and enqueue history stay)")
    _print_schedule(schedule)
    print(f"payload:        {printable(shown_json(schedule.payload))}")
    if health is not None:
        _print_health(health)
    print(f"runs (newest {RUNS_SHOWN}; `headgate schedules runs {schedule.id}` for more):")
    _print_runs(runs, indent="  ")
    print(f"enqueue attempts (newest {HISTORY_SHOWN}):")
    print_table(
        ("TICK", "OUTCOME", "REASON", "JOB", "RECORDED"),
        ((iso(e.tick_ms), e.outcome, e.reason, e.job_id, iso(e.recorded_at_ms)) for e in events),
        empty="  none",
        indent="  ",
    )
    return 0


def _add_schedule_reads(group: Commands) -> argparse.ArgumentParser:
    """`schedules list`, `show` and `runs`; returns `show`'s parser."""
    listing = command(group, "list", "list schedules, ordered by id", _schedules_list)
    listing.add_argument(
        "--search", metavar="PREFIX", help="only schedules whose id starts with PREFIX"
    )
    listing.add_argument(
        "--health",
        choices=HEALTH_STATES,
        help="only schedules in this state now (failing: its newest settled run failed)",
    )
    paged(listing, 50)
    show = command(
        group,
        "show",
        "a schedule, its health, its newest runs and enqueue attempts",
        _schedules_show,
    )
    show.add_argument("schedule_id", metavar="ID")
    runs = command(group, "runs", "what became of a schedule's runs, newest first", _schedules_runs)
    runs.add_argument("schedule_id", metavar="ID")
    paged(runs, 30)
    return show


def _schedules_runs(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.schedules.runs(args.schedule_id, min(args.limit, RUNS_KEPT), args.cursor)
    if args.json:
        from headgate._wire.schedules import (  # noqa: PLC0415 (--json only)
            ScheduleRunList,
            ScheduleRunOut,
        )

        runs = [ScheduleRunOut.of(run) for run in page.runs]
        print_json(ScheduleRunList(runs=runs, next_cursor=page.next_cursor))
        return 0
    _print_runs(page.runs, indent="")
    print_next(page.next_cursor)
    return 0


def _print_runs(runs: Sequence[ScheduleRun], indent: str) -> None:
    print_table(
        ("TICK", "OUTCOME", "ATTEMPTS", "DURATION", "ERROR", "JOB"),
        (
            (
                "enqueue now" if run.manual else iso(run.tick_ms),
                run.outcome,
                str(run.attempts),
                "-" if run.duration_ms is None else f"{run.duration_ms} ms",
                run.error_type or "-",
                run.job_id,
            )
            for run in runs
        ),
        empty=f"{indent}none",
        indent=indent,
    )


def _print_health(health: ScheduleHealth) -> None:
    p50, p95 = health.duration_p50_ms, health.duration_p95_ms
    durations = "-" if p50 is None else f"p50 {p50} ms, p95 {p95} ms"
    print_fields(
        (
            ("health", _health_word(health)),
            ("last success", iso(health.last_success_ms)),
            (
                "last failure",
                iso(health.last_failure_ms)
                + ("" if health.last_error_type is None else f" ({health.last_error_type})"),
            ),
            ("durations", f"{durations} (of its newest {health.runs_read} runs)"),
        )
    )


def _health_word(health: ScheduleHealth) -> str:
    """The state, with the failures in a row when failing."""
    if health.state == "failing":
        return f"failing ({health.consecutive_failures} in a row)"
    return health.state


def _last_run_word(run: ScheduleRun | None) -> str:
    if run is None:
        return "-"
    when = "enqueue now" if run.manual else iso(run.tick_ms)
    return f"{run.outcome} ({when})"


def _schedules_put(args: argparse.Namespace) -> int:
    definition = ScheduleDefinition.from_fields(given(args, SCHEDULE_FIELDS))
    with open_existing(args.db, read_only=False, config=runtime_config(args)) as hg:
        schedule = operator_of(hg).put_definition(args.schedule_id, definition).schedule
    return _print_schedule_result(args, schedule, f"saved schedule {schedule.id}")


def _schedules_update(args: argparse.Namespace) -> int:
    changes = given(args, SCHEDULE_FIELDS)
    refuse_none_given(changes, "update")
    with open_existing(args.db, read_only=False, config=runtime_config(args)) as hg:
        schedule = operator_of(hg).update_schedule_fields(args.schedule_id, changes)
    return _print_schedule_result(args, schedule, f"updated schedule {schedule.id}")


def _schedules_clear_overrides(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        schedule = hg.schedules.clear_overrides(args.schedule_id)
    done = f"schedule {schedule.id} is what its code declares again"
    return _print_schedule_result(args, schedule, done)


def _schedules_delete(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.schedules.delete(args.schedule_id)
    if args.json:
        print_json({"id": args.schedule_id, "deleted": True})
    else:
        print(f"deleted schedule {printable(args.schedule_id)} (its enqueue history stays)")
    return 0


def _schedules_pause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        schedule = hg.schedules.pause(args.schedule_id)
    return _print_schedule_result(args, schedule, f"paused schedule {schedule.id}")


def _resume(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        schedule = hg.schedules.resume(args.schedule_id)
    return _print_schedule_result(args, schedule, f"resumed schedule {schedule.id}")


def _schedules_enqueue_now(args: argparse.Namespace) -> int:
    key = args.idempotency_key if args.idempotency_key is not None else str(uuid.uuid4())
    with open_existing(args.db, read_only=False) as hg:
        result = hg.schedules.enqueue_now(args.schedule_id, key)
    if args.json:
        print_json({"id": result.job_id, "replayed": result.replayed, "idempotency_key": key})
    elif result.replayed:
        print(f"job {result.job_id} was already enqueued with idempotency key {key}")
    else:
        print(f"enqueued job {result.job_id} (idempotency key {key}: repeat it to retry safely)")
    return 0


def _print_schedule_result(args: argparse.Namespace, schedule: Schedule, done: str) -> int:
    if args.json:
        from headgate._wire.schedules import ScheduleOut  # noqa: PLC0415 (--json only)

        print_json(ScheduleOut.of(schedule))
    else:
        print(printable(done))
        _print_schedule(schedule)
    return 0


def _print_schedule(schedule: Schedule) -> None:
    try:
        words = describe_in_words(parse_spec(schedule.spec))
    except InvalidSpec:
        words = None
    meaning = "" if words is None else f"  ({words})"
    print_fields(
        (
            ("id", schedule.id),
            ("summary", schedule.summary or "-"),
            ("spec", schedule.spec + meaning),
            ("kind", schedule.kind),
            ("queue", schedule.queue),
            ("on missed", missed_run_label(schedule.on_missed, schedule.backfill_max)),
            ("overlap", overlap_label(schedule.overlap)),
            ("paused", "yes" if schedule.paused else "no"),
            ("next run", iso(schedule.next_run_ms)),
            ("last enqueued", iso(schedule.last_enqueued_ms)),
            ("retry at", iso(schedule.retry_at_ms)),
            ("max attempts", _or_default(schedule.max_attempts)),
            ("timeout", _or_default(schedule.timeout_ms, " ms")),
            ("priority", "0 (default)" if schedule.priority is None else str(schedule.priority)),
            ("start within", _or_never(schedule.start_within_ms)),
            ("starts", iso(schedule.start_at_ms)),
            ("ends", iso(schedule.end_at_ms) + (" (finished)" if schedule.finished else "")),
            ("jitter", f"{schedule.jitter_ms} ms"),
            ("defined by", _owner(schedule)),
        )
    )


def _owner(schedule: Schedule) -> str:
    if not schedule.declared_in_code:
        return "operators"
    text = "code (periodic)"
    if schedule.overrides:
        text += "; overridden: " + ", ".join(schedule.overrides)
    if schedule.undeclared_at_ms is not None:
        text += f"; no longer declared since {iso(schedule.undeclared_at_ms)}"
    return text


def _or_never(value_ms: int | None) -> str:
    return "no deadline" if value_ms is None else f"{value_ms} ms after its tick"


def _or_default(value: int | None, unit: str = "") -> str:
    return "its handler's" if value is None else f"{value}{unit}"
