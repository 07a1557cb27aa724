"""The flags of a process that runs workers, and the WorkerConfig they make:
`headgate worker` and Django's `manage.py headgate_worker` take the same ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from headgate._domain.admission import MAX_QUEUE_LENGTH
from headgate._domain.names import identifier_problem
from headgate._runtime.config import MAX_SHUTDOWN_TIMEOUT_S, MIN_CHILD_MEMORY_MB, WorkerConfig


def add_worker_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue",
        action="append",
        type=_queue_capacity,
        metavar="NAME=N",
        help="serve this queue with N jobs at once (repeatable; default: the handlers' queues)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds_in(0, MAX_SHUTDOWN_TIMEOUT_S),
        default=30.0,
        metavar="S",
        help="on SIGTERM, seconds running jobs may finish before they are given back (30)",
    )
    parser.add_argument(
        "--log-successes",
        action="store_true",
        help="log each attempt that succeeded at INFO (default: DEBUG; failures always "
        "at WARNING or ERROR)",
    )
    parser.add_argument(
        "--max-jobs-per-child",
        type=int_in(1, 10**9),
        default=None,
        metavar="N",
        help='replace each child process of executor="process" handlers after N jobs '
        "(default: kept)",
    )
    parser.add_argument(
        "--child-memory-limit-mb",
        type=int_in(MIN_CHILD_MEMORY_MB, 2**30),
        default=None,
        metavar="MB",
        help="hold each such child to this much address space; beyond it the handler gets "
        "MemoryError (default: no limit)",
    )


def worker_config(
    args: argparse.Namespace, default_queues: dict[str, int] | None = None
) -> WorkerConfig:
    """What the flags of `add_worker_flags` say; `default_queues` without --queue."""
    return WorkerConfig(
        queues=dict(args.queue) if args.queue else default_queues,
        shutdown_timeout_s=args.shutdown_timeout,
        log_successes=args.log_successes,
        max_jobs_per_child=args.max_jobs_per_child,
        child_memory_limit_mb=args.child_memory_limit_mb,
    )


def _queue_capacity(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    if not name or not count.isdigit() or not 1 <= int(count) <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=N with N from 1 to 1000")
    problem = identifier_problem(name, MAX_QUEUE_LENGTH)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"queue {name!r}: {problem}")
    return name, int(count)


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}-{high}, got {value}")
        return value

    return parse


def seconds_in(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: seconds from `low` to `high` (nan and infinity refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not low <= value <= high:  # nan compares false: refused as well
            raise argparse.ArgumentTypeError(f"must be {low:g}-{high:g} seconds, got {text}")
        return value

    return parse


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
