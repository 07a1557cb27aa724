"""Leases: named duties held by one process at a time, fenced by terms."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class Fence:
    """A write made under a lease: valid only while the lease is at this term."""

    lease: str
    term: int


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    host: str
    pid: int
    term: int
    acquired_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True)
class LeaseHolder:
    """Who asks for a lease."""

    holder: str
    host: str
    pid: int


class Leases(ABC):
    """Named leases with fencing terms: operational state, not events.

    A lease's term increases on every takeover. A holder renews only while it
    still holds its own term and the lease has not expired; once it has
    expired anyone (the old holder included) may take it, bumping the term,
    so writes fenced with an older term are refused. Expiry is store time.

    A holder that asks for its own live lease without naming its term (it
    lost track of it: a batch reported the term lost, a renewal came back too
    late to trust, or the answer to a takeover was lost after the store made
    it) takes it again at once under the next term, rather than being refused
    until the lease expires. That is safe: a live lease is still nobody
    else's, and the term moves on, so whatever the holder sent under the term
    it no longer trusts (a batch in flight, a compaction) is refused from then
    on. Refusing would only turn a holder's lapse of memory into an outage of
    up to a whole TTL. Renewing the forgotten term instead would not be safe:
    work under it would still commit. Holder names are unique to one runtime
    start (host, pid and a random part), so no other process can do this.

    An implementation must serialise claims with the event log's writes, so a
    fenced write (`EventLog.write(fence)`) sees the lease as the last claim
    left it.
    """

    @abstractmethod
    def acquire(
        self, name: str, holder: LeaseHolder, ttl_ms: int, current_term: int | None = None
    ) -> Lease | None:
        """Renew (if `current_term` is still ours and live), take our own live lease
        again under the next term (if it is not), or take over an expired or absent
        lease. Returns the lease when `holder` holds it afterwards, else None.
        Two holders racing for a free lease: exactly one gets it."""

    @abstractmethod
    def release(self, name: str, holder: str, term: int) -> None:
        """Expire our own lease now (if still ours at `term`), so a standby can take
        over without waiting for the TTL."""

    @abstractmethod
    def status(self, name: str) -> Lease | None:
        """The lease row as stored (possibly expired), or None if never taken."""
