"""`headgate ticks`: the next ticks of schedule specs, in UTC and their own zone."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._logs import say
from headgate._worker_flags import int_in
from headgate.cli._common import EXIT_ERROR, Commands

DEMO_SPECS = (
    "@every:30000",
    "0 9 * * *",
    "CRON_TZ=America/New_York 0 9 * * *",
    "CRON_TZ=Australia/Lord_Howe 15 2 * * *",
    "*/20 30 9 * * MON-FRI",
)
MAX_TICKS = 1000


def add_commands(commands: Commands) -> None:
    """`headgate ticks`."""
    ticks = commands.add_parser("ticks", help="print the next ticks of schedule specs")
    ticks.add_argument("specs", nargs="*", metavar="SPEC", help="specs (default: a few examples)")
    ticks.add_argument(
        "--count", type=int_in(1, MAX_TICKS), default=3, help="ticks per spec (default 3)"
    )
    ticks.add_argument(
        "--after-ms", type=int_in(0, MAX_INSTANT_MS), default=None, help="start, epoch ms"
    )
    ticks.set_defaults(handler=_print_ticks)


def _print_ticks(args: argparse.Namespace) -> int:
    after = args.after_ms if args.after_ms is not None else time.time_ns() // 1_000_000
    status = 0
    for text in args.specs or DEMO_SPECS:
        try:
            spec = parse_spec(text)
        except InvalidSpec as error:
            say(f"error: {error}")
            status = EXIT_ERROR
            continue
        print(spec.text)
        zone = ZoneInfo(spec.zone_name)
        # Ticks off whole seconds (@every:1500) show their milliseconds, every one
        # of them so the column lines up; cron ticks and whole-second intervals have none.
        with_ms = spec.shortest_gap_ms % 1000 != 0
        tick = after
        for _ in range(args.count):
            try:
                tick = spec.next_tick_ms(tick)
            except InvalidSpec as error:
                say(f"error: {error}")
                status = EXIT_ERROR
                break
            fraction = f".{tick % 1000:03}" if with_ms else ""
            moment = datetime.fromtimestamp(tick // 1000, UTC)
            local = moment.astimezone(zone)
            print(
                f"  {tick}  {moment:%Y-%m-%d %H:%M:%S}{fraction} UTC  "
                f"({local:%Y-%m-%d %H:%M:%S}{fraction} {local:%Z})"
            )
    return status
