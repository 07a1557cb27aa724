"""The one place Headgate reaches into structlog's internals.

structlog's PrintLogger and WriteLogger serialise writes to each file with a
lock of their own, kept in `structlog._output.WRITE_LOCKS`. A parent thread
logging at the moment of a fork leaves that lock held in the child, whose
first log line would then wait forever: nobody in the child holds it, so the
child releases it. `tests/test_dependency_internals.py` fails loudly if a
structlog upgrade moves or renames it; until then, a missing table here
means there is nothing to release.
"""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from typing import Final

from structlog import _output

from headgate._forksafe import renew_in_forked_children

__all__ = ["release_write_locks_held_at_fork"]

WRITE_LOCKS_ATTRIBUTE: Final = "WRITE_LOCKS"


def write_locks() -> MutableMapping[object, threading.Lock]:
    """The locks, by file (a weak mapping in structlog today)."""
    locks: MutableMapping[object, threading.Lock] = getattr(_output, WRITE_LOCKS_ATTRIBUTE, {})
    return locks


class _WriteLocksAtFork:
    """Registered with `_forksafe` (held strongly here: it keeps weak references)."""

    def after_fork_in_child(self) -> None:
        release_write_locks_held_at_fork()


def release_write_locks_held_at_fork() -> None:
    """In a forked child: free the write locks a parent thread held at the fork."""
    for lock in list(write_locks().values()):
        if lock.locked():
            lock.release()


_AT_FORK: Final = _WriteLocksAtFork()
renew_in_forked_children(_AT_FORK)
