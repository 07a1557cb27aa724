"""`headgate handlers`: the handlers each declarations group's code declares,
as enqueue routes a kind by them (the conventions of `_common`)."""

from __future__ import annotations

import argparse

from headgate._app import open_existing
from headgate.cli._common import Commands, command, noun
from headgate.cli._output import iso, print_json, print_table


def add_commands(commands: Commands) -> None:
    """`headgate handlers`."""
    group = noun(commands, "handlers", "the handlers each group's code declares")
    command(
        group,
        "list",
        "declared handlers: the queue and defaults enqueue routes each kind by",
        _handlers_list,
    )


def _handlers_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        handlers = hg.runtime.declared_handlers()
    if args.json:
        from headgate._wire.fleet import HandlerList, HandlerOut  # noqa: PLC0415 (--json only)

        print_json(HandlerList(handlers=[HandlerOut.of(handler) for handler in handlers]))
        return 0
    print_table(
        ("KIND", "QUEUE", "PRIORITY", "GROUP", "HOST", "SINCE"),
        (
            (h.kind, h.queue, str(h.priority), h.declared_by, h.host, iso(h.declared_at_ms))
            for h in handlers
        ),
        empty="no handler is declared (a runtime with handlers records them when it starts)",
    )
    return 0
