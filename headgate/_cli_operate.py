"""The operator commands of the command line: `headgate schedules`, `jobs`,
`quarantine`, `queues`, `handlers` (and `limits`, `rate-limits`: `_cli_limits`), what the
control API's operator endpoints do, against a store URL.

Each opens the store at --db (never creating one: a mistyped URL is an error;
what only reads migrates nothing), acts and closes it; none starts the runtime.
Output is a table or key/value lines for people, or with `--json` one JSON
document with the API's field names (its response bodies, `headgate.web`'s
schemas, imported only then: FastAPI stays out of a plain command's start).
Exit status: 0 done; 1 not found or refused (NotFound, JobStateConflict,
AdmissionRejected, DuplicateJob) or the store failed; 2 bad input
(ValidationError, bad arguments). Errors are one line on stderr (`_cli.main`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from headgate import _actors as actors
from headgate import _cli_history as history
from headgate._app import JOB_COUNT_CAP, open_existing
from headgate._cli_limits import add_limit_commands
from headgate._cli_options import add_option_flags, given, refuse_none_given
from headgate._cli_output import iso as _iso
from headgate._cli_output import print_fields as _print_fields
from headgate._cli_output import print_json as _print_json
from headgate._cli_output import print_table as _print_table
from headgate._cli_output import printable as _printable
from headgate._domain.describe import describe_in_words, missed_run_label, overlap_label
from headgate._domain.events import JobState
from headgate._domain.lifecycle import BULK_MAX
from headgate._domain.options import (
    JOB_OPTION_FIELDS,
    SCHEDULE_DEFAULTS,
    SCHEDULE_FIELDS,
    JobOptions,
    ScheduleDefinition,
)
from headgate._domain.schedule_health import RECENT_RUNS as RUNS_KEPT
from headgate._domain.schedule_load import MAX_SCHEDULES_LIMIT, MAX_TICKS_PER_S_LIMIT
from headgate._domain.shown import MAX_SHOWN, PAGE_SHOWN, busiest
from headgate._domain.spec import InvalidSpec, parse_spec
from headgate._errors import ValidationError
from headgate._json import JsonValue
from headgate._model import (
    Job,
    JobLimits,
    LimitInForce,
    LimitSource,
    QuarantineEntry,
    QueueStatus,
    RunningAttempt,
    Schedule,
    ScheduleHealth,
    ScheduleRun,
)
from headgate._operator import operator_of
from headgate._run_reads import HEALTH_STATES
from headgate._runtime.config import MAX_MIN_INTERVAL_MS, RuntimeConfig

Handler = Callable[[argparse.Namespace], int]
AddDb = Callable[[argparse.ArgumentParser], None]
IntIn = Callable[[int, int], Callable[[str], int]]

MAX_PAGE = 200
"""The API's largest page."""
HISTORY_SHOWN = 10
"""Enqueue attempts `schedules show` prints."""
RUNS_SHOWN = 10
"""Runs `schedules show` prints."""


@dataclass(frozen=True)
class RuntimeSetting:
    """A RuntimeConfig field that `serve` and the schedule writes take as a flag
    (`--max-schedules`) and from the environment (`HEADGATE_MAX_SCHEDULES`): its
    name, range and help are given here once, its default and rule by
    RuntimeConfig."""

    field: str
    highest: int
    help: str
    metavar: str = "N"

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def environment(self) -> str:
        return "HEADGATE_" + self.field.upper()


RUNTIME_SETTINGS: Final = (
    RuntimeSetting(
        "min_interval_ms", MAX_MIN_INTERVAL_MS, "refuse specs that tick more often than this", "MS"
    ),
    RuntimeSetting(
        "max_schedules",
        MAX_SCHEDULES_LIMIT,
        "refuse writes that would leave the store more live schedules than this",
    ),
    RuntimeSetting(
        "max_ticks_per_s",
        MAX_TICKS_PER_S_LIMIT,
        "refuse writes that would make all schedules tick more often than this a second "
        "(each at its busiest hour)",
    ),
)
MIN_INTERVAL_ENV: Final = RUNTIME_SETTINGS[0].environment


def add_runtime_settings(parser: argparse.ArgumentParser, int_in: IntIn) -> None:
    """--min-interval-ms, --max-schedules, --max-ticks-per-s (`serve`, `schedules
    put` and `update`)."""
    for setting in RUNTIME_SETTINGS:
        default = getattr(RuntimeConfig, setting.field)
        parser.add_argument(
            setting.flag,
            type=int_in(1, setting.highest),
            metavar=setting.metavar,
            help=f"{setting.help} (default ${setting.environment}, else {default})",
        )


