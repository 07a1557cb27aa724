"""`hg.queues`: queues paused, resumed and listed with their depth."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING

from headgate._deprecated import warn_moved
from headgate._domain.admission import MAX_QUEUE_LENGTH
from headgate._domain.events import JobState
from headgate._domain.names import identifier_problem, require
from headgate._facade.twins import Namespace, twin
from headgate._model import QueueStatus
from headgate._projections import PausedQueueRow

if TYPE_CHECKING:
    from headgate._core import Core


class Queues(Namespace):
    """A Headgate's queues: `hg.queues.pause("mail", note="provider down")`."""

    name = "queues"

    def pause(self, queue: str, note: str = "") -> QueueStatus:
        """Stop every process claiming jobs from `queue` until `resume`: its running
        jobs finish, enqueues are still taken, and its jobs wait. Pausing a paused
        queue keeps it paused (with this note)."""
        self._core.commands.pause_queue(queue, note)
        return queue_status(self._core, queue)

    def resume(self, queue: str) -> QueueStatus:
        """Let workers claim from `queue` again (every process serving it is woken)."""
        self._core.commands.resume_queue(queue)
        self._core.poke_workers(due_now=True)
        return queue_status(self._core, queue)

    def list(self) -> builtins.list[QueueStatus]:
        """Every queue that has jobs, is paused, or has a handler here, by name."""
        paused = self._core.reads.paused_queues()
        counts = self._core.reads.job_counts()
        names = {queue for queue, _ in counts} | set(paused) | set(self._core.handlers.by_queue())
        return [_status(name, paused, counts) for name in sorted(names)]

    def __call__(self) -> builtins.list[QueueStatus]:
        """`hg.queues()`, deprecated: `hg.queues.list()`."""
        warn_moved("queues()", "hg.queues.list()")
        return self.list()

    apause = twin(pause)
    aresume = twin(resume)
    alist = twin(list, reads=True)


def queue_status(core: Core, queue: str) -> QueueStatus:
    """One queue's status (a queue nobody used yet: not paused, no jobs)."""
    require("queue", identifier_problem(queue, MAX_QUEUE_LENGTH))
    return _status(queue, core.reads.paused_queues(), core.reads.job_counts())


def _status(
    name: str, paused: Mapping[str, PausedQueueRow], counts: Mapping[tuple[str, str], int]
) -> QueueStatus:
    row = paused.get(name)
    return QueueStatus(
        name,
        row is not None,
        counts.get((name, JobState.PENDING.value), 0),
        counts.get((name, JobState.RUNNING.value), 0),
        None if row is None else row.paused_at_ms,
        "" if row is None else row.note,
    )
