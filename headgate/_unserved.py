"""The live workers' serving, as enqueue's warning and the reads of waiting work
need it (it never routes a job: `headgate._routing` does, by declaration).

Enqueue asks often (whether a job it wrote has a live worker to run it), so
the workers' rows are read at most every `REFRESH_MS` of store time; the reads
an operator makes (`hg.runtime.unserved`, `hg.jobs.waiting_for`) read them fresh.
"""

from __future__ import annotations

import threading
from typing import Final

from headgate._clock import Clock
from headgate._domain.served import Serving
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
