"""Leases: operational state (not events) that make one process the scheduler.

A lease row carries a fencing term that increases on every takeover. A
holder renews only while it still holds its own term; once the lease has
expired anyone (the old holder included) may take it, and that takeover
bumps the term, so writes fenced with an older term are refused
(EventStore.write(fence=...) checks the term inside the write transaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select, update
from sqlalchemy.dialects import postgresql as pg_insert
from sqlalchemy.dialects import sqlite as sqlite_insert
from sqlalchemy.engine import Connection

from headgate._store.engine import is_postgresql, translated_errors
from headgate._store.event_store import EventStore
from headgate._store.schema import leases


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    host: str
    pid: int
    term: int
    acquired_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True)
class Claimant:
    """Who asks for a lease."""

    holder: str
    host: str
    pid: int


class LeaseStore:
    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._engine = store.engine
        self._clock = store.clock

    def acquire(
        self, name: str, claimant: Claimant, ttl_ms: int, current_term: int | None = None
    ) -> Lease | None:
        """Renew (if `current_term` is still ours and live) or take over an expired lease.

        Returns the lease when `claimant` holds it afterwards, else None.
        """
        with self._store.operational_write(f"claiming lease {name!r}") as connection:
            self._store.synchronise_clock(connection)
            now = self._clock.now_ms()
            row = self._locked_row(connection, name)
            if row is None:
                return self._create(connection, name, claimant, now, ttl_ms)
            renewing = (
                row.holder == claimant.holder
                and row.term == current_term
                and row.expires_at_ms > now
            )
            if renewing:
                return self._write(
                    connection,
                    row,
                    claimant,
                    term=row.term,
                    acquired_at_ms=row.acquired_at_ms,
                    expires_at_ms=now + ttl_ms,
                )
            if row.expires_at_ms <= now:
                return self._write(
                    connection,
                    row,
                    claimant,
                    term=row.term + 1,
                    acquired_at_ms=now,
                    expires_at_ms=now + ttl_ms,
                )
            return None

    def release(self, name: str, holder: str, term: int) -> None:
        """Expire our own lease now, so a standby can take over without waiting."""
        with self._store.operational_write(f"releasing lease {name!r}") as connection:
            connection.execute(
                update(leases)
                .where(leases.c.name == name, leases.c.holder == holder, leases.c.term == term)
                .values(expires_at_ms=self._clock.now_ms())
            )

    def status(self, name: str) -> Lease | None:
        with translated_errors(f"reading lease {name!r}"), self._engine.connect() as connection:
            row = connection.execute(select(leases).where(leases.c.name == name)).mappings().first()
        return None if row is None else Lease(**row)

    def _locked_row(self, connection: Connection, name: str) -> Lease | None:
        query = select(leases).where(leases.c.name == name)
        if is_postgresql(self._engine):
            query = query.with_for_update()
        row = connection.execute(query).mappings().first()
        return None if row is None else Lease(**row)

    def _create(
        self, connection: Connection, name: str, claimant: Claimant, now: int, ttl_ms: int
    ) -> Lease | None:
        lease = Lease(name, claimant.holder, claimant.host, claimant.pid, 1, now, now + ttl_ms)
        statement = _insert_if_absent(self._engine).values(**lease.__dict__)
        created = connection.execute(statement.returning(leases.c.name)).first()
        return lease if created is not None else None

    def _write(
        self,
        connection: Connection,
        row: Lease,
        claimant: Claimant,
        *,
        term: int,
        acquired_at_ms: int,
        expires_at_ms: int,
    ) -> Lease:
        lease = Lease(
            row.name,
            claimant.holder,
            claimant.host,
            claimant.pid,
            term,
            acquired_at_ms,
            expires_at_ms,
        )
        connection.execute(
            update(leases)
            .where(leases.c.name == row.name, leases.c.term == row.term)
            .values(
                holder=lease.holder,
                host=lease.host,
                pid=lease.pid,
                term=lease.term,
                acquired_at_ms=lease.acquired_at_ms,
                expires_at_ms=lease.expires_at_ms,
            )
        )
        return lease


def _insert_if_absent(engine: Engine) -> pg_insert.Insert | sqlite_insert.Insert:
    """INSERT ... ON CONFLICT DO NOTHING: two processes creating the row at once is no error."""
    if is_postgresql(engine):
        return pg_insert.insert(leases).on_conflict_do_nothing(index_elements=["name"])
    return sqlite_insert.insert(leases).on_conflict_do_nothing(index_elements=["name"])
