"""The `headgate` command line."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from headgate.domain.spec import InvalidSpec, parse_spec

DEMO_SPECS = (
    "@every:30000",
    "0 9 * * *",
    "CRON_TZ=America/New_York 0 9 * * *",
    "CRON_TZ=Australia/Lord_Howe 15 2 * * *",
    "*/20 30 9 * * MON-FRI",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    result: int = handler(args)
    return result


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headgate", description=__doc__)
    commands = parser.add_subparsers(title="commands")
    ticks = commands.add_parser("ticks", help="print the next ticks of schedule specs")
    ticks.add_argument("specs", nargs="*", metavar="SPEC", help="specs (default: a few examples)")
    ticks.add_argument("--count", type=_positive_int, default=3, help="ticks per spec (default 3)")
    ticks.add_argument("--after-ms", type=int, default=None, help="start instant, epoch ms")
    ticks.set_defaults(handler=_print_ticks)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _print_ticks(args: argparse.Namespace) -> int:
    after = args.after_ms if args.after_ms is not None else time.time_ns() // 1_000_000
    status = 0
    for text in args.specs or DEMO_SPECS:
        try:
            spec = parse_spec(text)
        except InvalidSpec as error:
            print(f"error: {error}", file=sys.stderr)
            status = 1
            continue
        print(spec.text)
        zone = ZoneInfo(spec.zone_name)
        tick = after
        for _ in range(args.count):
            tick = spec.next_tick_ms(tick)
            moment = datetime.fromtimestamp(tick / 1000, UTC)
            local = moment.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
            print(f"  {tick}  {moment:%Y-%m-%d %H:%M:%S} UTC  ({local})")
    return status


if __name__ == "__main__":
    sys.exit(main())
