"""What start() records of the host's code in the store: the schedules it
declares (`periodic`), upserted with the operators' overrides kept, those its
group no longer declares reported (and paused, with `on_undeclared`); and its
handlers, with the defaults each gives a job, so that a process without them
routes their jobs as they would."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from headgate._commands import Put
from headgate._core import Core
from headgate._domain.options import ScheduleDefinition
from headgate._facade.schedules import put_all
from headgate._logs import get_logger

log = get_logger("headgate")


def declare_schedules(core: Core, declared: Mapping[str, ScheduleDefinition]) -> None:
    """Upsert the schedules this code declares (keeping operators' overrides),
    then report those of its group it no longer declares."""
    group = core.config.declarations_group
    put_all(core, [Put(schedule_id, d, declared_by=group) for schedule_id, d in declared.items()])
    pause = core.config.on_undeclared == "pause"
    for schedule_id in core.commands.undeclare(group, declared.keys(), pause):
        log.warning(
            "schedule no longer declared in code",
            schedule_id=schedule_id,
            declarations_group=group,
            paused=pause,
        )


def declare_handlers(core: Core) -> None:
    """Record this code's handlers in the store, with the defaults each gives a job."""
    group = core.config.declarations_group
    host = f"{socket.gethostname()}:{os.getpid()}"
    for row in core.store.handlers.declare(group, host, core.handlers.declarations()):
        log.info(
            "handler declared",
            kind=row.declaration.kind,
            queue=row.declaration.queue,
            declarations_group=group,
        )
