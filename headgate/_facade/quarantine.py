"""`hg.quarantine`: fingerprints (a job's kind and payload) no job is admitted
under, whether a crash loop put them there or an operator did."""

from __future__ import annotations

import dataclasses
import sys

from headgate._deprecated import warn_moved
from headgate._domain.admission import kind_problem, require_payload
from headgate._domain.events import JobState
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.names import require
from headgate._facade.twins import Namespace
from headgate._json import JsonValue
from headgate._model import QUARANTINE_SAMPLED, Job, QuarantineEntry, QuarantinePage
from headgate._store.port import JobFilter


class Quarantine(Namespace):
    """A Headgate's quarantine: `hg.quarantine.add(hg.quarantine.fingerprint("k"))`."""

    name = "quarantine"

    @staticmethod
    def fingerprint(kind: str, payload: JsonValue = None) -> str:
        """The quarantine fingerprint of a job's kind and payload (any kind a job
        may have, one stored by an earlier build included)."""
        require("kind", kind_problem(kind))
        return fingerprint_of_text(kind, require_payload(payload, sys.maxsize))

    def add(self, fingerprint: str, note: str = "") -> None:
        """Admit no job of this fingerprint until it is released: an enqueue of it
        raises AdmissionRejected and its schedules' ticks are skipped; `note`
        says why."""
        self._core.commands.quarantine(fingerprint, note)

    def release(self, fingerprint: str) -> None:
        """Make a quarantined fingerprint admissible again; NotFound if it is not
        quarantined."""
        self._core.commands.release(fingerprint)

    def get(self, fingerprint: str) -> QuarantineEntry | None:
        """Why and since when a fingerprint is quarantined, or None if it is admissible."""
        row = self._core.reads.quarantine_entry(fingerprint)
        return None if row is None else QuarantineEntry.from_row(row)

    def list(self, limit: int = 50, cursor: str | None = None) -> QuarantinePage:
        """Quarantined fingerprints, newest first, each saying why and when, and the
        kind and id of its newest job held in quarantine, if any."""
        reads = self._core.reads
        page = reads.quarantine_page(limit, cursor)
        where = JobFilter(state=JobState.QUARANTINED.value)
        held = reads.jobs_page(where, QUARANTINE_SAMPLED, None).items
        newest: dict[str, Job] = {}
        for job in map(Job.from_row, held):
            newest.setdefault(job.fingerprint, job)
        entries = []
        for row in page.items:
            sample = newest.get(row.fingerprint)
            entry = QuarantineEntry.from_row(row)
            if sample is not None:
                entry = dataclasses.replace(entry, kind=sample.kind, sample_job_id=sample.id)
            entries.append(entry)
        return QuarantinePage(entries, page.next_cursor)

    def __call__(self, fingerprint: str, note: str = "") -> None:
        """`hg.quarantine(fingerprint)`, deprecated: `hg.quarantine.add(fingerprint)`."""
        warn_moved("quarantine()", "hg.quarantine.add()")
        self.add(fingerprint, note)
