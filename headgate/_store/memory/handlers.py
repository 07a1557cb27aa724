"""Handler declarations in memory (operational state, as the SQL store's table)."""

from __future__ import annotations

from collections.abc import Callable, Collection

from headgate._clock import Clock
from headgate._errors import StoreClosed
from headgate._store.memory.state import MemoryState
from headgate._store.port import DeclaredHandler, HandlerDeclaration, HandlerDeclarations


class MemoryHandlerDeclarations(HandlerDeclarations):
    def __init__(self, state: MemoryState, clock: Clock, is_closed: Callable[[], bool]) -> None:
        self._state = state
        self._clock = clock
        self._is_closed = is_closed

    def declare(
        self, declared_by: str, host: str, declarations: Collection[HandlerDeclaration]
    ) -> list[DeclaredHandler]:
        chosen = {declaration.kind: declaration for declaration in declarations}
        with self._state.writing():
            if self._is_closed():
                raise StoreClosed("recording handler declarations: the store is closed")
            now = self._clock.now_ms()
            with self._state.reading():
                stored = self._state.handler_declarations
                written = [
                    DeclaredHandler(declaration, declared_by, host, now)
                    for kind, declaration in sorted(chosen.items())
                    if (row := stored.get((kind, declared_by))) is None
                    or row.declaration != declaration
                ]
                for row in written:
                    stored[row.declaration.kind, declared_by] = row
        return written

    def declared(self, kinds: Collection[str] | None = None) -> list[DeclaredHandler]:
        wanted = None if kinds is None else frozenset(kinds)
        with self._state.reading():
            rows = [
                row
                for (kind, _), row in self._state.handler_declarations.items()
                if wanted is None or kind in wanted
            ]
        return sorted(rows, key=lambda row: (row.declaration.kind, row.declared_by))
