"""`headgate jobs`: list, count, enqueue, show, cancel and retry jobs (one or
in bulk), and the pending work no live worker runs (the conventions of
`_common`: --db, --json, exit statuses)."""

from __future__ import annotations

import argparse
import sys
from typing import Final

from headgate._app import JOB_COUNT_CAP, open_existing
from headgate._domain.events import JobState
from headgate._domain.lifecycle import BULK_MAX
from headgate._domain.options import JOB_OPTION_FIELDS, JobOptions
from headgate._domain.read_fields import JOB_READ
from headgate._domain.shown import busiest
from headgate._errors import ValidationError
from headgate._model import Job, JobSettings, RunningAttempt, SettingInForce, SettingSource
from headgate._operator import operator_of
from headgate._worker_flags import int_in
from headgate.cli import _history as history
from headgate.cli._common import (
    Commands,
    command,
    noun,
    paged,
    print_more,
    print_next,
    shown_at_most,
)
from headgate.cli._options import add_option_flags, given, json_argument
from headgate.cli._output import (
    iso,
    made_by,
    print_json,
    print_read,
    print_table,
    printable,
)


def add_commands(commands: Commands) -> None:
    """`headgate jobs`."""
    group = noun(commands, "jobs", "list, inspect, cancel and retry jobs")
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
    shown_at_most(unserved)
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
        _add_bulk_flags(changing)


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


def _add_bulk_flags(parser: argparse.ArgumentParser) -> None:
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


def _jobs_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.jobs.list(
            state=args.state,
            queue=args.queue,
            kind=args.kind,
            schedule_id=args.schedule,
            search=args.search,
            limit=args.limit,
            cursor=args.cursor,
        )
    if args.json:
        from headgate._wire.jobs import JobList, JobOut  # noqa: PLC0415 (--json only)

        print_json(
            JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)
        )
        return 0
    print_table(
        ("ID", "KIND", "QUEUE", "STATE", "ATTEMPTS", "CRASHES", "RUN AT", "CREATED", "FROM"),
        (
            (
                job.id,
                job.kind,
                job.queue,
                job.state,
                str(job.attempts),
                str(job.crash_count),
                iso(job.run_at_ms),
                iso(job.created_at_ms),
                "tick" if job.periodic_origin else "manual" if job.run_now_schedule_id else "-",
            )
            for job in page.jobs
        ),
        empty="no jobs",
    )
    print_next(page.next_cursor)
    return 0


def _jobs_enqueue(args: argparse.Namespace) -> int:
    payload = None if args.payload is None else json_argument("payload", args.payload)
    options = JobOptions(**given(args, JOB_OPTION_FIELDS))
    with open_existing(args.db, read_only=False) as hg:
        job = operator_of(hg).enqueue_job(args.kind, payload, options)
        limits = operator_of(hg).job_settings(job)
    return _print_job_result(args, job, limits, f"enqueued job {job.id}")


def _jobs_show(args: argparse.Namespace) -> int:
    if args.as_of is not None:
        return history.print_job_as_of(args)
    with open_existing(args.db, read_only=True) as hg:
        job = hg.jobs.get(args.job_id)
        limits = operator_of(hg).job_settings(job)
    return _print_job_result(args, job, limits, None)


def _jobs_cancel(args: argparse.Namespace) -> int:
    if _bulk_wanted(args):
        return _jobs_bulk(args, "cancel")
    with open_existing(args.db, read_only=False) as hg:
        job = hg.jobs.cancel(args.job_id)
        limits = operator_of(hg).job_settings(job)
    return _print_job_result(args, job, limits, f"cancelled job {job.id}")


