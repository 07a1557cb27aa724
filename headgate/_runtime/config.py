"""Runtime settings, with defaults a production deployment can start from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from headgate._domain.admission import AdmissionLimits

SCHEDULER_LEASE: Final = "scheduler"


@dataclass(frozen=True)
class RuntimeConfig:
    lease_ttl_ms: int = 1_500
    """How long a holder's claim lasts without renewal; bounds failover time."""
    sweep_batch: int = 1_000
    """Due schedules read per sweep (one transaction); larger backlogs drain over
    successive sweeps."""
    shards: int = 2
    """Schedule actors; the thread count never grows with the number of schedules.

    Planning is Python and the store takes one writer at a time, so more shards
    only add contention for the interpreter lock.
    """
    max_ticks_per_batch: int = 1_000
    """Ticks one schedule actor plans per sweep; the rest wait for the next sweep."""
    prepare_ahead_ms: int = 500
    """How long before an instant its schedules are planned (hooks included) and
    written; the commit itself waits for the instant. 0 fires everything when due."""
    compaction_interval_ms: int = 60_000
    limits: AdmissionLimits = field(default_factory=AdmissionLimits)

    @property
    def renew_every_ms(self) -> int:
        """Renew at a quarter of the TTL: three renewals can fail before the lease lapses."""
        return max(self.lease_ttl_ms // 4, 1)

    @property
    def trust_margin_ms(self) -> int:
        """A holder stops sweeping this long before its lease expires."""
        return max(self.lease_ttl_ms // 5, 1)

    def __post_init__(self) -> None:
        if self.lease_ttl_ms < 100:
            raise ValueError("lease_ttl_ms must be at least 100")
        if not 1 <= self.sweep_batch <= 10_000:
            raise ValueError("sweep_batch must be between 1 and 10000")
        if self.max_ticks_per_batch < 1:
            raise ValueError("max_ticks_per_batch must be at least 1")
        if not 0 <= self.prepare_ahead_ms <= self.lease_ttl_ms // 2:
            raise ValueError("prepare_ahead_ms must be between 0 and half of lease_ttl_ms")
        if not 1 <= self.shards <= 64:
            raise ValueError("shards must be between 1 and 64")
