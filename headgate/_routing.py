"""The handler declarations, as enqueue reads them to route a kind it has no
handler for (`headgate._domain.routing`).

Enqueue asks often (every job a process without the handler enqueues), so the
declarations are read at most every `REFRESH_MS` of store time, all of them
at once (one row per kind and declarations group: a small table); the reads
an operator makes (`Headgate.declared_handlers`) read them fresh.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Final

from headgate._clock import Clock
from headgate._domain.options import JobOptions
from headgate._domain.routing import Declared, declared_defaults
from headgate._store.port import DeclaredHandler, HandlerDeclarations

REFRESH_MS: Final = 5_000


class DeclaredRoutes:
    def __init__(self, declarations: HandlerDeclarations, clock: Clock) -> None:
        self._declarations = declarations
        self._clock = clock
        self._lock = threading.Lock()
        self._read: tuple[int, Mapping[str, Sequence[Declared]]] | None = None

    def defaults_for(self, kind: str, queue: str | None) -> JobOptions:
        """The defaults a job of `kind` naming `queue` (None: none) takes from its
        handler's declarations; ValidationError when they disagree on its queue."""
        return declared_defaults(kind, self._by_kind().get(kind, ()), queue)

    def _by_kind(self) -> Mapping[str, Sequence[Declared]]:
        now = self._clock.now_ms()
        with self._lock:
            read = self._read
        if read is not None and now - read[0] < REFRESH_MS:
            return read[1]
        by_kind: dict[str, list[Declared]] = {}
        for row in self._declarations.declared():
            by_kind.setdefault(row.declaration.kind, []).append(as_declared(row))
        with self._lock:
            self._read = (now, by_kind)
        return by_kind


def as_declared(row: DeclaredHandler) -> Declared:
    declaration = row.declaration
    defaults = JobOptions.restored(
        queue=declaration.queue,
        priority=declaration.priority,
        start_within_ms=declaration.start_within_ms,
        partition_key=declaration.partition_key,
        rate_class=declaration.rate_class,
    )
    return Declared(row.declared_by, defaults, row.declared_at_ms)
