"""Compaction's report; what it keeps is the domain's (`headgate._domain.retention`)."""

from __future__ import annotations

from dataclasses import dataclass

from headgate._domain.retention import DAY_MS, CompactionPolicy

__all__ = ["DAY_MS", "CompactionPolicy", "CompactionReport"]


@dataclass(frozen=True)
class CompactionReport:
    streams_examined: int
    events_deleted: int
    jobs_removed: int
