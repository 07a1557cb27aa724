"""State a forked child must not inherit as it is.

A child process gets a copy of every lock in whatever state some parent
thread held it at the fork (held forever, then: nobody in the child will
release it), and a copy of every open connection (shared with the parent's
socket or file). Objects that own such things register here and are told,
in each new child, to start afresh.

A store also makes the fork wait for any write in flight: SQLite keeps its
lock bookkeeping per process, so a child forked in the middle of a write
transaction would see that lock held forever, even on new connections.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Protocol


class ForkAware(Protocol):
    def after_fork_in_child(self) -> None:
        """Replace locks and forget connections and threads inherited from the parent."""


class Quiescent(Protocol):
    def before_fork(self) -> None:
        """Wait until nothing is half done, and hold it so until the fork is over."""

    def after_fork_in_parent(self) -> None:
        """Let work resume in the parent."""


_RENEWED: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_QUIESCED: weakref.WeakSet[Quiescent] = weakref.WeakSet()


def renew_in_forked_children(owner: ForkAware) -> None:
    _RENEWED.add(owner)


def quiesce_for_forks(owner: Quiescent) -> None:
    """`owner` is held still across every fork (it must also renew itself in children)."""
    _QUIESCED.add(owner)


def _before_fork() -> None:
    for owner in list(_QUIESCED):
        owner.before_fork()


def _after_fork_in_parent() -> None:
    for owner in list(_QUIESCED):
        owner.after_fork_in_parent()


def _after_fork_in_child() -> None:
    for owner in list(_RENEWED):
        owner.after_fork_in_child()


class WriterLock:
    """A store's one writer at a time, held still across a fork: a fork waits for
    the write in flight, so a child never copies half of one (a thread forking
    from inside its own write cannot wait for itself; its child copies that
    write's state as it stands). In the child the lock is a new one, free."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writer: int | None = None
        self._held_for_fork = False
        renew_in_forked_children(self)
        quiesce_for_forks(self)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The lock, held by this thread for the block."""
        with self._lock:
            self._writer = threading.get_ident()
            try:
                yield
            finally:
                self._writer = None

    def acquire(self, timeout_s: float) -> bool:
        """The lock within `timeout_s`, or False (the caller releases it)."""
        return self._lock.acquire(timeout=timeout_s)

    def release(self) -> None:
        self._lock.release()

    def before_fork(self) -> None:
        self._held_for_fork = self._writer != threading.get_ident()
        if self._held_for_fork:
            self._lock.acquire()

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._lock.release()

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._writer = None
        self._held_for_fork = False


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)
