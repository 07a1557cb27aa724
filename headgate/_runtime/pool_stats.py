"""What a worker pool has done, for logs, drain() and metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from headgate._domain.events import JobAttemptFailed, JobSnoozed


@dataclass
class PoolStats:
    """What the pool has done, for logs, drain() and metrics."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    snoozed: int = 0
    timed_out: int = 0
    released: int = 0
    refused: int = 0
    """Ends not recorded because the job was no longer this worker's."""
    crashed: int = 0
    """Attempts whose child process died (`executor="process"`): crashes recorded."""
    by_kind: Counter[str] = field(default_factory=Counter)

    def count_end(self, kind: str, event: object, *, released: bool) -> str:
        """Count a recorded attempt end (`released`: given back at stop); its outcome."""
        if released:
            self.released += 1
            outcome = "released"
        elif isinstance(event, JobAttemptFailed):
            self.timed_out += int(event.timed_out)
            if event.retry_at_ms is None:
                self.failed += 1
                outcome = "failed"
            else:
                self.retried += 1
                outcome = "retrying"
        elif isinstance(event, JobSnoozed):
            self.snoozed += 1
            outcome = "snoozed"
        else:
            self.succeeded += 1
            outcome = "succeeded"
        self.by_kind[kind] += 1
        return outcome

    def counts(self) -> dict[str, int]:
        """The figures a stopping pool logs."""
        return {
            "claimed": self.claimed,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retried": self.retried,
            "released": self.released,
        }
