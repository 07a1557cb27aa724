"""`headgate projections rebuild`, `events replay` and `events show`: the event
log and the projections folded from it, maintained through `headgate.ops`
(resumable, with a progress bar a phase)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from headgate import ops
from headgate._progress import Progress
from headgate._worker_flags import int_in
from headgate.cli._common import EXIT_ERROR, Commands, add_db, noun
from headgate.cli._output import printable, printable_json
from headgate.ops import DEFAULT_BATCH, MAX_BATCH

MAX_SHOWN = 10_000
MAX_POSITION = 2**63 - 1
"""Log positions are BIGINT."""


def add_commands(commands: Commands) -> None:
    """`headgate projections` and `headgate events`."""
    projection_commands = noun(commands, "projections", "projection maintenance")
    rebuild_parser = projection_commands.add_parser(
        "rebuild", help="rebuild projections from the event log (resumable)"
    )
    add_db(rebuild_parser)
    rebuild_parser.add_argument(
        "--projection", action="append", metavar="NAME", help="only this projection (repeatable)"
    )
    rebuild_parser.add_argument(
        "--verify",
        action="store_true",
        help="rebuild into scratch tables and report rows that differ from the live ones",
    )
    rebuild_parser.add_argument("--batch-size", type=int_in(1, MAX_BATCH), default=DEFAULT_BATCH)
    rebuild_parser.set_defaults(handler=_rebuild)

    event_commands = noun(commands, "events", "inspect and replay the event log")
    replay_parser = event_commands.add_parser(
        "replay", help="replay the log into fresh projections (another database or scratch tables)"
    )
    add_db(replay_parser)
    replay_parser.add_argument("--to", metavar="URL", help="a fresh database to replay into")
    replay_parser.add_argument("--until", type=int_in(0, MAX_POSITION), metavar="POSITION")
    replay_parser.add_argument("--batch-size", type=int_in(1, MAX_BATCH), default=DEFAULT_BATCH)
    replay_parser.set_defaults(handler=_replay)
    show = event_commands.add_parser("show", help="print events")
    add_db(show)
    show.add_argument(
        "--stream",
        metavar="ID",
        help="only this stream: a stream id (schedule-nightly), or a schedule's or job's id",
    )
    show.add_argument(
        "--limit", type=int_in(1, MAX_SHOWN), default=50, help="at most N events (50)"
    )
    show.add_argument("--after", type=int_in(0, MAX_POSITION), default=0, metavar="POSITION")
    show.set_defaults(handler=_show)


class _ProgressPrinter:
    """Adapts maintenance progress callbacks to one Progress bar per phase."""

    def __init__(self) -> None:
        self._bars: dict[str, Progress] = {}

    def __call__(self, phase: str, reached: int, target: int) -> None:
        bar = self._bars.get(phase)
        if bar is None:
            bar = self._bars[phase] = Progress(phase, target)
        bar.update(reached)

    def finish(self) -> None:
        for bar in self._bars.values():
            bar.finish()


def _rebuild(args: argparse.Namespace) -> int:
    progress = _ProgressPrinter()
    if args.verify:
        report = ops.verify(
            args.db, args.projection, batch_size=args.batch_size, on_progress=progress
        )
        progress.finish()
        for name in report.lagging:
            print(f"{name}: live projection is behind the log (a rebuild is in progress)")
        for difference in report.differences:
            print(
                f"{difference.projection} {difference.key!r}: "
                f"live={difference.live} rebuilt={difference.rebuilt}"
            )
        verdict = "identical" if report.ok else f"{report.difference_count} rows differ"
        print(f"verified up to position {report.head}: {verdict}")
        return 0 if report.ok else EXIT_ERROR
    rebuilt = ops.rebuild(
        args.db, args.projection, batch_size=args.batch_size, on_progress=progress
    )
    progress.finish()
    for name in rebuilt.resumed:
        print(f"{name}: resumed an interrupted rebuild")
    for name, count in sorted(rebuilt.applied.items()):
        print(f"{name}: applied {count:,} events")
    print(f"projections rebuilt up to position {rebuilt.head}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    progress = _ProgressPrinter()
    report = ops.replay(
        args.db, args.to, until=args.until, batch_size=args.batch_size, on_progress=progress
    )
    progress.finish()
    print(f"replayed events up to position {report.until} into {report.target}")
    for type_name, count in sorted(report.applied.items()):
        print(f"  {type_name}: {count:,}")
    for table, rows in report.rows.items():
        print(f"  table {table}: {rows:,} rows")
    return 0


def _show(args: argparse.Namespace) -> int:
    logged = ops.read_events(args.db, after=args.after, limit=args.limit, stream=args.stream)
    for entry in logged:
        moment = datetime.fromtimestamp(entry.recorded_at_ms / 1000, UTC)
        # What a caller stored reaches the terminal escaped (C1 controls and
        # bidi overrides pass through JSON as they are): the body as JSON's escapes.
        print(
            f"{entry.position:>8}  {moment.isoformat(timespec='milliseconds')}  "
            f"{printable(entry.stream_id)} v{entry.version}  "
            f"{printable(entry.type)}/v{entry.schema_version}"
        )
        print(f"          {printable_json(entry.body)}")
    if not logged:
        print("no events")
    return 0
