"""The memory store: the whole storage port in one process's memory, no SQL.

`Headgate("memory://")` opens one (`headgate._store.opening`). It serves
tests, a host's and Headgate's own: every contract test runs on it as on
SQLite and PostgreSQL. It is one process's own and nothing of it survives
that process (see `MemoryStore`).
"""

from headgate._store.memory.state import MemoryState
from headgate._store.memory.store import MemoryStore

__all__ = ["MemoryState", "MemoryStore"]
