"""The `headgate` command line.

Every command reports bad arguments and unreachable databases in one line on
stderr with a non-zero exit status, never a traceback: 2 for a usage error (a
store URL that does not parse, or names a place no store can be opened, among
them), 1 for the rest. No line shows a password: an error is masked
(`_redact`) before it is printed, whatever raised it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from headgate._errors import HeadgateError, StoreUnopenable, ValidationError
from headgate._logs import say
from headgate._redact import masked
from headgate._server_extra import ServerExtraMissing, is_server_module
from headgate._version import installed_version
from headgate.cli import (
    _handlers,
    _jobs,
    _limits,
    _log,
    _quarantine,
    _queues,
    _runners,
    _schedules,
    _serve,
    _ticks,
)
from headgate.cli._common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, Parser

WIRE = "headgate._wire"
"""The API's bodies, which --json prints (pydantic: the server extra)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler  # every command has one
    try:
        if getattr(args, "json", False):  # checked before the command acts, not after
            importlib.import_module(WIRE)
        return handler(args)
    except KeyboardInterrupt:
        say("\ninterrupted; run the same command again to resume")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `headgate jobs list | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except (StoreUnopenable, ValidationError) as error:  # bad input, as a bad argument is
        _print_error(error)
        return EXIT_USAGE
    except ModuleNotFoundError as error:
        if not is_server_module(error):
            raise
        _print_error(ServerExtraMissing(error.name or "fastapi", _needing_the_server(args)))
        return EXIT_USAGE
    except (HeadgateError, ValueError) as error:
        _print_error(error)
        return EXIT_ERROR


def _needing_the_server(args: argparse.Namespace) -> str:
    """What asked for the server extra: `serve`, or `--json` (the API's bodies)."""
    if args.handler is _serve.serve:
        return "headgate serve"
    if getattr(args, "json", False):
        return "--json (it prints the HTTP API's bodies)"
    return "this command"


def _print_error(error: Exception) -> None:
    """One line, whatever the message holds (a driver's may span several)."""
    text = " ".join(str(error).split()) or type(error).__name__
    say(f"error: {masked(text)}")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="headgate", description="Durable periodic jobs.")
    parser.add_argument("--version", action="version", version=f"headgate {installed_version()}")
    commands = parser.add_subparsers(title="commands", parser_class=Parser, required=True)
    for noun in (
        _serve,
        _runners,
        _ticks,
        _log,
        _schedules,
        _jobs,
        _quarantine,
        _queues,
        _handlers,
        _limits,
    ):
        noun.add_commands(commands)
    return parser
