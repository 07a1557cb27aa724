"""`headgate queues`: list, pause and resume queues (the conventions of
`_common`: --db, --json, exit statuses)."""

from __future__ import annotations

import argparse

from headgate._app import open_existing
from headgate._domain.shown import busiest, queue_weight
from headgate._model import QueueStatus
from headgate.cli._common import Commands, command, noun, print_more, shown_at_most
from headgate.cli._output import iso, print_json, print_table, printable


def add_commands(commands: Commands) -> None:
    """`headgate queues`."""
    group = noun(commands, "queues", "list, pause and resume queues")
    listing = command(
        group, "list", "queues: paused or not, their jobs waiting and running", _queues_list
    )
    shown_at_most(listing)
    pause = command(
        group, "pause", "stop every process claiming a queue's jobs (running ones finish)", _pause
    )
    pause.add_argument("queue", metavar="QUEUE")
    pause.add_argument("--note", default="", help="why (shown by queues list)")
    resume = command(group, "resume", "let workers claim a paused queue's jobs again", _unpause)
    resume.add_argument("queue", metavar="QUEUE")


def _queues_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        shown = busiest(hg.queues.list(), args.limit, queue_weight)
    queues = shown.items
    if args.json:
        from headgate._wire.queues import QueueList, QueueOut  # noqa: PLC0415 (--json only)

        print_json(QueueList(queues=[QueueOut.of(queue) for queue in queues], more=shown.more))
        return 0
    print_table(
        ("QUEUE", "PAUSED", "PENDING", "RUNNING", "WHY"),
        (
            (
                q.name,
                f"since {iso(q.paused_at_ms)}" if q.paused else "no",
                str(q.pending),
                str(q.running),
                q.note or "-",
            )
            for q in queues
        ),
        empty="no queues",
    )
    print_more(shown.more, "queues, each with fewer jobs")
    return 0


def _pause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.queues.pause(args.queue, args.note)
    return _print_queue(args, status, "paused: no worker claims its jobs until it is resumed")


def _unpause(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.queues.resume(args.queue)
    return _print_queue(args, status, "resumed: workers claim its jobs again")


def _print_queue(args: argparse.Namespace, status: QueueStatus, done: str) -> int:
    if args.json:
        from headgate._wire.queues import QueueOut  # noqa: PLC0415 (--json only)

        print_json(QueueOut.of(status))
    else:
        print(printable(f"queue {status.name} {done} ({status.pending} pending)"))
    return 0
