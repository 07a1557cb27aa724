"""`headgate limits` and `headgate rates`: the fleet-wide limits and rate classes, as the
control API's /limits and /rates edit them, against a store URL (the
conventions of `_common`: --db, --json, exit statuses)."""

from __future__ import annotations

import argparse

from headgate._app import open_existing
from headgate._errors import NotFound
from headgate._model import ConcurrencyLimitStatus, RateStatus
from headgate.cli._common import Commands, command, noun
from headgate.cli._output import iso, print_json, print_table, printable


def add_commands(commands: Commands) -> None:
    """`headgate limits` and `headgate rates`. Numbers are checked by the
    domain, whose errors name the field (exit status 2)."""
    group = noun(commands, "limits", "fleet-wide limits on running jobs")
    command(group, "list", "every concurrency limit, with its jobs running now", _limits_list)
    put = command(
        group, "set", "hold a scope's jobs to LIMIT running at once, fleet-wide", _limit_set
    )
    _scope_flags(put)
    put.add_argument("limit", metavar="LIMIT", type=int, help="0 stops the scope's jobs")
    clear = command(group, "clear", "remove the limit on exactly this scope", _limit_clear)
    _scope_flags(clear)

    group = noun(commands, "rates", "rate classes: starts per window", formerly="rate-limits")
    command(group, "list", "every rate class's limit and its starts in the window", _rates_list)
    put = command(group, "set", "at most --limit of a class's jobs start in any window", _rate_set)
    put.add_argument("rate_class", metavar="RATE_CLASS")
    put.add_argument("--limit", type=int, required=True, help="starts per window")
    put.add_argument("--per-ms", type=int, required=True, help="the window, in milliseconds")
    clear = command(group, "clear", "remove a rate class's limit", _rate_clear)
    clear.add_argument("rate_class", metavar="RATE_CLASS")


def _scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", help="its queue (default: any)")
    parser.add_argument("--kind", help="its kind (default: any)")
    parser.add_argument(
        "--partition-key", help='its partition key ("*": each key on its own; default: any)'
    )


def _limits_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        limits = hg.limits.list()
    if args.json:
        from headgate._wire.limits import ConcurrencyLimitOut, LimitList  # noqa: PLC0415

        print_json(LimitList(limits=[ConcurrencyLimitOut.of(limit) for limit in limits]))
        return 0
    print_table(
        ("QUEUE", "KIND", "PARTITION", "RUNNING", "LIMIT", "BUSIEST", "SET"),
        (
            (
                limit.queue or "any",
                limit.kind or "any",
                _partition(limit.partition_key),
                str(limit.running),
                str(limit.limit) + (" per key" if limit.partition_key == "*" else ""),
                ", ".join(f"{key}: {count}" for key, count in limit.running_by_partition) or "-",
                iso(limit.set_at_ms),
            )
            for limit in limits
        ),
        empty="no concurrency limits",
    )
    return 0


def _partition(partition_key: str | None) -> str:
    if partition_key == "*":
        return "each key"
    return partition_key or "any"


def _limit_set(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.limits.set(
            queue=args.queue, kind=args.kind, partition_key=args.partition_key, limit=args.limit
        )
    return _print_limit(args, status)


def _print_limit(args: argparse.Namespace, status: ConcurrencyLimitStatus) -> int:
    if args.json:
        from headgate._wire.limits import ConcurrencyLimitOut  # noqa: PLC0415

        print_json(ConcurrencyLimitOut.of(status))
    else:
        print(
            printable(
                f"limit {status.limit} on queue {status.queue or 'any'}, kind "
                f"{status.kind or 'any'}, partition {_partition(status.partition_key)} "
                f"({status.running} running)"
            )
        )
    return 0


def _limit_clear(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        cleared = hg.limits.clear(
            queue=args.queue, kind=args.kind, partition_key=args.partition_key
        )
    if not cleared:
        raise NotFound("no limit on that scope")
    print("limit removed")
    return 0


def _rates_list(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=True) as hg:
        rates = hg.rates.list()
    if args.json:
        from headgate._wire.limits import RateList, RateOut  # noqa: PLC0415

        print_json(RateList(rate_limits=[RateOut.of(rate) for rate in rates]))
        return 0
    print_table(
        ("RATE CLASS", "STARTED", "LIMIT", "WINDOW", "SET"),
        (
            (
                rate.rate_class,
                str(rate.started),
                str(rate.limit),
                f"{rate.per_ms} ms",
                iso(rate.set_at_ms),
            )
            for rate in rates
        ),
        empty="no rate limits",
    )
    return 0


def _rate_set(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        status = hg.rates.set(args.rate_class, limit=args.limit, per_ms=args.per_ms)
    return _print_rate(args, status)


def _print_rate(args: argparse.Namespace, status: RateStatus) -> int:
    if args.json:
        from headgate._wire.limits import RateOut  # noqa: PLC0415

        print_json(RateOut.of(status))
    else:
        print(
            printable(
                f"rate class {status.rate_class}: at most {status.limit} starts per "
                f"{status.per_ms} ms ({status.started} in the window now)"
            )
        )
    return 0


def _rate_clear(args: argparse.Namespace) -> int:
    with open_existing(args.db, read_only=False) as hg:
        cleared = hg.rates.clear(args.rate_class)
    if not cleared:
        raise NotFound(f"rate class {args.rate_class!r} has no limit")
    print("rate limit removed")
    return 0
