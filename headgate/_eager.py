"""Eager mode: each job enqueued runs at once, in the caller, before enqueue returns.

For tests and scripts (Celery's `task_always_eager`, RQ's `is_async=False`):
`Headgate("memory://", eager=True)`, or `headgate.testing.eager(hg)` for a
block. The job is written as any job is, then run by `drain()`'s machinery
(the same attempt runner, deadlines, result and attempt records), so what a
test reads afterwards (`hg.jobs.get`, `JobHandle.wait`) is what a worker would
have left. A failed attempt is retried at once, up to the job's attempts
(the retry policy's exceptions kept, its waits left out): a test does not
wait out a backoff. What is due on the job's queue runs with it (a job an
eager handler enqueues included, inside its caller's attempt); a job due
later (`run_at_ms`), snoozed, or of a kind with no handler registered here
stays pending, as does one enqueued in the host's transaction (`connection=`),
which does not exist until the host commits.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Final

from headgate._clock import Clock
from headgate._domain.job_rules import Redactor
from headgate._domain.retry import Retry
from headgate._runtime.attempt_log import RunSettled
from headgate._runtime.draining import drain
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec
from headgate._runtime.recorder import Recorder
from headgate._store.port import Store

EAGER_TIMEOUT_S: Final = 3600.0
"""The longest one enqueue runs jobs (each attempt is held to its own timeout)."""


def at_once(retry: Retry) -> Retry:
    """`retry` with its waits left out: the same exceptions retried, at once."""
    return Retry(on=retry.on, fail_on=retry.fail_on, intervals_s=(0,), jitter=False)


class EagerRunner:
    """Runs what is due on a queue now, for one Headgate's eager enqueues."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        handlers: HandlerRegistry,
        *,
        recorder: Recorder,
        redact: Redactor,
        settled: RunSettled,
    ) -> None:
        self._store = store
        self._clock = clock
        self._handlers = handlers
        self._recorder = recorder
        self._redact = redact
        self._settled = settled
        self._lock = threading.Lock()
        self._made: tuple[frozenset[str], HandlerRegistry] | None = None

    def run(self, queues: Sequence[str], kinds: Callable[[], frozenset[str]]) -> None:
        """Run every due job of the registered kinds on `queues`, retries included."""
        registry = self._registry(kinds())
        if not registry:
            return
        drain(
            self._store,
            self._clock,
            registry,
            list(queues),
            EAGER_TIMEOUT_S,
            recorder=self._recorder,
            redact=self._redact,
            settled=self._settled,
        )

    def _registry(self, kinds: frozenset[str]) -> HandlerRegistry:
        """The registered handlers with their retries at once (made again when a
        handler is registered after the first eager enqueue)."""
        with self._lock:
            made = self._made
            if made is not None and made[0] == kinds:
                return made[1]
            registry = HandlerRegistry()
            for kind in sorted(kinds):
                spec = self._handlers.get(kind)
                if spec is not None:
                    registry.add(_eager(spec))
            self._made = (kinds, registry)
            return registry


def _eager(spec: HandlerSpec) -> HandlerSpec:
    return dataclasses.replace(spec, retry=at_once(spec.retry))
