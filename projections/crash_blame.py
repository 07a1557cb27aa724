"""How much of its workers' crashes each job fingerprint is blamed for.

Folded from the newest FingerprintCrashBlamed, which carries the total, so a
compacted log (which keeps only that one) rebuilds the same row; a release
of the fingerprint, or a completed job of it, forgets its blame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from headgate._domain.events import (
    FingerprintBlameCleared,
    FingerprintCrashBlamed,
    FingerprintReleased,
    RecordedEvent,
)
from headgate._projections.base import Projection


@dataclass(frozen=True)
class CrashBlameRow:
    fingerprint: str
    blame_milli: int
    """Crashes blamed on the fingerprint, in thousandths."""
    last_job_id: str
    updated_at_ms: int


_KEYED: Final = (FingerprintCrashBlamed, FingerprintBlameCleared, FingerprintReleased)


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    return event.fingerprint if isinstance(event, _KEYED) else None


def apply(row: CrashBlameRow | None, recorded: RecordedEvent) -> CrashBlameRow | None:
    event = recorded.event
    if isinstance(event, FingerprintCrashBlamed):
        return CrashBlameRow(
            event.fingerprint, event.blame_milli, event.job_id, recorded.recorded_at_ms
        )
    if isinstance(event, FingerprintReleased | FingerprintBlameCleared):
        return None
    return row


CRASH_BLAME: Projection[CrashBlameRow] = Projection(
    name="crash_blame",
    table="crash_blame",
    row_type=CrashBlameRow,
    key_column="fingerprint",
    key=key,
    apply=apply,
)
