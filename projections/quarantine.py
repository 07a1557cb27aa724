"""Quarantined job fingerprints: the admission gate skips matching jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from headgate._domain.events import FingerprintQuarantined, FingerprintReleased, RecordedEvent
from headgate._projections.base import Projection


@dataclass(frozen=True)
class QuarantineRow:
    fingerprint: str
    note: str
    quarantined_at_ms: int


_KEYED: Final = (FingerprintQuarantined, FingerprintReleased)


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, _KEYED):
        return event.fingerprint
    return None


def apply(row: QuarantineRow | None, recorded: RecordedEvent) -> QuarantineRow | None:
    event = recorded.event
    if isinstance(event, FingerprintQuarantined):
        return QuarantineRow(event.fingerprint, event.note, recorded.recorded_at_ms)
    if isinstance(event, FingerprintReleased):
        return None
    return row


QUARANTINE: Projection[QuarantineRow] = Projection(
    name="quarantine",
    table="quarantine",
    row_type=QuarantineRow,
    key_column="fingerprint",
    key=key,
    apply=apply,
)
