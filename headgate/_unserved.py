"""The live workers' serving, as enqueue and the reads of waiting work need it.

Enqueue asks often (every job a process without the handler enqueues picks its
queue from it), so the workers' rows are read at most every `REFRESH_MS` of
store time; the reads an operator makes (`Headgate.unserved`, `waiting_for`)
read them fresh.
"""

from __future__ import annotations

import threading
from typing import Final

from headgate._clock import Clock
from headgate._domain.options import DEFAULT_QUEUE
from headgate._domain.served import Serving
from headgate._errors import ValidationError
from headgate._logs import get_logger
from headgate._store.port import Workers

REFRESH_MS: Final = 5_000
log = get_logger("headgate")


class ServingWatch:
    def __init__(self, workers: Workers, clock: Clock) -> None:
        self._workers = workers
        self._clock = clock
        self._lock = threading.Lock()
        self._read: tuple[int, Serving] | None = None
        self._warned: set[tuple[str, str]] = set()

    def current(self, *, fresh: bool = False) -> Serving:
        now = self._clock.now_ms()
        with self._lock:
            read = self._read
        if not fresh and read is not None and now - read[0] < REFRESH_MS:
            return read[1]
        serving = Serving.of((row.queues, row.kinds) for row in self._workers.live(now))
        with self._lock:
            self._read = (now, serving)
        return serving

    def queue_for(self, kind: str) -> str:
        """The queue for a job of `kind` enqueued where no handler of it is
        registered: the one queue live workers run it on, else the default;
        ValidationError when they run it on several (the job must name one)."""
        queues = sorted(self.current().queues_of(kind))
        if len(queues) > 1:
            raise ValidationError(
                "queue",
                f"workers run kind {kind} on queues {', '.join(queues)}: name the queue "
                "(no handler of it is registered in this process to choose for it)",
            )
        return queues[0] if queues else DEFAULT_QUEUE

    def warn_if_unserved(self, queue: str, kind: str, job_id: str) -> None:
        """Log, once per (queue, kind) in this process, a job no live worker can run."""
        if (queue, kind) in self._warned:
            return
        reason = self.current().reason(queue, kind)
        if reason is None:
            return
        with self._lock:
            if (queue, kind) in self._warned:
                return
            self._warned.add((queue, kind))
        log.warning(
            "job enqueued that no live worker serves",
            queue=queue,
            kind=kind,
            job_id=job_id,
            reason=reason,
        )