def _jobs_retry(args: argparse.Namespace) -> int:
    if _bulk_wanted(args):
        return _jobs_bulk(args, "retry")
    with open_existing(args.db, read_only=False) as hg:
        job = hg.jobs.retry(args.job_id)
        limits = operator_of(hg).job_settings(job)
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
        matching = hg.jobs.count(**filters)[args.state]
        taken = min(matching, args.limit)
        if not args.yes and not _confirmed(action, args.state, matching, taken):
            print("nothing changed", file=sys.stderr)
            return 1
        bulk = hg.jobs.retry_many if action == "retry" else hg.jobs.cancel_many
        result = bulk(state=args.state, limit=args.limit, **filters)
    if args.json:
        from headgate._wire.jobs import JobsBulkOut  # noqa: PLC0415 (--json only)

        print_json(JobsBulkOut.of(result))
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
        counts = hg.jobs.count(
            queue=args.queue, kind=args.kind, schedule_id=args.schedule, search=args.search
        )
    if args.json:
        from headgate._wire.jobs import JobCountsOut  # noqa: PLC0415 (--json only)

        print_json(JobCountsOut(counts=counts, cap=JOB_COUNT_CAP))
        return 0
    print_table(
        ("STATE", "JOBS"),
        (
            (state, f"{count:,}+" if count >= JOB_COUNT_CAP else f"{count:,}")
            for state, count in counts.items()
        ),
        empty="no jobs",
    )
    return 0


def _print_job_result(
    args: argparse.Namespace, job: Job, limits: JobSettings, done: str | None
) -> int:
    if args.json:
        from headgate._wire.jobs import JobOut  # noqa: PLC0415 (--json only)

        print_json(JobOut.of(job))
        return 0
    if done is not None:
        print(printable(done))
    print_read(
        JOB_READ,
        job,
        {
            "max_attempts": _in_force(limits.max_attempts, str(limits.max_attempts.value)),
            "timeout_ms": _in_force(limits.timeout_ms, f"{limits.timeout_ms.value} ms"),
            "periodic_origin": made_by(job),
            "run_now_schedule_id": None,
            "running_attempt": _running(job.running_attempt),
            "error_type": _error(job.error_type, job.error_message),
            "error_message": None,
            "attempt_history": None,
        },
    )
    if done is None:
        print("attempts (newest first):")
        print_table(
            ("#", "OUTCOME", "WORKER", "STARTED", "ENDED", "DURATION", "ERROR"),
            (
                (
                    str(a.attempt),
                    a.outcome,
                    a.worker_id or "-",
                    iso(a.started_at_ms),
                    iso(a.ended_at_ms),
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
        print(f"  {printable(line)}")


def _unserved(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        shown = busiest(hg.runtime.unserved(), args.limit, lambda work: work.pending)
    unserved = shown.items
    if args.json:
        from headgate._wire.queues import UnservedList, UnservedOut  # noqa: PLC0415

        print_json(
            UnservedList(unserved=[UnservedOut.of(work) for work in unserved], more=shown.more)
        )
        return 0
    print_table(
        ("QUEUE", "KIND", "PENDING", "WHY"),
        ((work.queue, work.kind, str(work.pending), work.reason) for work in unserved),
        empty="every pending job has a live worker to run it",
    )
    print_more(shown.more, "(queue, kind), each with fewer pending jobs")
    return 0


def _in_force(limit: SettingInForce, shown: str) -> str:
    if limit.source == SettingSource.JOB:
        return shown
    if limit.source == SettingSource.HANDLER:
        return f"{shown} (its handler's)"
    return f"{shown} (the default, unless the handler that runs it sets its own)"


def _running(attempt: RunningAttempt | None) -> str:
    if attempt is None:
        return "-"
    deadline = "" if attempt.deadline_ms is None else f", times out {iso(attempt.deadline_ms)}"
    return (
        f"attempt {attempt.attempt} on {attempt.worker_id or '-'} "
        f"since {iso(attempt.started_at_ms)}{deadline}"
    )


def _error(error_type: str | None, message: str | None) -> str:
    if error_type is None:
        return "-"
    return error_type if message is None else f"{error_type}: {message}"
