"""What a schedule does with the ticks it missed while nobody fired them."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class MissedRunPolicy(StrEnum):
    SKIP = "skip"
    """Discard older missed ticks and enqueue only the latest due tick."""
    RUN_ONCE = "run_once"
    """Enqueue one catch-up job for the latest due tick, discarding older ones."""
    BACKFILL = "backfill"
    """Enqueue the N (backfill_max) most recent missed ticks as separate jobs."""


LABELS: Final = {
    MissedRunPolicy.SKIP: "Skip backlog",
    MissedRunPolicy.RUN_ONCE: "Run once",
    MissedRunPolicy.BACKFILL: "Backfill up to N",
}
"""The console's label of each policy (the spec's)."""


def label(on_missed: str, backfill_max: int) -> str:
    """A schedule's policy as the console shows it, its N filled in."""
    if on_missed not in LABELS:
        return on_missed
    return LABELS[MissedRunPolicy(on_missed)].replace("N", str(backfill_max))
