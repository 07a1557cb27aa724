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
import ipaddress
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from headgate import ops
from headgate._app import Headgate
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._errors import HeadgateError, StoreUnopenable, ValidationError
from headgate._logs import configure_logging, say
from headgate._progress import Progress
from headgate._redact import masked
from headgate._runtime.config import WorkerConfig
from headgate._server_extra import ServerExtraMissing, is_server_module
from headgate._serving import (
    MAX_CLIENT_TIMEOUT_S,
    MAX_CONNECTIONS,
    MIN_CLIENT_TIMEOUT_S,
    ClientLimits,
    address_of,
    addresses_answered,
    listening_sockets,
)
from headgate._version import installed_version
from headgate._worker_flags import add_worker_flags, int_in, seconds_in, worker_config
from headgate.cli._output import printable, printable_json
from headgate.cli._schedules import (
    add_operator_commands,
    add_runtime_settings,
    runtime_config,
    runtime_flags_given,
)
from headgate.cli._signals import StopSignals
from headgate.ops import DEFAULT_BATCH, MAX_BATCH

DEFAULT_DB = "sqlite:///headgate.db"
DEMO_SPECS = (
    "@every:30000",
    "0 9 * * *",
    "CRON_TZ=America/New_York 0 9 * * *",
    "CRON_TZ=Australia/Lord_Howe 15 2 * * *",
    "*/20 30 9 * * MON-FRI",
)
MAX_TICKS = 1000
MAX_SHOWN = 10_000
MAX_POSITION = 2**63 - 1
"""Log positions are BIGINT."""
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and exit status 2 (an argument it
    quotes may be a store URL: masked)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {self.prog}: {masked(message)}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler  # every command has one
    try:
        if getattr(args, "json", False):  # checked before the command acts, not after
            importlib.import_module("headgate.web")
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
    if args.handler is _serve:
        return "headgate serve"
    if getattr(args, "json", False):
        return "--json (it prints the HTTP API's bodies)"
    return "this command"


def _print_error(error: Exception) -> None:
    """One line, whatever the message holds (a driver's may span several)."""
    text = " ".join(str(error).split()) or type(error).__name__
    say(f"error: {masked(text)}")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="headgate", description="Durable periodic jobs.")
    parser.add_argument("--version", action="version", version=f"headgate {installed_version()}")
    commands = parser.add_subparsers(title="commands", parser_class=_Parser, required=True)
    defaults = ClientLimits()

    serve = commands.add_parser(
        "serve", help="run the scheduler runtime, the control API and the console"
    )
    _add_db(serve)
    _add_app(serve)
    serve.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    serve.add_argument("--port", type=int_in(0, 65535), default=8080, help="listen port (8080)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="NAME",
        help="answer requests addressed to this host name too, besides the loopback ones "
        "(repeatable; '*' for any; default $HEADGATE_ALLOWED_HOSTS, comma-separated; bound "
        "to another address, that address too, or on 0.0.0.0 or :: this machine's name and "
        "its interfaces' addresses)",
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        default=None,
        help="believe X-Forwarded-For, -Proto and -Host from these proxies only: IP addresses "
        "and networks, comma-separated, or '*' for any (default: from none)",
    )
    serve.add_argument(
        "--header-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.header_timeout_s,
        metavar="S",
        help="close a connection whose request headers are not complete in S seconds "
        f"({defaults.header_timeout_s:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.body_timeout_s,
        metavar="S",
        help="close a connection whose request body is not complete in S seconds after its "
        f"headers ({defaults.body_timeout_s:g})",
    )
    serve.add_argument(
        "--send-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.send_timeout_s,
        metavar="S",
        help="close a connection whose client leaves its response unread S seconds in all "
        f"({defaults.send_timeout_s:g})",
    )
    serve.add_argument(
        "--max-connections",
        type=int_in(1, MAX_CONNECTIONS),
        default=defaults.max_connections,
        metavar="N",
        help=f"past N open connections, answer 503 ({defaults.max_connections})",
    )
    serve.add_argument(
        "--no-workers",
        action="store_true",
        help="run no workers here, only the scheduler (with --app: its schedules and hooks), "
        "the API and the console: for deployments that run `headgate worker` apart",
    )
    add_runtime_settings(serve, int_in)
    serve.set_defaults(handler=_serve)

    _add_runners(commands)

    ticks = commands.add_parser("ticks", help="print the next ticks of schedule specs")
    ticks.add_argument("specs", nargs="*", metavar="SPEC", help="specs (default: a few examples)")
    ticks.add_argument(
        "--count", type=int_in(1, MAX_TICKS), default=3, help="ticks per spec (default 3)"
    )
    ticks.add_argument(
        "--after-ms", type=int_in(0, MAX_INSTANT_MS), default=None, help="start, epoch ms"
    )
    ticks.set_defaults(handler=_print_ticks)

    projections = commands.add_parser("projections", help="projection maintenance")
    projection_commands = projections.add_subparsers(
        title="commands", parser_class=_Parser, required=True
    )
    rebuild_parser = projection_commands.add_parser(
        "rebuild", help="rebuild projections from the event log (resumable)"
    )
    _add_db(rebuild_parser)
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

    events = commands.add_parser("events", help="inspect and replay the event log")
    event_commands = events.add_subparsers(title="commands", parser_class=_Parser, required=True)
    replay_parser = event_commands.add_parser(
        "replay", help="replay the log into fresh projections (another database or scratch tables)"
    )
    _add_db(replay_parser)
    replay_parser.add_argument("--to", metavar="URL", help="a fresh database to replay into")
    replay_parser.add_argument("--until", type=int_in(0, MAX_POSITION), metavar="POSITION")
    replay_parser.add_argument("--batch-size", type=int_in(1, MAX_BATCH), default=DEFAULT_BATCH)
    replay_parser.set_defaults(handler=_replay)
    show = event_commands.add_parser("show", help="print events")
    _add_db(show)
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
    add_operator_commands(commands, _add_db, int_in)
    return parser


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("HEADGATE_DB", DEFAULT_DB),
        metavar="URL",
        help=f"store URL (default $HEADGATE_DB or {DEFAULT_DB})",
    )


