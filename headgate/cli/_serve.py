"""`headgate serve`: the runtime, the control API and the console in one
process. The one command that imports `headgate.web`, when it starts it."""

from __future__ import annotations

import argparse
import ipaddress
import os

from headgate._app import Headgate
from headgate._errors import ValidationError
from headgate._logs import configure_logging, say
from headgate._redact import masked
from headgate._runtime.config import WorkerConfig
from headgate._serving import (
    MAX_CLIENT_TIMEOUT_S,
    MAX_CONNECTIONS,
    MIN_CLIENT_TIMEOUT_S,
    ClientLimits,
    address_of,
    addresses_answered,
    listening_sockets,
)
from headgate._worker_flags import int_in, seconds_in
from headgate.cli._common import EXIT_USAGE, Commands, add_app, add_db, load_app
from headgate.cli._settings import add_runtime_settings, runtime_config, runtime_flags_given
from headgate.cli._signals import StopSignals


def add_commands(commands: Commands) -> None:
    """`headgate serve`."""
    defaults = ClientLimits()

    parser = commands.add_parser(
        "serve", help="run the scheduler runtime, the control API and the console"
    )
    add_db(parser)
    add_app(parser)
    parser.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    parser.add_argument("--port", type=int_in(0, 65535), default=8080, help="listen port (8080)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="NAME",
        help="answer requests addressed to this host name too, besides the loopback ones "
        "(repeatable; '*' for any; default $HEADGATE_ALLOWED_HOSTS, comma-separated; bound "
        "to another address, that address too, or on 0.0.0.0 or :: this machine's name and "
        "its interfaces' addresses)",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        default=None,
        help="believe X-Forwarded-For, -Proto and -Host from these proxies only: IP addresses "
        "and networks, comma-separated, or '*' for any (default: from none)",
    )
    parser.add_argument(
        "--header-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.header_timeout_s,
        metavar="S",
        help="close a connection whose request headers are not complete in S seconds "
        f"({defaults.header_timeout_s:g})",
    )
    parser.add_argument(
        "--body-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.body_timeout_s,
        metavar="S",
        help="close a connection whose request body is not complete in S seconds after its "
        f"headers ({defaults.body_timeout_s:g})",
    )
    parser.add_argument(
        "--send-timeout",
        type=seconds_in(MIN_CLIENT_TIMEOUT_S, MAX_CLIENT_TIMEOUT_S),
        default=defaults.send_timeout_s,
        metavar="S",
        help="close a connection whose client leaves its response unread S seconds in all "
        f"({defaults.send_timeout_s:g})",
    )
    parser.add_argument(
        "--max-connections",
        type=int_in(1, MAX_CONNECTIONS),
        default=defaults.max_connections,
        metavar="N",
        help=f"past N open connections, answer 503 ({defaults.max_connections})",
    )
    parser.add_argument(
        "--no-workers",
        action="store_true",
        help="run no workers here, only the scheduler (with --app: its schedules and hooks), "
        "the API and the console: for deployments that run `headgate worker` apart",
    )
    add_runtime_settings(parser)
    parser.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
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
