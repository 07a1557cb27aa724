"""What a block of work writes to a store, read around the block on either backend:
the statements this process sent, the rows inserted, updated and deleted in
each table, the write transactions committed, and the bytes of log they made.

Statements are counted at the driver, where every path meets: a cursor class
of our own on each connection any SQLAlchemy engine of the process opens
(psycopg's `cursor_factory`; sqlite3's connection `factory`, given through the
engine's `do_connect`), so the store's prepared statements and COPY, which run
on the driver's cursor, count as much as what SQLAlchemy executes. An
executemany (or a COPY) is one statement; its parameter sets (rows) are counted
apart. SQLAlchemy's `before_cursor_execute` is counted beside it, to show how
much of the traffic bypasses SQLAlchemy. Transaction control (BEGIN, COMMIT,
SAVEPOINT, ...) is left out of the statements: how it is sent differs by path
(psycopg sends an implicit BEGIN and COMMIT without a cursor); the write
transactions are counted from the log instead.

Rows, transactions and bytes, by backend:
* PostgreSQL: everything from the WAL itself, with `pg_walinspect` (contrib,
  PostgreSQL 15+; created in the benchmark database's public schema): the
  records that touch a relation of the store's schema (its tables, indexes,
  TOAST), and the commit records of their transactions, so other databases'
  writes on a shared server do not count. Rows are its heap records (INSERT,
  MULTI_INSERT's tuples, UPDATE, HOT_UPDATE, DELETE; LOCK apart, as row locks)
  on each table's own heap. The server's whole `pg_wal_lsn_diff` is reported
  beside it (equal on a quiet server, but for alignment and other writers).
  Without pg_walinspect: the server's LSN difference, and rows from
  `pg_stat_user_tables` read after the statistics settle (11 s a read).
* SQLite: rows from temporary triggers (AFTER INSERT/UPDATE/DELETE on every
  table the connection finds, calling a Python function: they live in the
  connection's temp schema and write nothing to the database); transactions
  and bytes from the -wal file: its frames (a page plus a 24-byte header each)
  and commit frames, between the block's first and last frame in the WAL
  index. A read transaction held open on a connection of our own for the
  block stops any checkpoint from copying the block's frames and the WAL from
  restarting behind them.

Tables are discovered from the database (`pg_stat_user_tables`, `sqlite_master`),
never named here, so the meter reads a changed schema as it is.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import Pool

_lock = threading.Lock()
_statements: Counter[str] = Counter()
"""Across the process: statements by class, parameter sets, SQLAlchemy's own count."""
_shapes: Counter[str] = Counter()
"""Statements sent, by their first words (transaction control left out)."""
_sqlite_rows: Counter[tuple[str, str]] = Counter()
"""(table, "ins" | "upd" | "del") -> rows, from the temporary triggers."""

SHAPE_LENGTH = 72
_TRANSACTION_CONTROL = re.compile(
    r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|START\s+TRANSACTION)\b", re.I
)
_WRITE = re.compile(
    r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|COPY\s+\S+.*\bFROM\s+STDIN)\b",
    re.I | re.S,
)
_READ = re.compile(r"^\s*(SELECT|WITH|VALUES)\b", re.I)
_LITERAL = re.compile(r"'[^']*'|\b\d+\b")
_NOTIFY = re.compile(r"\bpg_notify\s*\(|^\s*NOTIFY\b", re.I)


def _count_sql(sql: object, parameter_sets: int) -> None:
    text = sql.decode() if isinstance(sql, bytes) else str(sql)
    kinds = []
    shapes = []
    for part in text.split(";"):
        if not part.strip():
            continue
        if _TRANSACTION_CONTROL.match(part):
            kinds.append("transaction control")
            continue
        shapes.append(_LITERAL.sub("?", " ".join(part.split()))[:SHAPE_LENGTH])
        if _NOTIFY.search(part):
            kinds.append("notify")
        elif _WRITE.search(part):
            kinds.append("write")
        elif _READ.match(part):
            kinds.append("read")
        else:
            kinds.append("other")
    with _lock:
        _statements["sent"] += 1
        _statements["parameter sets"] += parameter_sets
        _statements.update(kinds)
        _shapes.update(shapes)