def runtime_flags_given(args: argparse.Namespace) -> list[str]:
    return [s.flag for s in RUNTIME_SETTINGS if getattr(args, s.field, None) is not None]


def runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    """The settings a command's Headgate runs with: each flag, else its
    environment variable, else RuntimeConfig's default."""
    chosen: dict[str, int] = {}
    for setting in RUNTIME_SETTINGS:
        value: int | None = getattr(args, setting.field, None)
        text = os.environ.get(setting.environment)
        if value is None and text:
            if not (text.isascii() and text.isdigit() and 1 <= int(text) <= setting.highest):
                raise ValidationError(
                    setting.environment, f"must be a whole number from 1 to {setting.highest}"
                )
            value = int(text)
        if value is not None:
            chosen[setting.field] = value
    return RuntimeConfig(**chosen)  # type: ignore[arg-type]


def add_operator_commands(commands: Any, add_db: AddDb, int_in: IntIn) -> None:
    """Add `schedules`, `jobs`, `quarantine`, `queues` and `handlers` to the `headgate` parser's
    subcommands, with `_cli`'s own --db option and integer type."""

    def command(group: Any, name: str, help_text: str, handler: Handler) -> Any:
        parser = group.add_parser(name, help=help_text)
        add_db(parser)
        parser.add_argument(
            "--json", action="store_true", help="print one JSON document (the API's fields)"
        )
        parser.set_defaults(handler=_as_the_cli(handler))
        return parser

    def paged(parser: argparse.ArgumentParser, default: int) -> None:
        parser.add_argument(
            "--limit",
            type=int_in(1, MAX_PAGE),
            default=default,
            help=f"at most N (default {default})",
        )
        parser.add_argument("--cursor", metavar="C", help="the next page, as the last one said")

    schedules = commands.add_parser("schedules", help="list, change and run schedules")
    group = schedules.add_subparsers(title="commands", parser_class=type(schedules), required=True)
    show = _add_schedule_reads(group, command, paged)
    history.add_schedule_history(group, command, int_in, show)
    _add_schedule_writes(group, command, int_in)
    for name, help_text, handler in (
        ("delete", "delete a schedule (its enqueue history stays)", _schedules_delete),
        ("pause", "stop a schedule's ticks, keeping its phase", _schedules_pause),
        ("resume", "let a paused schedule tick again (missed ticks follow its policy)", _resume),
    ):
        command(group, name, help_text, handler).add_argument("schedule_id", metavar="ID")
    run_now = command(group, "run-now", "enqueue one extra job now", _schedules_run_now)
    run_now.add_argument("schedule_id", metavar="ID")
    run_now.add_argument(
        "--idempotency-key",
        metavar="K",
        help="the same key always gives the same job (default: a new one, printed)",
    )

    _add_job_commands(commands, command, int_in, paged)

    quarantine = commands.add_parser("quarantine", help="quarantined fingerprints")
    group = quarantine.add_subparsers(
        title="commands", parser_class=type(quarantine), required=True
    )
    paged(command(group, "list", "quarantined fingerprints, newest first", _quarantine_list), 50)
    release = command(group, "release", "make a fingerprint admissible again", _release)
    release.add_argument("fingerprint", metavar="FINGERPRINT")
    add = command(group, "add", "quarantine a fingerprint by hand", _quarantine_add)
    add.add_argument("fingerprint", metavar="FINGERPRINT")
    add.add_argument("--note", default="", help="why (shown by quarantine list)")

    _add_queue_commands(commands, command, int_in)
    handlers = commands.add_parser("handlers", help="the handlers each group's code declares")
    group = handlers.add_subparsers(title="commands", parser_class=type(handlers), required=True)
    command(
        group,
        "list",
        "declared handlers: the queue and defaults enqueue routes each kind by",
        _handlers_list,
    )
    add_limit_commands(commands, command)


def _as_the_cli(handler: Handler) -> Handler:
    """The handler, its changes recorded as made through the command line."""

    def handle(args: argparse.Namespace) -> int:
        with actors.acting_as(actors.CLI):
            return handler(args)

    return handle


