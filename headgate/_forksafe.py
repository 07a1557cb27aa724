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

import os
import weakref
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


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)
