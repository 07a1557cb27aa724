"""Admission facts: what the admission gate and the rescuer decide on (existing
jobs, unique keys, quarantine, crash blame), and the quarantine's listing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence

from headgate._domain.decisions import Candidate, GateFacts
from headgate._projections import QuarantineRow
from headgate._store.port.paging import Page


class AdmissionFacts(ABC):
    """The admission gate's part of a write transaction: facts read in bulk in
    the transaction that appends what the gate decides, so they stay true
    until it commits."""

    @abstractmethod
    def gate_facts(
        self, candidates: Sequence[Candidate], count_queues: Collection[str]
    ) -> GateFacts:
        """What the admission gate needs to decide these candidates, read in bulk:
        the jobs that already exist under their ids, the live holders of their
        unique keys, which of their fingerprints are quarantined, and the
        pending jobs of each queue in `count_queues` (counting costs a scan
        of that queue's index, so only queues with a limit are named)."""

    @abstractmethod
    def quarantined(self, fingerprints: Collection[str]) -> frozenset[str]:
        """Which of these fingerprints are quarantined."""

    @abstractmethod
    def crash_blame(self, fingerprints: Collection[str]) -> dict[str, int]:
        """Each fingerprint's crash blame (thousandths of a crash); 0 if none."""


class QuarantineReads(ABC):
    """The quarantine as the API and the console read it (committed state only)."""

    @abstractmethod
    def quarantine_page(self, limit: int, cursor: str | None) -> Page[QuarantineRow]:
        """Quarantined fingerprints, newest first (then by fingerprint), each with
        why and when; ValidationError for a bad limit or cursor."""

    @abstractmethod
    def quarantine_entry(self, fingerprint: str) -> QuarantineRow | None:
        """The fingerprint's quarantine entry, or None when it is admissible."""
