"""Events as rows of the events table, and back (the mapper does the encoding).

Apart from the event log so that migrations, which the store runs as it
opens, can read the log too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, select

from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._store.mapper import decode, encode
from headgate._store.sql.schema import events


def unplaced_row(
    stream_id: str, version: int, recorded_at_ms: int, event: DomainEvent
) -> dict[str, Any]:
    """The events-table row of an event not yet given its position (the log
    gives it one as it inserts it: `LogOrder.insert_drawing`)."""
    type_name, schema_version, body = encode(event)
    return {
        "stream_id": stream_id,
        "version": version,
        "type": type_name,
        "schema_version": schema_version,
        "body": body,
        "recorded_at_ms": recorded_at_ms,
    }


def events_between(after: int, until: int | None = None, limit: int | None = None) -> Select[Any]:
    """Events with after < position <= until, in log order."""
    query = select(events).where(events.c.position > after)
    if until is not None:
        query = query.where(events.c.position <= until)
    query = query.order_by(events.c.position)
    return query if limit is None else query.limit(limit)


def decode_values(values: Sequence[Any]) -> RecordedEvent:
    """The recorded event of an events-table row read as a plain tuple, its
    columns in the table's order (a statement run on the driver)."""
    position, stream_id, version, type_name, schema_version, body, recorded_at_ms = values
    return RecordedEvent(
        position=position,
        stream_id=stream_id,
        version=version,
        recorded_at_ms=recorded_at_ms,
        event=decode(type_name, schema_version, body),
    )


def decode_row(row: object) -> RecordedEvent:
    """The recorded event an events-table row holds (upcast to the current shape)."""
    mapping = row._mapping  # type: ignore[attr-defined]
    return RecordedEvent(
        position=mapping["position"],
        stream_id=mapping["stream_id"],
        version=mapping["version"],
        recorded_at_ms=mapping["recorded_at_ms"],
        event=decode(mapping["type"], mapping["schema_version"], mapping["body"]),
    )
