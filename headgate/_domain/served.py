"""Which work the live workers can run, from their heartbeats.

A worker serves each (queue, kind) of its queues and its handlers' kinds: it
claims every kind it has a handler for from every queue it serves. A row an
earlier build wrote names no kinds: it is taken to serve every kind of its
queues (not knowing, never flag work it might run). A pending job whose
(queue, kind) no live worker serves waits until one starts: that is what the
console, the metrics and a warning at enqueue point at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ServedBy:
    """One live worker's queues and kinds (None: an earlier build's, unknown)."""

    queues: frozenset[str]
    kinds: frozenset[str] | None


@dataclass(frozen=True)
class Serving:
    """What the live workers serve, together."""

    workers: tuple[ServedBy, ...] = ()

    @classmethod
    def of(cls, workers: Iterable[tuple[Iterable[str], Iterable[str] | None]]) -> Serving:
        return cls(
            tuple(
                ServedBy(frozenset(queues), None if kinds is None else frozenset(kinds))
                for queues, kinds in workers
            )
        )

    def serves(self, queue: str, kind: str) -> bool:
        return any(
            queue in worker.queues and (worker.kinds is None or kind in worker.kinds)
            for worker in self.workers
        )

    def queues_of(self, kind: str) -> frozenset[str]:
        """The queues on which live workers that name their kinds run `kind`."""
        return frozenset(
            queue
            for worker in self.workers
            if worker.kinds is not None and kind in worker.kinds
            for queue in worker.queues
        )

    def unserved(self, pending: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        """Of pending jobs by (queue, kind), those no live worker serves."""
        return {
            (queue, kind): count
            for (queue, kind), count in sorted(pending.items())
            if count and not self.serves(queue, kind)
        }

    def reason(self, queue: str, kind: str) -> str | None:
        """Why a pending job of this (queue, kind) waits, when no live worker serves
        it (None when one does)."""
        if self.serves(queue, kind):
            return None
        if not self.workers:
            return "no worker is running"
        elsewhere = sorted(self.queues_of(kind) - {queue})
        if elsewhere:
            return (
                f"no live worker runs kind {kind} on queue {queue} "
                f"(workers run it on {', '.join(elsewhere)})"
            )
        return f"no live worker runs kind {kind} on queue {queue}"
