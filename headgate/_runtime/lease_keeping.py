"""The one rule by which a runtime holds a lease: the scheduler's and the
maintenance duties' (`duties.DutyKeeper`) alike.

Renewed at a quarter of its TTL, so three renewals can fail before it lapses.
A renewal that comes back within the trust margin of the expiry it grants is
not trusted: the term is given up at once (nothing more runs under it) and
taken again under the next term at the following renewal, which fences off
whatever was sent under the old one (`Leases` says why that is safe). A lease
acquired, lost to another process, or taken again under a new term is logged
with its terms and how late the renewal ran; a renewal is silent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from headgate._clock import Clock
from headgate._errors import StoreError
from headgate._logs import HeadgateLogger
from headgate._store.port import Lease, LeaseHolder, Leases


@dataclass(frozen=True)
class LeaseTiming:
    """How long a lease lasts, and when it is renewed and stops being trusted."""

    ttl_ms: int

    @property
    def renew_every_ms(self) -> int:
        """A quarter of the TTL: three renewals can fail before the lease lapses."""
        return max(self.ttl_ms // 4, 1)

    @property
    def trust_margin_ms(self) -> int:
        """A holder trusts its lease no later than this long before it expires."""
        return max(self.ttl_ms // 5, 1)


@dataclass(frozen=True)
class LeaseWords:
    """What a lease's log lines say it is for: `prefix` opens every event of
    it (the scheduler's have none, as they always had)."""

    prefix: str
    acquired: str
    """The event logged when this runtime first takes the lease."""
    untrusted: str
    """The event logged when a renewal comes back too late to trust."""


class LeaseKeeping:
    """One lease held by one runtime, by the rule above. Thread-safe: the holder's
    own thread keeps it, and the threads doing its work report a loss."""

    def __init__(
        self,
        leases: Leases,
        name: str,
        holder: LeaseHolder,
        clock: Clock,
        timing: LeaseTiming,
        *,
        log: HeadgateLogger,
        words: LeaseWords,
    ) -> None:
        self.name = name
        self.timing = timing
        self._leases = leases
        self._holder = holder
        self._clock = clock
        self._log = log
        self._words = words
        self._lock = threading.Lock()
        self._lease: Lease | None = None
        self.distrusted = False
        """The last `keep` gave up a term it could not trust (and holds none)."""
        self._last_term: int | None = None
        """The term this runtime last held, kept after losing it (to log a re-take)."""

    @property
    def lease(self) -> Lease | None:
        """The lease as last kept, None when not held (or not trusted)."""
        with self._lock:
            return self._lease

    @property
    def term(self) -> int | None:
        lease = self.lease
        return None if lease is None else lease.term

    def renewal_due_ms(self, now_ms: int) -> int:
        """When the lease is next renewed (or, without one, claimed again)."""
        lease = self.lease
        if lease is None:
            return now_ms + self.timing.renew_every_ms
        return lease.expires_at_ms - self.timing.ttl_ms + self.timing.renew_every_ms

    def keep(self, now_ms: int) -> Lease | None:
        """Renew the lease if its renewal is due (claim it, if not held); the lease
        held afterwards, None if another holds it or the renewal is not trusted.
        Raises StoreError when the store cannot answer (the lease is as before)."""
        self.distrusted = False
        due_ms = self.renewal_due_ms(now_ms)
        held = self.lease
        if held is not None and now_ms < due_ms:
            return held
        current_term = held.term if held is not None else None
        acquired = self._leases.acquire(self.name, self._holder, self.timing.ttl_ms, current_term)
        late_ms = now_ms - due_ms if held is not None else None
        self._log_change(held, acquired, late_ms)
        if acquired is not None:
            self._last_term = acquired.term
            returned_ms = self._clock.now_ms()
            if returned_ms >= acquired.expires_at_ms - self.timing.trust_margin_ms:
                self._log.warning(
                    self._words.prefix + self._words.untrusted,
                    lease=self.name,
                    term=acquired.term,
                    renewal_took_ms=returned_ms - now_ms,
                )
                acquired = None
                self.distrusted = True
        with self._lock:
            self._lease = acquired
        return acquired

    def forget_lost_term(self, term: int) -> bool:
        """Work sent under `term` found it lost: forget the lease if it is still that
        term. False when a newer term, taken again since, is held: it stays held."""
        with self._lock:
            if self._lease is None or self._lease.term == term:
                self._lease = None
                return True
            return False

    def release(self) -> None:
        """Give the lease up now (if held), so another holder takes it at once."""
        with self._lock:
            lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            self._leases.release(self.name, self._holder.holder, lease.term)
            self._log.info(self._words.prefix + "lease released", lease=self.name, term=lease.term)
        except StoreError:
            self._log.warning(
                f"could not release the {self._words.prefix}lease; it will expire",
                lease=self.name,
                exc_info=True,
            )

    def _log_change(self, held: Lease | None, acquired: Lease | None, late_ms: int | None) -> None:
        """Say why the lease changed hands: a new term or a loss is never silent.

        `late_ms` is how long after its renewal was due the renewal ran (None when
        no lease was held)."""
        if acquired is None:
            if held is not None:
                self._log.warning(
                    self._words.prefix + "lease lost to another process",
                    lease=self.name,
                    term=held.term,
                    late_ms=late_ms,
                )
            return
        if held is not None and acquired.term == held.term:
            return  # renewed
        if self._last_term is None:
            self._log.info(
                self._words.prefix + self._words.acquired, lease=self.name, term=acquired.term
            )
            return
        self._log.warning(
            self._words.prefix
            + "lease acquired again under a new term; the last one lapsed or was lost",
            lease=self.name,
            old_term=self._last_term,
            new_term=acquired.term,
            late_ms=late_ms,
        )
