"""The SQL reads of quarantine, crash blame and paused queues.

Each is a function of a Connection so it can run inside a write transaction
(seeing its own appends) or on its own (`queries.SqlReads`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Final

from sqlalchemy import (
    Select,
    and_,
    exists,
    func,
    or_,
    select,
)
from sqlalchemy.engine import Connection

from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import (
    MAX_PAGE,
    QUARANTINE_CURSOR,
    decode_timed_cursor,
    encode_timed_cursor,
)
from headgate._projections import (
    PausedQueueRow,
    QuarantineRow,
)
from headgate._store.port import (
    Page,
)
from headgate._store.sql.backends import Dialect, dialect_of
from headgate._store.sql.prepared import PreparedPerDialect
from headgate._store.sql.schema import LIVE

_quarantine = LIVE.quarantine
_blame = LIVE.crash_blame
_paused = LIVE.paused_queues
_ANY_BLAME: Final = exists().select_from(_blame).label("any_blame")


def crash_blame(connection: Connection, fingerprints: Collection[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(fingerprints))
    if not wanted:
        return {}
    query = select(_blame.c.fingerprint, _blame.c.blame_milli).where(
        dialect_of(connection).is_one_of(_blame.c.fingerprint, wanted)
    )
    blamed = dict.fromkeys(wanted, 0)
    blamed.update({str(f): int(b) for f, b in connection.execute(query)})
    return blamed


def paused_queues(connection: Connection) -> dict[str, PausedQueueRow]:
    query = select(_paused.c.queue, _paused.c.note, _paused.c.paused_at_ms).order_by(
        _paused.c.queue
    )
    return {row.queue: PausedQueueRow(*row) for row in connection.execute(query)}


def quarantine_page(
    connection: Connection, limit: int, cursor: str | None, maximum: int = MAX_PAGE
) -> Page[QuarantineRow]:
    """Newest first, by (quarantined_at_ms, fingerprint). Unindexed on purpose: the
    table holds what operators and the crash limit put there, not one row per job."""
    check_limit(limit, maximum)
    query = select(_quarantine)
    if cursor is not None:
        at_ms, fingerprint = decode_timed_cursor(QUARANTINE_CURSOR, cursor)
        query = query.where(
            or_(
                _quarantine.c.quarantined_at_ms < at_ms,
                and_(
                    _quarantine.c.quarantined_at_ms == at_ms,
                    _quarantine.c.fingerprint < fingerprint,
                ),
            )
        )
    query = query.order_by(
        _quarantine.c.quarantined_at_ms.desc(), _quarantine.c.fingerprint.desc()
    ).limit(limit + 1)
    items = [QuarantineRow(**row) for row in connection.execute(query).mappings()]
    more = len(items) > limit
    items = items[:limit]
    last = items[-1] if more else None
    next_cursor = (
        None
        if last is None
        else encode_timed_cursor(QUARANTINE_CURSOR, last.quarantined_at_ms, last.fingerprint)
    )
    return Page(items, next_cursor)


def quarantine_entry(connection: Connection, fingerprint: str) -> QuarantineRow | None:
    if not could_be_stored(fingerprint):
        return None
    query = select(_quarantine).where(_quarantine.c.fingerprint == fingerprint)
    row = connection.execute(query).mappings().first()
    return None if row is None else QuarantineRow(**row)


def quarantined_count(connection: Connection) -> int:
    query = select(func.count()).select_from(_quarantine)
    return int(connection.execute(query).scalar_one())


def _quarantined_statement(dialect: Dialect) -> Select[Any]:
    wanted = dialect.each_of_bound("fingerprints", _quarantine.c.fingerprint)
    return select(_quarantine.c.fingerprint).where(
        _quarantine.c.fingerprint.in_(select(wanted.c.value))
    )


_QUARANTINED: Final = PreparedPerDialect(_quarantined_statement)


def quarantined(connection: Connection, fingerprints: Iterable[str]) -> set[str]:
    dialect = dialect_of(connection)
    wanted = dialect.batch_value(list(dict.fromkeys(fingerprints)))
    statement = _QUARANTINED.on(dialect)
    return {str(value) for (value,) in statement.run(connection, fingerprints=wanted)}