class _CountingPsycopgCursor(psycopg.Cursor[Any]):
    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _count_sql(query if isinstance(query, str | bytes) else query.as_string(self), 0)
        return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        sets = list(params_seq)
        _count_sql(query if isinstance(query, str | bytes) else query.as_string(self), len(sets))
        super().executemany(query, sets, **kwargs)

    def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Any:
        _count_sql(statement if isinstance(statement, str | bytes) else str(statement), 0)
        return super().copy(statement, params, **kwargs)


class _CountingSqliteCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        _count_sql(sql, 0)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Self:
        sets = list(seq_of_parameters)
        _count_sql(sql, len(sets))
        return super().executemany(sql, sets)


class _CountingSqliteConnection(sqlite3.Connection):
    def cursor(self, factory: Any = _CountingSqliteCursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)


def _row_changed(table: str, kind: str) -> None:
    with _lock:
        _sqlite_rows[(table, kind)] += 1


def _watch_rows(connection: sqlite3.Connection) -> None:
    """Temporary triggers on every table this connection sees (created before the
    measured store opens it, so it sees them all)."""
    connection.create_function("headgate_meter_row", 2, _row_changed)
    tables = [
        name
        for (name,) in sqlite3.Connection.execute(
            connection,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
    ]
    for table in tables:
        for kind, operation in (("ins", "INSERT"), ("upd", "UPDATE"), ("del", "DELETE")):
            sqlite3.Connection.execute(
                connection,
                f'CREATE TEMP TRIGGER IF NOT EXISTS "meter_{kind}_{table}" AFTER {operation}'
                f" ON main.\"{table}\" BEGIN SELECT headgate_meter_row('{table}', '{kind}'); END",
            )


_installed = threading.Event()


def install() -> None:
    """Count every SQLAlchemy engine's connections opened from now on, in this process."""
    if _installed.is_set():
        return
    _installed.set()

    @event.listens_for(Engine, "do_connect")
    def _sqlite_factory(dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        if dialect.name == "sqlite":
            cparams["factory"] = _CountingSqliteConnection

    @event.listens_for(Pool, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        if isinstance(dbapi_connection, psycopg.Connection):
            dbapi_connection.cursor_factory = _CountingPsycopgCursor
        elif isinstance(dbapi_connection, sqlite3.Connection):
            with contextlib.suppress(sqlite3.OperationalError):  # a read-only connection
                _watch_rows(dbapi_connection)

    @event.listens_for(Engine, "before_cursor_execute")
    def _seen_by_sqlalchemy(*_: Any) -> None:
        with _lock:
            _statements["seen by SQLAlchemy"] += 1


@dataclass
class Cost:
    """What one block wrote; per job with `per`."""

    statements: Counter[str] = field(default_factory=Counter)
    shapes: Counter[str] = field(default_factory=Counter)
    """Statements by their first words."""
    rows: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """table -> (inserted, updated, deleted)."""
    transactions: int = 0
    wal_bytes: int = 0
    full_page_bytes: int = 0
    """Of wal_bytes, full-page images (PostgreSQL: after a checkpoint; SQLite: 0)."""
    hot_updates: dict[str, int] = field(default_factory=dict)
    """PostgreSQL: of the updated rows, those updated in place (HOT: no index entries)."""
    row_locks: dict[str, int] = field(default_factory=dict)
    """PostgreSQL: rows locked (SELECT ... FOR UPDATE, a claim's SKIP LOCKED) by table."""
    wal_by_table: dict[str, int] = field(default_factory=dict)
    """PostgreSQL: WAL bytes by the table its relation belongs to ("(commit)" apart)."""
    server_wal_bytes: int | None = None
    """PostgreSQL: the whole server's LSN movement over the block."""

    def total_rows(self) -> tuple[int, int, int]:
        ins = sum(r[0] for r in self.rows.values())
        upd = sum(r[1] for r in self.rows.values())
        dele = sum(r[2] for r in self.rows.values())
        return ins, upd, dele


class Meter:
    """Reads a store's costs around blocks of work: `with meter.block() as cost:`."""

    @staticmethod
    def of(url: str) -> Meter:
        install()
        if make_url(url).get_backend_name() == "sqlite":
            return _SqliteMeter(url)
        return _PostgresMeter(url)

    @contextlib.contextmanager
    def block(self) -> Iterator[Cost]:
        cost = Cost()
        with _lock:
            statements_before, shapes_before = Counter(_statements), Counter(_shapes)
        began = self._begin()
        yield cost
        self._end(began, cost)
        with _lock:
            cost.statements, cost.shapes = Counter(_statements), Counter(_shapes)
        cost.statements.subtract(statements_before)
        cost.shapes.subtract(shapes_before)
        cost.shapes = +cost.shapes

    def _begin(self) -> Any:
        raise NotImplementedError

    def _end(self, began: Any, cost: Cost) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class _WalIndex:
    salts: tuple[int, int]
    last_frame: int
    page_size: int


class _SqliteMeter(Meter):
    def __init__(self, url: str) -> None:
        self.path = Path(str(make_url(url).database))

    def _wal_index(self) -> _WalIndex:
        # The WAL index header (the -shm file's first 48 bytes, native byte order):
        # szPage at 14 (u16; 1 means 65536), mxFrame at 16, aSalt at 32.
        header = Path(f"{self.path}-shm").read_bytes()[:48]
        page_size, last_frame = struct.unpack_from("=HI", header, 14)
        salts = struct.unpack_from("=II", header, 32)
        return _WalIndex(salts, last_frame, 65536 if page_size == 1 else page_size)

    def _begin(self) -> Any:
        pin = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        pin.execute("BEGIN")
        pin.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
        with _lock:
            rows = Counter(_sqlite_rows)
        return pin, self._wal_index(), rows

    def _end(self, began: Any, cost: Cost) -> None:
        pin, start, rows_before = began
        end = self._wal_index()
        pin.execute("COMMIT")
        pin.close()
        # The pinned reader lets the WAL restart at most once, at the block's
        # first write (when it was fully checkpointed before); then every frame
        # in it is the block's.
        first = start.last_frame if end.salts == start.salts else 0
        frame_size = end.page_size + 24
        commits = 0
        with open(f"{self.path}-wal", "rb") as wal:
            for frame in range(first, end.last_frame):
                wal.seek(32 + frame * frame_size)
                (size_after_commit,) = struct.unpack(">4xI", wal.read(8))
                commits += size_after_commit != 0
        cost.transactions = commits
        cost.wal_bytes = (end.last_frame - first) * frame_size
        with _lock:
            rows = Counter(_sqlite_rows)
        rows.subtract(rows_before)
        tables = sorted({table for table, _ in rows})
        cost.rows = {
            t: (rows[(t, "ins")], rows[(t, "upd")], rows[(t, "del")])
            for t in tables
            if rows[(t, "ins")] or rows[(t, "upd")] or rows[(t, "del")]
        }


_RELATION = re.compile(r"rel \d+/\d+/(\d+)")
_SUBTRANSACTIONS = re.compile(r"subxacts:((?: \d+)+)")
_TUPLES = re.compile(r"(?:ntuples: )?(\d+)(?: tuples)?")
_HEAP_ROWS = {"INSERT": 0, "UPDATE": 1, "HOT_UPDATE": 1, "DELETE": 2}


class _PostgresMeter(Meter):
    STATISTICS_SETTLE_S = 11.0
    """Without pg_walinspect: an idle backend flushes its table statistics within
    10 s (PGSTAT_IDLE_INTERVAL) when it flushed less than a second before."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        options = str(parsed.query.get("options", ""))
        match = re.search(r"search_path=(\w+)", options)
        self.schema = match.group(1) if match else "public"
        self.admin = psycopg.connect(
            host=parsed.host or "localhost",
            port=parsed.port or 5432,
            user=parsed.username,
            password=parsed.password,
            dbname=parsed.database,
            autocommit=True,
        )
        try:
            self.admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public")
            self.walinspect = True
        except psycopg.Error:
            self.walinspect = False

    def close(self) -> None:
        self.admin.close()

    def _statistics_rows(self) -> dict[str, tuple[int, int, int]]:
        time.sleep(self.STATISTICS_SETTLE_S)
        return {
            name: (ins, upd, dele)
            for name, ins, upd, dele in self.admin.execute(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
                " WHERE schemaname = %s",
                (self.schema,),
            )
        }

    def _begin(self) -> Any:
        rows = {} if self.walinspect else self._statistics_rows()
        (lsn,) = self.admin.execute("SELECT pg_current_wal_lsn()").fetchone() or (None,)
        return rows, lsn

    def _end(self, began: Any, cost: Cost) -> None:
        rows_before, start_lsn = began
        (end_lsn, server) = self.admin.execute(
            "SELECT pg_current_wal_flush_lsn(), pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
            (start_lsn,),
        ).fetchone() or (None, 0)
        cost.server_wal_bytes = int(server)
        if self.walinspect:
            self._read_wal(start_lsn, end_lsn, cost)
            return
        cost.wal_bytes = cost.server_wal_bytes
        for table, (ins, upd, dele) in sorted(self._statistics_rows().items()):
            b_ins, b_upd, b_del = rows_before.get(table, (0, 0, 0))
            if (ins - b_ins, upd - b_upd, dele - b_del) != (0, 0, 0):
                cost.rows[table] = (ins - b_ins, upd - b_upd, dele - b_del)

    def _relations(self) -> dict[int, tuple[str, bool]]:
        """filenode -> (the schema's table it belongs to, whether it is that table's
        own heap): the table, its indexes, its TOAST and the TOAST's index."""
        owned = self.admin.execute(
            """
            WITH tables AS (
                SELECT c.oid, c.relname, c.reltoastrelid FROM pg_class c
                WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'p', 'm')
            ), parts AS (
                SELECT t.oid AS rel, t.relname, true AS heap FROM tables t
                UNION ALL SELECT t.reltoastrelid, t.relname, false FROM tables t
                    WHERE t.reltoastrelid <> 0
                UNION ALL SELECT i.indexrelid, t.relname, false FROM pg_index i
                    JOIN tables t ON i.indrelid IN (t.oid, t.reltoastrelid)
            )
            SELECT pg_relation_filenode(rel), relname, heap FROM parts
            UNION ALL
            SELECT pg_relation_filenode(c.oid), '(sequences)', false FROM pg_class c
            WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'S'
            """,
            (self.schema, self.schema),
        ).fetchall()
        return {int(node): (name, heap) for node, name, heap in owned if node is not None}

    def _read_wal(self, start_lsn: Any, end_lsn: Any, cost: Cost) -> None:
        """The block's WAL records on the schema's relations, and the commits of the
        transactions that wrote them: bytes by table, and the rows each heap record
        inserted, updated, deleted or locked."""
        relations = self._relations()
        ours: set[int] = set()
        by_table: Counter[str] = Counter()
        rows: Counter[tuple[str, int]] = Counter()
        total = full_pages = 0
        ends: list[tuple[int, str, int, str]] = []
        for xid, manager, kind, length, fpi, blocks, description in self.admin.execute(
            "SELECT xid::text::bigint, resource_manager, record_type, record_length,"
            " fpi_length, block_ref, description"
            " FROM public.pg_get_wal_records_info(%s, %s)",
            (start_lsn, end_lsn),
        ):
            if manager == "Transaction":
                ends.append((int(xid), kind, int(length), description or ""))
                continue
            parts = [relations.get(int(n)) for n in _RELATION.findall(blocks or "")]
            part = next((p for p in parts if p is not None), None)
            if part is None:
                continue
            table, heap = part
            total += length
            full_pages += fpi or 0
            by_table[table] += length
            if xid:
                ours.add(int(xid))
            operation = kind.removesuffix("+INIT")
            if heap and manager == "Heap" and operation in _HEAP_ROWS:
                rows[(table, _HEAP_ROWS[operation])] += 1
                if operation == "HOT_UPDATE":
                    cost.hot_updates[table] = cost.hot_updates.get(table, 0) + 1
            elif heap and manager == "Heap" and operation == "LOCK":
                cost.row_locks[table] = cost.row_locks.get(table, 0) + 1
            elif heap and manager == "Heap2" and operation == "MULTI_INSERT":
                counted = _TUPLES.match(description or "")
                rows[(table, 0)] += int(counted.group(1)) if counted else 1
        for xid, kind, length, description in ends:
            subtransactions = _SUBTRANSACTIONS.search(description)
            members = {xid} | (
                {int(x) for x in subtransactions.group(1).split()} if subtransactions else set()
            )
            if members & ours:
                total += length
                by_table["(commit records)"] += length
                cost.transactions += kind.startswith("COMMIT")
        cost.wal_bytes = total
        cost.full_page_bytes = full_pages
        cost.wal_by_table = dict(by_table)
        for table in sorted({table for table, _ in rows}):
            cost.rows[table] = (rows[(table, 0)], rows[(table, 1)], rows[(table, 2)])