def _add_job_commands(
    commands: Any, command: Callable[..., Any], int_in: IntIn, paged: Callable[..., None]
) -> None:
    jobs = commands.add_parser("jobs", help="list, inspect, cancel and retry jobs")
    group = jobs.add_subparsers(title="commands", parser_class=type(jobs), required=True)
    listing = command(group, "list", "list jobs, newest first", _jobs_list)
    listing.add_argument("--state", choices=[state.value for state in JobState])
    listing.add_argument("--queue", metavar="Q")
    listing.add_argument("--kind", metavar="K")
    listing.add_argument(
        "--schedule",
        metavar="ID",
        help="only the jobs this schedule made (its ticks and its Enqueue now)",
    )
    _add_search(listing)
    paged(listing, 50)
    counting = command(group, "count", "jobs per state (bounded), as jobs list filters", _count)
    _add_filters(counting, states=False)
    enqueue = command(group, "enqueue", "enqueue a job (as POST /api/v1/jobs)", _jobs_enqueue)
    enqueue.add_argument("kind", metavar="KIND")
    enqueue.add_argument("--payload", metavar="JSON", help="its payload, as JSON (null)")
    add_option_flags(enqueue, JOB_OPTION_FIELDS)
    unserved = command(
        group, "unserved", "pending jobs no live worker runs, by queue and kind", _unserved
    )
    _shown_at_most(unserved, int_in)
    showing = command(
        group, "show", "a job, its payload and result, and its newest attempts", _jobs_show
    )
    showing.add_argument("job_id", metavar="ID")
    history.add_as_of(showing)
    for name, help_text, handler in (
        ("cancel", "cancel a pending or running job, or with --all every match", _jobs_cancel),
        ("retry", "run a failed, cancelled or quarantined job (or --all) again", _jobs_retry),
    ):
        changing = command(group, name, help_text, handler)
        changing.add_argument("job_id", metavar="ID", nargs="?")
        _add_bulk_flags(changing, int_in)


def _add_search(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--search",
        metavar="TEXT",
        help="the job with this id, the jobs with this unique key, and with --schedule "
        "the job its Enqueue now made with this idempotency key",
    )


def _add_filters(parser: argparse.ArgumentParser, *, states: bool) -> None:
    if states:
        parser.add_argument("--state", choices=[state.value for state in JobState])
    parser.add_argument("--queue", metavar="Q")
    parser.add_argument("--kind", metavar="K")
    parser.add_argument("--schedule", metavar="ID", help="the jobs this schedule made")
    _add_search(parser)


