"""`headgate quarantine`: list, add and release quarantined fingerprints (the
conventions of `_common`: --db, --json, exit statuses)."""

from __future__ import annotations

import argparse

from headgate._app import open_existing
from headgate._model import QuarantineEntry
from headgate.cli._common import Commands, command, noun, paged, print_next
from headgate.cli._output import iso, print_json, print_table, printable


def add_commands(commands: Commands) -> None:
    """`headgate quarantine`."""
    group = noun(commands, "quarantine", "quarantined fingerprints")
    paged(command(group, "list", "quarantined fingerprints, newest first", _quarantine_list), 50)
    release = command(group, "release", "make a fingerprint admissible again", _release)
    release.add_argument("fingerprint", metavar="FINGERPRINT")
    add = command(group, "add", "quarantine a fingerprint by hand", _quarantine_add)
    add.add_argument("fingerprint", metavar="FINGERPRINT")
    add.add_argument("--note", default="", help="why (shown by quarantine list)")


def _quarantine_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        page = hg.quarantine.list(args.limit, args.cursor)
    if args.json:
        from headgate._wire.queues import QuarantineList, QuarantineOut  # noqa: PLC0415 (--json only)

        print_json(
            QuarantineList(
                entries=[QuarantineOut.of(e) for e in page.entries], next_cursor=page.next_cursor
            )
        )
        return 0
    print_table(
        ("FINGERPRINT", "KIND", "SAMPLE JOB", "SINCE", "WHY"),
        (
            (
                e.fingerprint,
                e.kind or "-",
                e.sample_job_id or "-",
                iso(e.quarantined_at_ms),
                e.note or "-",
            )
            for e in page.entries
        ),
        empty="nothing is quarantined",
    )
    print_next(page.next_cursor)
    return 0


def _release(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.quarantine.release(args.fingerprint)
    if args.json:
        print_json({"fingerprint": args.fingerprint, "released": True})
    else:
        print(f"released {printable(args.fingerprint)}: its jobs are admitted again")
    return 0


def _quarantine_add(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        hg.quarantine.add(args.fingerprint, args.note)
        entry = hg.quarantine.get(args.fingerprint)
    assert entry is not None
    if args.json:
        from headgate._wire.queues import QuarantineOut  # noqa: PLC0415 (--json only)

        print_json(QuarantineOut.of(entry))
    else:
        _print_quarantined(entry)
    return 0


def _print_quarantined(entry: QuarantineEntry) -> None:
    print(f"quarantined {entry.fingerprint} since {iso(entry.quarantined_at_ms)}")
