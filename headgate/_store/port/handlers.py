"""Handler declarations: the job kinds each group's code has handlers for, and
the defaults those handlers give a job when it is enqueued.

A process that enqueues a kind it has no handler for still needs the queue,
priority and the rest its handler would choose (`CHOSEN_AT_ENQUEUE`); the
workers that have the handler may all be stopped at that moment. So each
runtime with handlers records them when it starts, as schedules declared in
code are recorded, and enqueue routes by what the store keeps, never by which
workers happen to be alive (`headgate._domain.routing`). Operational state (no
events): one row per (kind, declarations group), the group's newest start's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class HandlerDeclaration:
    """What a registered handler gives its jobs at enqueue: its kind's defaults."""

    kind: str
    queue: str
    priority: int
    start_within_ms: int | None = None
    partition_key: str | None = None
    rate_class: str | None = None


@dataclass(frozen=True)
class DeclaredHandler:
    declaration: HandlerDeclaration
    declared_by: str
    """The declarations group of the code that registered it (`RuntimeConfig`)."""
    host: str
    """The process that recorded this declaration (host:pid)."""
    declared_at_ms: int
    """When it was first recorded as it is (store time): a start that declares it
    unchanged keeps this."""


class HandlerDeclarations(ABC):
    @abstractmethod
    def declare(
        self, declared_by: str, host: str, declarations: Collection[HandlerDeclaration]
    ) -> list[DeclaredHandler]:
        """Record that group `declared_by`'s code has these handlers, as `host`
        started it; committed when this returns. Each replaces the group's
        previous declaration of its kind when it differs (stamped with `host`
        and store time now); one unchanged keeps its row as it was. Kinds of the
        group not among them are kept (a group's processes may each register
        some of its handlers). Returns the rows written now (the changed ones),
        by kind."""

    @abstractmethod
    def declared(self, kinds: Collection[str] | None = None) -> list[DeclaredHandler]:
        """The declarations of these kinds (None: of every kind), every group's,
        by kind then group, read from committed state."""
