"""The command line's reads of the past: `schedules show ID --as-of T`,
`jobs show ID --as-of T` and `schedules changes ID` (as `GET
/api/v1/schedules/{id}/as-of`, `/jobs/{id}/as-of` and `/schedules/{id}/changes`).
The API's schemas are imported only with --json, as everywhere in the command line."""

from __future__ import annotations

import argparse

from headgate._app import open_existing
from headgate._domain.read_fields import JOB_READ, SCHEDULE_READ
from headgate._history import BEFORE_KEPT, DELETED, NOT_YET, ScheduleAsOf
from headgate._worker_flags import int_in
from headgate.cli._common import Commands, command
from headgate.cli._output import (
    iso,
    made_by,
    print_fields,
    print_json,
    print_read,
    print_table,
    printable,
)

INSTANT_HELP = "epoch ms or ISO-8601 (2026-12-05T01:00:00Z; without an offset: UTC)"


def add_as_of(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as-of", metavar="INSTANT", help=f"as it stood at this instant: {INSTANT_HELP}"
    )


def add_schedule_history(group: Commands, show: argparse.ArgumentParser) -> None:
    """`schedules show --as-of` and `schedules changes`."""
    add_as_of(show)
    changes = command(
        group,
        "changes",
        "a schedule's definition changes, each with who made it and what differs",
        print_schedule_changes,
    )
    changes.add_argument("schedule_id", metavar="ID")
    changes.add_argument("--since", metavar="INSTANT", help=f"after it ({INSTANT_HELP})")
    changes.add_argument("--until", metavar="INSTANT", help="up to it (default: now)")
    changes.add_argument(
        "--limit", type=int_in(1, 100), default=100, help="the newest N (default 100)"
    )


def print_schedule_as_of(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        found = hg.schedules.as_of(args.schedule_id, args.as_of)
    if args.json:
        from headgate._wire.history import ScheduleAsOfOut  # noqa: PLC0415

        print_json(ScheduleAsOfOut.of(found))
        return 0
    print(f"as of {iso(found.as_of_ms)}: {_said(found)}")
    schedule = found.schedule
    if schedule is None:
        return 0
    owner = "code (periodic)" if schedule.declared_in_code else "operators"
    print_read(SCHEDULE_READ, schedule, {"declared_in_code": owner})
    print_fields(
        (
            ("changed", iso(found.changed_at_ms)),
            ("changed by", found.changed_by or "not recorded"),
        )
    )
    return 0


def _said(found: ScheduleAsOf) -> str:
    if found.state == NOT_YET:
        return f"it did not exist yet (first defined {iso(found.oldest_kept_ms)})"
    if found.state == BEFORE_KEPT:
        return (
            "the log cannot say: the instant is before the oldest event compaction kept "
            f"({iso(found.oldest_kept_ms)})"
        )
    said = "deleted by then; its last definition" if found.state == DELETED else "defined"
    if not found.exact:
        said += " (events before it were compacted: next run as of the newest kept)"
    return said


def print_schedule_changes(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        changes = hg.schedules.changes(
            args.schedule_id, since=args.since, until=args.until, limit=args.limit
        )
    if args.json:
        from headgate._wire.history import ScheduleChangesOut  # noqa: PLC0415

        print_json(ScheduleChangesOut.of(changes))
        return 0
    rows: list[tuple[str, ...]] = []
    for change in changes.changes:
        made = (iso(change.recorded_at_ms), change.what, change.changed_by or "not recorded")
        fields = [(f.field, f.before or "-", f.after or "-") for f in change.fields]
        rows.extend((*made, *field) for field in fields or [("-", "-", "-")])
    print_table(
        ("WHEN", "WHAT", "WHO", "FIELD", "BEFORE", "AFTER"), rows, empty="no changes in the window"
    )
    if changes.more_before:
        print(printable("older changes in the window were left out: narrow it with --since"))
    return 0


def print_job_as_of(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        found = hg.jobs.as_of(args.job_id, args.as_of)
    if args.json:
        from headgate._wire.history import JobAsOfOut  # noqa: PLC0415

        print_json(JobAsOfOut.of(found))
        return 0
    job = found.job
    if job is None:
        print(f"as of {iso(found.as_of_ms)}: it had not been enqueued yet")
        return 0
    print(f"as of {iso(found.as_of_ms)}: as its events left it (a claim is not an event)")
    print_read(
        JOB_READ,
        job,
        {"periodic_origin": made_by(job), "run_now_schedule_id": None, "attempt_history": None},
    )
    print_table(
        ("ATTEMPT", "OUTCOME", "ENDED", "ERROR"),
        (
            (str(a.attempt), a.outcome, iso(a.ended_at_ms), a.error_type or "-")
            for a in job.attempt_history
        ),
        empty="  no attempt had ended",
        indent="  ",
    )
    return 0
