"""What every command module builds its commands with: the parser class, the
--db and --app options, one operator subcommand (--db, --json, acting as the
command line), pages, and the exit statuses.

The operator commands (`schedules`, `jobs`, `quarantine`, `queues`, `handlers`,
`limits`, `rate-limits`) each open the store at --db (never creating one: a
mistyped URL is an error; what only reads migrates nothing), act and close it;
none starts the runtime. Output is a table or key/value lines for people, or
with `--json` one JSON document with the API's field names (its response
bodies, the schemas of `headgate._wire`, imported only then: pydantic stays out
of a plain command's start). Exit status: 0 done; 1 not found or refused
(NotFound, JobStateConflict, AdmissionRejected, DuplicateJob) or the store
failed; 2 bad input (ValidationError, bad arguments). Errors are one line on
stderr (`_main.main`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import TypeAlias

from headgate import _actors as actors
from headgate._app import Headgate
from headgate._domain.cursors import MAX_PAGE
from headgate._domain.shown import MAX_SHOWN, PAGE_SHOWN
from headgate._redact import masked
from headgate._worker_flags import int_in

Handler = Callable[[argparse.Namespace], int]

DEFAULT_DB = "sqlite:///headgate.db"
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and exit status 2 (an argument it
    quotes may be a store URL: masked)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {self.prog}: {masked(message)}\n")


Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""The subcommands of `headgate` (or of a noun such as `headgate jobs`)."""


def noun(commands: Commands, name: str, help_text: str, *, formerly: str | None = None) -> Commands:
    """A command with subcommands of its own (`headgate jobs ...`; `formerly`: its
    name before a rename, still taken for one minor version)."""
    parser = commands.add_parser(name, help=help_text, aliases=[formerly] if formerly else [])
    return parser.add_subparsers(title="commands", parser_class=Parser, required=True)


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("HEADGATE_DB", DEFAULT_DB),
        metavar="URL",
        help=f"store URL (default $HEADGATE_DB or {DEFAULT_DB})",
    )


def add_app(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--app",
        required=required,
        metavar="MODULE:NAME",
        help="the Headgate object of your service, whose handlers run here "
        "(e.g. myservice.jobs:hg; imported with the working directory on the path); "
        "it names its own store, so --db is not used",
    )


def load_app(reference: str) -> Headgate:
    """The Headgate named by `module:attribute` (as Celery's -A, Procrastinate's --app)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--app: {reference!r} is not MODULE:NAME (e.g. myservice.jobs:hg)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--app: cannot import {module_name!r}: {error}") from None
    found: object = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise ValueError(f"--app: {module_name!r} has no {attribute!r}")
    if not isinstance(found, Headgate):
        raise ValueError(f"--app: {reference} is a {type(found).__name__}, not a Headgate")
    return found


def command(
    group: Commands, name: str, help_text: str, handler: Handler, *, formerly: str | None = None
) -> argparse.ArgumentParser:
    """An operator subcommand: --db, --json, its changes recorded as the command line's
    (`formerly`: its name before a rename, still taken for one minor version)."""
    parser = group.add_parser(name, help=help_text, aliases=[formerly] if formerly else [])
    add_db(parser)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document (the API's fields)"
    )
    parser.set_defaults(handler=_as_the_cli(handler))
    return parser


def _as_the_cli(handler: Handler) -> Handler:
    """The handler, its changes recorded as made through the command line."""

    def handle(args: argparse.Namespace) -> int:
        with actors.acting_as(actors.CLI):
            return handler(args)

    return handle


def paged(parser: argparse.ArgumentParser, default: int) -> None:
    """--limit (up to the API's largest page) and --cursor."""
    parser.add_argument(
        "--limit",
        type=int_in(1, MAX_PAGE),
        default=default,
        help=f"at most N (default {default})",
    )
    parser.add_argument("--cursor", metavar="C", help="the next page, as the last one said")


def shown_at_most(parser: argparse.ArgumentParser) -> None:
    """--limit of a list that shows the busiest and counts the rest."""
    parser.add_argument(
        "--limit",
        type=int_in(1, MAX_SHOWN),
        default=PAGE_SHOWN,
        metavar="N",
        help=f"at most N, the busiest (default {PAGE_SHOWN}); the rest are counted",
    )


def print_more(more: int, what: str) -> None:
    if more:
        print(f"and {more:,} more {what} (--limit N shows up to {MAX_SHOWN:,})")


def print_next(cursor: str | None) -> None:
    if cursor is not None:
        print(f"next page: --cursor {cursor}")