def _add_app(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
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


def _serve(args: argparse.Namespace) -> int:
    """Runtime + API + console in one process; SIGTERM/Ctrl-C stop it cleanly (exit 0).
    The address is bound first: a port in use fails in one line before anything
    starts, and "serving ... on" is printed once the server accepts connections."""
    # The web stack is imported here, not at the top: other commands start without it.
    from headgate import _http_server  # noqa: PLC0415
    from headgate.web import create_app  # noqa: PLC0415
    from headgate.web._forwarded import trusted_proxies_from  # noqa: PLC0415
    from headgate.web._headers import answer_headers  # noqa: PLC0415
    from headgate.web._hosts import (  # noqa: PLC0415
        LOOPBACK_HOSTS,
        allowed_hosts_from,
        answered_names,
        named_hosts,
    )

    given = runtime_flags_given(args)
    if args.app and given:
        setting = given[0].removeprefix("--").replace("-", "_")
        raise ValidationError(
            given[0], f"--app names its own Headgate: set RuntimeConfig.{setting}"
        )
    sockets = listening_sockets(args.host, args.port)
    try:
        # The Host check cannot know the names clients use: it takes the bound
        # address (a wildcard's: this machine's), whatever else is named, and
        # refuses the rest, which stops DNS rebinding.
        allowed_hosts = [*addresses_answered(args.host, sockets), *named_hosts(args.allowed_hosts)]
        try:
            allowed_hosts_from(allowed_hosts)  # checked before the store is opened
        except ValueError as error:
            reason = str(error).removeprefix("allowed_hosts: ")
            say(f"error: headgate serve: --allowed-host (or $HEADGATE_ALLOWED_HOSTS): {reason}")
            return EXIT_USAGE
        try:
            trusted_proxies_from(args.forwarded_allow_ips)
        except ValueError as error:
            reason = str(error).removeprefix("forwarded_allow_ips: ")
            say(f"error: headgate serve: --forwarded-allow-ips: {reason}")
            return EXIT_USAGE
        _warn_if_open_to_others(args.host)
        answered = answered_names(allowed_hosts)
        if answered is None or len(answered) > len(LOOPBACK_HOSTS):
            _say_which_hosts_are_answered(answered)
        configure_logging()
        hg = load_app(args.app) if args.app else Headgate(args.db, config=runtime_config(args))
        app = create_app(
            hg, allowed_hosts=allowed_hosts, forwarded_allow_ips=args.forwarded_allow_ips
        )
        store = f"the store of {args.app}" if args.app else masked(args.db)
        address = address_of(args.host, sockets)
        limits = ClientLimits(
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            send_timeout_s=args.send_timeout,
            max_connections=args.max_connections,
        )
        with hg:  # close() stops the runtime and releases the lease
            # A stop asked for while the runtime starts is kept for after it: then
            # nothing is served. uvicorn shuts down gracefully on SIGTERM/SIGINT and
            # re-raises the signal through the handlers it found, these: the process
            # carries on to exit with status 0, as a clean stop is not a failure.
            stop = StopSignals(hg, None if args.no_workers else WorkerConfig().shutdown_timeout_s)
            stop.install()
            hg.start(workers=False if args.no_workers else None)
            if not stop.asked.is_set():
                serving = f"headgate: serving {store} on {address}"
                _http_server.serve(
                    app,
                    sockets,
                    limits,
                    lambda: say(serving),
                    headers=answer_headers(),
                )
    finally:
        for sock in sockets:
            sock.close()
    say("headgate: stopped; scheduler lease released")
    return 0


def _warn_if_open_to_others(bind: str) -> None:
    """Bound beyond loopback without a token, anyone who can reach it has control."""
    if not _is_loopback(bind) and not os.environ.get("HEADGATE_API_TOKEN"):
        say(
            f"headgate: warning: listening on {bind} with no HEADGATE_API_TOKEN: anyone who "
            "can reach this address can read and change its schedules and jobs; set "
            "HEADGATE_API_TOKEN to require a token"
        )


def _say_which_hosts_are_answered(names: list[str] | None) -> None:
    """One line naming exactly the host names requests are answered for (None: any)."""
    if names is None:
        say("headgate: answering requests addressed to any host name ('*')")
        return
    say(
        f"headgate: answering requests addressed to {', '.join(names)}; "
        "name others with --allowed-host NAME"
    )


def _is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _worker(args: argparse.Namespace) -> int:
    """Workers only, until SIGTERM or Ctrl-C: then running jobs get the shutdown
    timeout to finish, the rest are given back, and the process exits 0."""
    configure_logging()
    hg = load_app(args.app)
    config = worker_config(args)
    return _run_until_stopped(
        hg,
        config.shutdown_timeout_s,
        lambda: hg.start(config, scheduler=False),
        f"headgate: worker running the handlers of {args.app}",
        "headgate: worker stopped",
    )


def _add_runners(commands: argparse._SubParsersAction[_Parser]) -> None:
    """`worker` and `scheduler`: an app's handlers, or its schedules, apart."""
    worker = commands.add_parser(
        "worker", help="run the workers of an app's handlers (no scheduler, no web server)"
    )
    _add_app(worker, required=True)
    add_worker_flags(worker)
    worker.set_defaults(handler=_worker)
    scheduler = commands.add_parser(
        "scheduler",
        help="run the scheduler of an app's schedules (no workers, no web server)",
        description="Fire the ticks of the app's schedules, if this process wins the "
        "scheduler lease (any number may run: one fires, the others wait to take over), "
        "until SIGTERM or Ctrl-C. For deployments that run workers and the scheduler apart.",
    )
    _add_app(scheduler, required=True)
    scheduler.set_defaults(handler=_scheduler)


def _scheduler(args: argparse.Namespace) -> int:
    """The scheduler only, until SIGTERM or Ctrl-C: the app's declared schedules
    are upserted, its hooks run, and the lease is released at the stop."""
    configure_logging()
    hg = load_app(args.app)
    return _run_until_stopped(
        hg,
        None,
        lambda: hg.start(workers=False),
        f"headgate: scheduler of {args.app} running (it fires ticks while it holds the lease)",
        "headgate: scheduler stopped; lease released",
    )


def _run_until_stopped(
    hg: Headgate, grace_s: float | None, start: Callable[[], object], running: str, stopped: str
) -> int:
    """Start `hg`, say `running`, wait for SIGTERM or Ctrl-C (`StopSignals`), close
    it and say `stopped`; exit status 0, as a clean stop is not a failure."""
    stop = StopSignals(hg, grace_s)
    stop.install()
    start()
    say(running)
    try:
        stop.asked.wait()
    finally:
        hg.close()
    say(stopped)
    return 0


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
