"""`headgate worker` and `headgate scheduler`: an app's handlers, or its
schedules, in a process of their own, until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from headgate._app import Headgate
from headgate._logs import configure_logging, say
from headgate._worker_flags import add_worker_flags, worker_config
from headgate.cli._common import Commands, add_app, load_app
from headgate.cli._signals import StopSignals


def add_commands(commands: Commands) -> None:
    """`worker` and `scheduler`: an app's handlers, or its schedules, apart."""
    worker = commands.add_parser(
        "worker", help="run the workers of an app's handlers (no scheduler, no web server)"
    )
    add_app(worker, required=True)
    add_worker_flags(worker)
    worker.set_defaults(handler=_worker)
    scheduler = commands.add_parser(
        "scheduler",
        help="run the scheduler of an app's schedules (no workers, no web server)",
        description="Fire the ticks of the app's schedules, if this process wins the "
        "scheduler lease (any number may run: one fires, the others wait to take over), "
        "until SIGTERM or Ctrl-C. For deployments that run workers and the scheduler apart.",
    )
    add_app(scheduler, required=True)
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
