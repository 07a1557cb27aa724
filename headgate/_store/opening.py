"""Opening a store by its URL: `memory://` is the memory store, anything else SQL.

The one place a URL's scheme picks an implementation, so the composition
roots (`headgate._app`) name neither adapter's internals.
"""

from __future__ import annotations

from typing import Final

from headgate._clock import Clock
from headgate._errors import ValidationError
from headgate._store.memory import MemoryStore
from headgate._store.port import Store
from headgate._store.sql import store as sql

MEMORY_URL: Final = "memory://"


def open_store(url: str, clock: Clock) -> Store:
    """The store at `url`, made (and its schema brought up to date) if need be;
    `memory://` makes a new, empty memory store, this process's own."""
    if _names_memory(url):
        return MemoryStore(clock)
    return sql.open_store(url, clock)


def open_existing_store(url: str, clock: Clock, *, read_only: bool) -> Store:
    """The store at `url`, which must exist: for commands. A memory store never
    does for them (it lives in the process that made it): the SQL adapter's URL
    check refuses `memory://` in one line."""
    return sql.open_existing_store(url, clock, read_only=read_only)


def _names_memory(url: str) -> bool:
    if not url.startswith(MEMORY_URL[:-2]):
        return False
    if url != MEMORY_URL:
        raise ValidationError(
            "store URL", f"a memory store takes nothing after {MEMORY_URL}; use {MEMORY_URL}"
        )
    return True
