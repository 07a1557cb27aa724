"""A backend's upkeep: checkpoints of its write-ahead log, space reclaimed after
compaction, and what schema upgrades need."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from sqlalchemy import Engine, Table
from sqlalchemy.engine import Connection


class Maintenance(ABC):
    """Checkpoints, vacuum, and the migrations' renames and lock."""

    renames_constraints: bool
    """ALTER can rename a table's indexes and constraints (else a table must be
    made anew to change their names)."""

    @abstractmethod
    def begin_write(self, connection: Connection, *, held: bool) -> None:
        """Settings for one write transaction; `held` commits at an instant (and must
        not pay for a checkpoint inside its commit)."""

    @abstractmethod
    def checkpoint(self, engine: Engine) -> None:
        """Fold a write-ahead log into the database without blocking anyone."""

    @abstractmethod
    def reclaim_space(self, engine: Engine, tables: Sequence[Table]) -> None:
        """Make the space of deleted and updated rows reusable now (after compaction)."""

    @abstractmethod
    def rename_tables(
        self,
        connection: Connection,
        tables: Mapping[str, str],
        indexes: Mapping[str, str],
        checks: Mapping[str, tuple[str, str]],
    ) -> None:
        """Rename tables (with their primary keys), indexes (unique constraints
        included) and check constraints (old name -> (table's new name, new name))
        in place; only where `renames_constraints`."""

    @abstractmethod
    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent schema upgrades beyond what the write transaction does."""
