"""The handler declarations, as enqueue reads them to route a kind it has no
handler for (`headgate._domain.routing`).

Enqueue asks often (every job a process without the handler enqueues), so the
declarations are read at most every `REFRESH_MS` of store time, all of them
at once (one row per kind and declarations group: a small table); the reads
an operator makes (`hg.runtime.declared_handlers`) read them fresh.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from headgate._clock import Clock
from headgate._domain.options import JobOptions
from headgate._domain.routing import Declared, declared_defaults
from headgate._errors import ValidationError
from headgate._logs import get_logger
from headgate._store.port import DeclaredHandler, HandlerDeclarations

REFRESH_MS: Final = 5_000
log = get_logger("headgate")

UndeclaredKinds = Literal["warn", "refuse", "allow"]
"""What an enqueue by kind does with a kind no handler declares (`Headgate`'s
`undeclared_kinds`)."""
UNDECLARED_RULES: Final = ("warn", "refuse", "allow")


def require_undeclared_rule(rule: object) -> UndeclaredKinds:
    if rule == "warn":
        return "warn"
    if rule == "refuse":
        return "refuse"
    if rule == "allow":
        return "allow"
    raise ValidationError("undeclared_kinds", f"must be 'warn', 'refuse' or 'allow', got {rule!r}")


class DeclaredRoutes:
    def __init__(self, declarations: HandlerDeclarations, clock: Clock) -> None:
        self._declarations = declarations
        self._clock = clock
        self._lock = threading.Lock()
        self._read: tuple[int, Mapping[str, Sequence[Declared]]] | None = None
        self._warned: set[str] = set()

    def defaults_for(self, kind: str, queue: str | None) -> JobOptions:
        """The defaults a job of `kind` naming `queue` (None: none) takes from its
        handler's declarations; ValidationError when they disagree on its queue."""
        return declared_defaults(kind, self._by_kind().get(kind, ()), queue)

    def check_declared(self, kind: str, *, refuse: bool) -> None:
        """A kind enqueued by name that no group declares, while some declare
        others (a misspelt kind, or a handler not deployed yet): a warning once
        per kind, or with `refuse` a ValidationError, naming the closest declared
        kind. Nothing while the store holds no declaration at all."""
        declared = self._by_kind()
        if not declared or kind in declared:
            return
        close = difflib.get_close_matches(kind, sorted(declared), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        if refuse:
            raise ValidationError(
                "kind",
                f"no handler declares {kind!r}{hint}; the store knows handlers of "
                f"{len(declared)} kinds (Headgate(undeclared_kinds='allow') enqueues it anyway)",
            )
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        log.warning(
            "job enqueued of a kind no handler declares",
            kind=kind,
            closest=close[0] if close else None,
        )

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