def _add_bulk_flags(parser: argparse.ArgumentParser, int_in: IntIn) -> None:
    parser.add_argument(
        "--all",
        action="store_true",
        help="instead of one ID, the jobs jobs list shows with these filters (--state required)",
    )
    _add_filters(parser, states=True)
    parser.add_argument(
        "--limit",
        type=int_in(1, BULK_MAX),
        default=BULK_MAX,
        help=f"at most N, newest first (default and most {BULK_MAX}; repeat for more)",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def _add_queue_commands(commands: Any, command: Callable[..., Any], int_in: IntIn) -> None:
    queues = commands.add_parser("queues", help="list, pause and resume queues")
    group = queues.add_subparsers(title="commands", parser_class=type(queues), required=True)
    listing = command(
        group, "list", "queues: paused or not, their jobs waiting and running", _queues_list
    )
    _shown_at_most(listing, int_in)
    pause = command(
        group, "pause", "stop every process claiming a queue's jobs (running ones finish)", _pause
    )
    pause.add_argument("queue", metavar="QUEUE")
    pause.add_argument("--note", default="", help="why (shown by queues list)")
    resume = command(group, "resume", "let workers claim a paused queue's jobs again", _unpause)
    resume.add_argument("queue", metavar="QUEUE")


def _shown_at_most(parser: argparse.ArgumentParser, int_in: IntIn) -> None:
    parser.add_argument(
        "--limit",
        type=int_in(1, MAX_SHOWN),
        default=PAGE_SHOWN,
        metavar="N",
        help=f"at most N, the busiest (default {PAGE_SHOWN}); the rest are counted",
    )


def _print_more(more: int, what: str) -> None:
    if more:
        print(f"and {more:,} more {what} (--limit N shows up to {MAX_SHOWN:,})")


def _add_schedule_writes(group: Any, command: Callable[..., Any], int_in: IntIn) -> None:
    """`schedules put`, `update` and `clear-overrides`: a flag per field of the
    definition (`_cli_options`)."""
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
    add_runtime_settings(update, int_in)
    clear = command(
        group,
        "clear-overrides",
        "make a schedule declared in code what its code declares again",
        _schedules_clear_overrides,
    )
    clear.add_argument("schedule_id", metavar="ID")
    add_runtime_settings(put, int_in)


# schedules -------------------------------------------------------------------


def _schedules_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.list_schedules(args.limit, args.cursor, search=args.search, health=args.health)
        judged = hg.schedules_health(page.schedules)
    if args.json:
        from headgate.web._schemas import ScheduleList, ScheduleOut  # noqa: PLC0415 (see top)

        _print_json(
            ScheduleList(
                schedules=[ScheduleOut.of(s, judged.get(s.id)) for s in page.schedules],
                next_cursor=page.next_cursor,
            )
        )
        return 0
    _print_table(
        ("ID", "SPEC", "KIND", "HEALTH", "LAST RUN", "NEXT RUN"),
        (
            (
                s.id,
                s.spec,
                s.kind,
                _health_word(judged[s.id]),
                _last_run_word(judged[s.id].last_run),
                _iso(s.next_run_ms),
            )
            for s in page.schedules
        ),
        empty="no schedules",
    )
    _print_next(page.next_cursor)
    return 0


def _schedules_show(args: argparse.Namespace) -> int:
    if args.as_of is not None:
        return history.print_schedule_as_of(args)
    with open_existing(args.db, read_only=True) as hg:
        deleted = hg.deleted_schedule(args.schedule_id)
        schedule = deleted if deleted is not None else hg.get_schedule(args.schedule_id)
        health = None if deleted is not None else hg.schedules_health([schedule])[schedule.id]
        runs = hg.schedule_runs(args.schedule_id, RUNS_SHOWN).runs
        events = hg.enqueue_events(args.schedule_id, HISTORY_SHOWN).events
    if args.json:
        from headgate.web._schemas import (  # noqa: PLC0415 (see top)
            EventOut,
            ScheduleOut,
            ScheduleRunOut,
        )

        body = ScheduleOut.of(schedule, health).model_dump(mode="json")
        body["deleted"] = deleted is not None
        body["runs"] = [ScheduleRunOut.of(run).model_dump(mode="json") for run in runs]
        body["enqueue_events"] = [EventOut.of(e).model_dump(mode="json") for e in events]
        _print_json(body)
        return 0
    if deleted is not None:
        print("deleted: this is how it was last defined (its runs and enqueue history stay)")
    _print_schedule(schedule)
    print(f"payload:        {_printable(_shown_json(schedule.payload))}")
    if health is not None:
        _print_health(health)
    print(f"runs (newest {RUNS_SHOWN}; `headgate schedules runs {schedule.id}` for more):")
    _print_runs(runs, indent="  ")
    print(f"enqueue attempts (newest {HISTORY_SHOWN}):")
    _print_table(
        ("TICK", "OUTCOME", "REASON", "JOB", "RECORDED"),
        ((_iso(e.tick_ms), e.outcome, e.reason, e.job_id, _iso(e.recorded_at_ms)) for e in events),
        empty="  none",
        indent="  ",
    )
    return 0


def _add_schedule_reads(
    group: Any, command: Callable[..., Any], paged: Callable[[Any, int], None]
) -> Any:
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
        page = hg.schedule_runs(args.schedule_id, min(args.limit, RUNS_KEPT), args.cursor)
    if args.json:
        from headgate.web._schemas import (  # noqa: PLC0415 (see top)
            ScheduleRunList,
            ScheduleRunOut,
        )

        runs = [ScheduleRunOut.of(run) for run in page.runs]
        _print_json(ScheduleRunList(runs=runs, next_cursor=page.next_cursor))
        return 0
    _print_runs(page.runs, indent="")
    _print_next(page.next_cursor)
    return 0


def _print_runs(runs: Sequence[ScheduleRun], indent: str) -> None:
    _print_table(
        ("TICK", "OUTCOME", "ATTEMPTS", "DURATION", "ERROR", "JOB"),
        (
            (
                "enqueue now" if run.manual else _iso(run.tick_ms),
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
    _print_fields(
        (
            ("health", _health_word(health)),
            ("last success", _iso(health.last_success_ms)),
            (
                "last failure",
                _iso(health.last_failure_ms)
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
    when = "enqueue now" if run.manual else _iso(run.tick_ms)
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
        schedule = hg.clear_overrides(args.schedule_id)
    done = f"schedule {schedule.id} is what its code declares again"
    return _print_schedule_result(args, schedule, done)


def _schedules_delete(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.delete_schedule(args.schedule_id)
    if args.json:
        _print_json({"id": args.schedule_id, "deleted": True})
    else:
        print(f"deleted schedule {_printable(args.schedule_id)} (its enqueue history stays)")
    return 0


def _schedules_pause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        schedule = hg.pause_schedule(args.schedule_id)
    return _print_schedule_result(args, schedule, f"paused schedule {schedule.id}")


def _resume(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        schedule = hg.resume_schedule(args.schedule_id)
    return _print_schedule_result(args, schedule, f"resumed schedule {schedule.id}")


def _schedules_run_now(args: argparse.Namespace) -> int:
    key = args.idempotency_key if args.idempotency_key is not None else str(uuid.uuid4())
    with open_existing(args.db, read_only=False) as hg:
        result = hg.run_now(args.schedule_id, key)
    if args.json:
        _print_json({"id": result.job_id, "replayed": result.replayed, "idempotency_key": key})
    elif result.replayed:
        print(f"job {result.job_id} was already enqueued with idempotency key {key}")
    else:
        print(f"enqueued job {result.job_id} (idempotency key {key}: repeat it to retry safely)")
    return 0


def _print_schedule_result(args: argparse.Namespace, schedule: Schedule, done: str) -> int:
    if args.json:
        from headgate.web._schemas import ScheduleOut  # noqa: PLC0415 (see top)

        _print_json(ScheduleOut.of(schedule))
    else:
        print(_printable(done))
        _print_schedule(schedule)
    return 0


def _print_schedule(schedule: Schedule) -> None:
    try:
        words = describe_in_words(parse_spec(schedule.spec))
    except InvalidSpec:
        words = None
    meaning = "" if words is None else f"  ({words})"
    _print_fields(
        (
            ("id", schedule.id),
            ("summary", schedule.summary or "-"),
            ("spec", schedule.spec + meaning),
            ("kind", schedule.kind),
            ("queue", schedule.queue),
            ("on missed", missed_run_label(schedule.on_missed, schedule.backfill_limit)),
            ("overlap", overlap_label(schedule.overlap)),
            ("paused", "yes" if schedule.paused else "no"),
            ("next run", _iso(schedule.next_run_ms)),
            ("last enqueued", _iso(schedule.last_enqueued_ms)),
            ("retry at", _iso(schedule.retry_at_ms)),
            ("max attempts", _or_default(schedule.max_attempts)),
            ("timeout", _or_default(schedule.timeout_ms, " ms")),
            ("priority", "0 (default)" if schedule.priority is None else str(schedule.priority)),
            ("start within", _or_never(schedule.start_within_ms)),
            ("starts", _iso(schedule.start_at_ms)),
            ("ends", _iso(schedule.end_at_ms) + (" (finished)" if schedule.finished else "")),
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
        text += f"; no longer declared since {_iso(schedule.undeclared_at_ms)}"
    return text


# jobs ------------------------------------------------------------------------


def _jobs_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.list_jobs(
            state=args.state,
            queue=args.queue,
            kind=args.kind,
            schedule_id=args.schedule,
            search=args.search,
            limit=args.limit,
            cursor=args.cursor,
        )
    if args.json:
        from headgate.web._schemas import JobList, JobOut  # noqa: PLC0415 (see top)

        _print_json(
            JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)
        )
        return 0
    _print_table(
        ("ID", "KIND", "QUEUE", "STATE", "ATTEMPTS", "CRASHES", "RUN AT", "CREATED", "FROM"),
        (
            (
                job.id,
                job.kind,
                job.queue,
                job.state,
                str(job.attempts),
                str(job.crash_count),
                _iso(job.run_at_ms),
                _iso(job.created_at_ms),
                "tick" if job.periodic_origin else "manual" if job.run_now_schedule_id else "-",
            )
            for job in page.jobs
        ),
        empty="no jobs",
    )
    _print_next(page.next_cursor)
    return 0


def _jobs_enqueue(args: argparse.Namespace) -> int:
    payload = _json_argument("--payload", args.payload)
    options = JobOptions(**given(args, JOB_OPTION_FIELDS))
    with open_existing(args.db, read_only=False) as hg:
        job = operator_of(hg).enqueue_job(args.kind, payload, options)
        limits = operator_of(hg).job_limits(job)
    return _print_job_result(args, job, limits, f"enqueued job {job.id}")


def _jobs_show(args: argparse.Namespace) -> int:
    if args.as_of is not None:
        return history.print_job_as_of(args)
    with open_existing(args.db, read_only=True) as hg:
        job = hg.get_job(args.job_id)
        limits = operator_of(hg).job_limits(job)
    return _print_job_result(args, job, limits, None)


def _jobs_cancel(args: argparse.Namespace) -> int:
    if _bulk_wanted(args):
        return _jobs_bulk(args, "cancel")
    with open_existing(args.db, read_only=False) as hg:
        job = hg.cancel_job(args.job_id)
        limits = operator_of(hg).job_limits(job)
    return _print_job_result(args, job, limits, f"cancelled job {job.id}")


def _jobs_retry(args: argparse.Namespace) -> int:
    if _bulk_wanted(args):
        return _jobs_bulk(args, "retry")
    with open_existing(args.db, read_only=False) as hg:
        job = hg.retry_job(args.job_id)
        limits = operator_of(hg).job_limits(job)
    done = f"job {job.id} runs again (attempts and crashes reset)"
    return _print_job_result(args, job, limits, done)


_BULK_FLAGS: Final = ("state", "queue", "kind", "schedule", "search")


def _bulk_wanted(args: argparse.Namespace) -> bool:
    """Whether the command is a bulk one (--all), refusing a mix of the two forms."""
    filtered = [f"--{flag}" for flag in _BULK_FLAGS if getattr(args, flag) is not None]
    if args.all and args.job_id is not None:
        raise ValidationError("ID", "give one job ID or --all with filters, not both")
    if not args.all and args.job_id is None:
        raise ValidationError("ID", "give one job ID, or --all with --state and other filters")
    if not args.all and filtered:
        raise ValidationError(filtered[0], "filters choose the jobs of --all; add --all")
    return bool(args.all)


def _jobs_bulk(args: argparse.Namespace, action: str) -> int:
    filters = {
        "queue": args.queue,
        "kind": args.kind,
        "schedule_id": args.schedule,
        "search": args.search,
    }
    with open_existing(args.db, read_only=False) as hg:
        if args.state is None:
            raise ValidationError("--state", f"--all needs the state of the jobs to {action}")
        matching = hg.count_jobs(**filters)[args.state]
        taken = min(matching, args.limit)
        if not args.yes and not _confirmed(action, args.state, matching, taken):
            print("nothing changed", file=sys.stderr)
            return 1
        bulk = hg.retry_jobs if action == "retry" else hg.cancel_jobs
        result = bulk(state=args.state, limit=args.limit, **filters)
    if args.json:
        from headgate.web._schemas import JobsBulkOut  # noqa: PLC0415 (see top)

        _print_json(JobsBulkOut.of(result))
        return 0
    done = "retried" if action == "retry" else "cancelled"
    print(f"{done} {result.changed} jobs; skipped {result.skipped} that changed state meanwhile")
    if result.more:
        print(f"more match: run it again for the next {args.limit}")
    return 0


def _confirmed(action: str, state: str, matching: int, taken: int) -> bool:
    """Asks on a terminal; anywhere else (a script, a pipe) only --yes goes ahead."""
    counted = f"{matching:,}+" if matching >= JOB_COUNT_CAP else f"{matching:,}"
    question = f"{action} {taken:,} of the {counted} {state} jobs matching, newest first?"
    if not sys.stdin.isatty():
        print(f"{question} Not asked (no terminal): add --yes", file=sys.stderr)
        return False
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


def _count(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        counts = hg.count_jobs(
            queue=args.queue, kind=args.kind, schedule_id=args.schedule, search=args.search
        )
    if args.json:
        from headgate.web._schemas import JobCountsOut  # noqa: PLC0415 (see top)

        _print_json(JobCountsOut(counts=counts, cap=JOB_COUNT_CAP))
        return 0
    _print_table(
        ("STATE", "JOBS"),
        (
            (state, f"{count:,}+" if count >= JOB_COUNT_CAP else f"{count:,}")
            for state, count in counts.items()
        ),
        empty="no jobs",
    )
    return 0


def _made_by(job: Job) -> str:
    origin = job.periodic_origin
    if origin is not None:
        return f"{origin.schedule_id}, tick {_iso(origin.tick_ms)}"
    if job.run_now_schedule_id is not None:
        return f"{job.run_now_schedule_id} (manual: Enqueue now)"
    return "-"


def _print_job_result(
    args: argparse.Namespace, job: Job, limits: JobLimits, done: str | None
) -> int:
    if args.json:
        from headgate.web._schemas import JobOut  # noqa: PLC0415 (see top)

        _print_json(JobOut.of(job))
        return 0
    if done is not None:
        print(_printable(done))
    _print_fields(
        (
            ("id", job.id),
            ("kind", job.kind),
            ("queue", job.queue),
            ("priority", str(job.priority)),
            ("partition key", job.partition_key or "-"),
            ("rate class", job.rate_class or "-"),
            ("state", job.state),
            ("waiting for", "; ".join(job.waiting_for) or "-"),
            ("run at", _iso(job.run_at_ms)),
            ("start by", _iso(job.start_by_ms)),
            ("created", _iso(job.created_at_ms)),
            ("updated", _iso(job.updated_at_ms)),
            ("from schedule", _made_by(job)),
            ("unique key", job.unique_key or "-"),
            ("fingerprint", job.fingerprint),
            ("attempts", str(job.attempts)),
            ("max attempts", _in_force(limits.max_attempts, str(limits.max_attempts.value))),
            ("crashes", str(job.crash_count)),
            ("snoozes", str(job.snoozes)),
            ("timeout", _in_force(limits.timeout_ms, f"{limits.timeout_ms.value} ms")),
            ("worker", job.worker_id or "-"),
            ("running", _running(job.running_attempt)),
            ("error", _error(job.error_type, job.error_message)),
            ("payload", _shown_json(job.payload)),
            ("result", _shown_json(job.result)),
        )
    )
    if done is None:
        print("attempts (newest first):")
        _print_table(
            ("#", "OUTCOME", "WORKER", "STARTED", "ENDED", "DURATION", "ERROR"),
            (
                (
                    str(a.attempt),
                    a.outcome,
                    a.worker_id or "-",
                    _iso(a.started_at_ms),
                    _iso(a.ended_at_ms),
                    "-" if a.duration_ms is None else f"{a.duration_ms} ms",
                    _error(a.error_type, a.error_message),
                )
                for a in job.attempt_history
            ),
            empty="  none",
            indent="  ",
        )
        _print_newest_traceback(job)
    return 0


def _print_newest_traceback(job: Job) -> None:
    """The newest failure's traceback, under the attempts (the older ones are in
    --json and the console)."""
    failed = next((a for a in job.attempt_history if a.traceback), None)
    if failed is None or failed.traceback is None:
        return
    print(f"traceback of attempt {failed.attempt} (the newest failure):")
    for line in failed.traceback.split("\n"):
        print(f"  {_printable(line)}")


# quarantine ------------------------------------------------------------------


def _quarantine_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.list_quarantine(args.limit, args.cursor)
    if args.json:
        from headgate.web._schemas import QuarantineList, QuarantineOut  # noqa: PLC0415

        _print_json(
            QuarantineList(
                entries=[QuarantineOut.of(e) for e in page.entries], next_cursor=page.next_cursor
            )
        )
        return 0
    _print_table(
        ("FINGERPRINT", "KIND", "SAMPLE JOB", "SINCE", "WHY"),
        (
            (
                e.fingerprint,
                e.kind or "-",
                e.sample_job_id or "-",
                _iso(e.quarantined_at_ms),
                e.note or "-",
            )
            for e in page.entries
        ),
        empty="nothing is quarantined",
    )
    _print_next(page.next_cursor)
    return 0


def _release(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.release(args.fingerprint)
    if args.json:
        _print_json({"fingerprint": args.fingerprint, "released": True})
    else:
        print(f"released {_printable(args.fingerprint)}: its jobs are admitted again")
    return 0


def _quarantine_add(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.quarantine(args.fingerprint, args.note)
        entry = hg.quarantine_entry(args.fingerprint)
    assert entry is not None
    if args.json:
        from headgate.web._schemas import QuarantineOut  # noqa: PLC0415 (see top)

        _print_json(QuarantineOut.of(entry))
    else:
        _print_quarantined(entry)
    return 0


def _print_quarantined(entry: QuarantineEntry) -> None:
    print(f"quarantined {entry.fingerprint} since {_iso(entry.quarantined_at_ms)}")


# queues ----------------------------------------------------------------------


def _queues_list(args: argparse.Namespace) -> int:
    from headgate.web._schemas import queue_weight  # noqa: PLC0415 (see top)

    with open_existing(args.db, read_only=True) as hg:
        shown = busiest(hg.queues(), args.limit, queue_weight)
    queues = shown.items
    if args.json:
        from headgate.web._schemas import QueueList, QueueOut  # noqa: PLC0415 (see top)

        _print_json(QueueList(queues=[QueueOut.of(queue) for queue in queues], more=shown.more))
        return 0
    _print_table(
        ("QUEUE", "PAUSED", "PENDING", "RUNNING", "WHY"),
        (
            (
                q.name,
                f"since {_iso(q.paused_at_ms)}" if q.paused else "no",
                str(q.pending),
                str(q.running),
                q.note or "-",
            )
            for q in queues
        ),
        empty="no queues",
    )
    _print_more(shown.more, "queues, each with fewer jobs")
    return 0


def _unserved(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        shown = busiest(hg.unserved(), args.limit, lambda work: work.pending)
    unserved = shown.items
    if args.json:
        from headgate.web._schemas import UnservedList, UnservedOut  # noqa: PLC0415 (see top)

        _print_json(
            UnservedList(unserved=[UnservedOut.of(work) for work in unserved], more=shown.more)
        )
        return 0
    _print_table(
        ("QUEUE", "KIND", "PENDING", "WHY"),
        ((work.queue, work.kind, str(work.pending), work.reason) for work in unserved),
        empty="every pending job has a live worker to run it",
    )
    _print_more(shown.more, "(queue, kind), each with fewer pending jobs")
    return 0


def _handlers_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        handlers = hg.declared_handlers()
    if args.json:
        from headgate.web._schemas import HandlerList, HandlerOut  # noqa: PLC0415 (see top)

        _print_json(HandlerList(handlers=[HandlerOut.of(handler) for handler in handlers]))
        return 0
    _print_table(
        ("KIND", "QUEUE", "PRIORITY", "GROUP", "HOST", "SINCE"),
        (
            (h.kind, h.queue, str(h.priority), h.declared_by, h.host, _iso(h.declared_at_ms))
            for h in handlers
        ),
        empty="no handler is declared (a runtime with handlers records them when it starts)",
    )
    return 0


def _pause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.pause_queue(args.queue, args.note)
    return _print_queue(args, status, "paused: no worker claims its jobs until it is resumed")


def _unpause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.resume_queue(args.queue)
    return _print_queue(args, status, "resumed: workers claim its jobs again")


def _print_queue(args: argparse.Namespace, status: QueueStatus, done: str) -> int:
    if args.json:
        from headgate.web._schemas import QueueOut  # noqa: PLC0415 (see top)

        _print_json(QueueOut.of(status))
    else:
        print(_printable(f"queue {status.name} {done} ({status.pending} pending)"))
    return 0


# output ----------------------------------------------------------------------


def _json_argument(option: str, text: str | None) -> JsonValue:
    if text is None:
        return None

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as error:
        raise ValidationError(option, f"is not valid JSON: {error}") from None


def _in_force(limit: LimitInForce, shown: str) -> str:
    if limit.source == LimitSource.JOB:
        return shown
    if limit.source == LimitSource.HANDLER:
        return f"{shown} (its handler's)"
    return f"{shown} (the default, unless the handler that runs it sets its own)"


def _running(attempt: RunningAttempt | None) -> str:
    if attempt is None:
        return "-"
    deadline = "" if attempt.deadline_ms is None else f", times out {_iso(attempt.deadline_ms)}"
    return (
        f"attempt {attempt.attempt} on {attempt.worker_id or '-'} "
        f"since {_iso(attempt.started_at_ms)}{deadline}"
    )


def _or_never(value_ms: int | None) -> str:
    return "no deadline" if value_ms is None else f"{value_ms} ms after its tick"


def _or_default(value: int | None, unit: str = "") -> str:
    return "its handler's" if value is None else f"{value}{unit}"


def _error(error_type: str | None, message: str | None) -> str:
    if error_type is None:
        return "-"
    return error_type if message is None else f"{error_type}: {message}"


def _shown_json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _print_next(cursor: str | None) -> None:
    if cursor is not None:
        print(f"next page: --cursor {cursor}")
