"""Leases on SQL: one row per lease, its term bumped on every takeover (see `Leases`)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from headgate._store.port import Lease, LeaseHolder, Leases
from headgate._store.sql.database import Database
from headgate._store.sql.schema import leases


class SqlLeases(Leases):
    def __init__(self, database: Database) -> None:
        self._database = database
        self._dialect = database.dialect
        self._clock = database.clock

    def acquire(
        self, name: str, holder: LeaseHolder, ttl_ms: int, current_term: int | None = None
    ) -> Lease | None:
        with self._database.serialised_write(f"claiming lease {name!r}") as connection:
            self._database.synchronise_clock(connection)
            now = self._clock.now_ms()
            row = self._locked_row(connection, name)
            if row is None:
                return self._create(connection, name, holder, now, ttl_ms)
            live = row.expires_at_ms > now
            if live and row.holder == holder.holder and row.term == current_term:
                return self._write(
                    connection,
                    row,
                    holder,
                    term=row.term,
                    acquired_at_ms=row.acquired_at_ms,
                    expires_at_ms=now + ttl_ms,
                )
            if not live or row.holder == holder.holder:
                return self._write(
                    connection,
                    row,
                    holder,
                    term=row.term + 1,
                    acquired_at_ms=now,
                    expires_at_ms=now + ttl_ms,
                )
            return None

    def release(self, name: str, holder: str, term: int) -> None:
        with self._database.serialised_write(f"releasing lease {name!r}") as connection:
            connection.execute(
                update(leases)
                .where(leases.c.name == name, leases.c.holder == holder, leases.c.term == term)
                .values(expires_at_ms=self._clock.now_ms())
            )

    def status(self, name: str) -> Lease | None:
        with self._database.reading(f"reading lease {name!r}") as connection:
            row = connection.execute(select(leases).where(leases.c.name == name)).mappings().first()
        return None if row is None else Lease(**row)

    def _locked_row(self, connection: Connection, name: str) -> Lease | None:
        query = self._dialect.locked(select(leases).where(leases.c.name == name))
        row = connection.execute(query).mappings().first()
        return None if row is None else Lease(**row)

    def _create(
        self, connection: Connection, name: str, holder: LeaseHolder, now: int, ttl_ms: int
    ) -> Lease | None:
        lease = Lease(name, holder.holder, holder.host, holder.pid, 1, now, now + ttl_ms)
        statement = self._dialect.insert_if_absent(leases, "name").values(**lease.__dict__)
        created = connection.execute(statement.returning(leases.c.name)).first()
        return lease if created is not None else None

    def _write(
        self,
        connection: Connection,
        row: Lease,
        holder: LeaseHolder,
        *,
        term: int,
        acquired_at_ms: int,
        expires_at_ms: int,
    ) -> Lease:
        lease = Lease(
            row.name,
            holder.holder,
            holder.host,
            holder.pid,
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
