"""Fleet-wide ceilings on running jobs and rate classes: what a claim may take.

A concurrency limit names a scope, a queue, a kind and a partition key (each
None for "any"), and the most jobs of that scope running at once across every
process on the store. `partition_key="*"` (`EACH_PARTITION`) gives every
partition key its own ceiling ("at most 2 running per tenant"); a job without
a partition key is not counted by such a limit. A rate limit caps how many
jobs of a rate class start in any window of `per_ms` (a sliding window: "30
a minute" never lets a 31st start within 60 s of the first).

Claims are made holding the log head, one at a time on a store, so a claim
that counts what runs and what started lately and takes only what fits
cannot be raced by another process's claim. The stores count; `Slots`
decides, for every store alike. A job held back is simply not claimed: it
stays pending, and no attempt is spent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from headgate._domain.admission import MAX_KIND_LENGTH, MAX_QUEUE_LENGTH, require_name
from headgate._domain.names import identifier_problem, label_problem, require
from headgate._errors import ValidationError

EACH_PARTITION: Final = "*"
"""As a limit's partition_key: every partition key has the ceiling on its own."""
MAX_PARTITION_KEY_LENGTH: Final = 128
MAX_RATE_CLASS_LENGTH: Final = 128
MAX_LIMIT: Final = 1_000_000
MAX_RATE_WINDOW_MS: Final = 24 * 3600 * 1000
"""A day: a rate window is counted from the starts of its jobs, kept that long."""

RunningKey = tuple[str, str, str | None]
"""(queue, kind, partition_key) of running jobs, as the stores count them."""


def partition_key_problem(value: object) -> str | None:
    """A job's partition key: an identifier (a tenant id travels in URLs, logs
    and metric labels)."""
    return identifier_problem(value, MAX_PARTITION_KEY_LENGTH)


def rate_class_problem(value: object) -> str | None:
    return identifier_problem(value, MAX_RATE_CLASS_LENGTH)


@dataclass(frozen=True)
class ConcurrencyLimit:
    """At most `limit` jobs of this scope run at once, fleet-wide."""

    queue: str | None
    kind: str | None
    partition_key: str | None
    """A partition key, EACH_PARTITION, or None (any job, keyed or not)."""
    limit: int

    @property
    def scope(self) -> str:
        """The scope as one text, its key in the store and in URLs' query."""
        return scope_of(self.queue, self.kind, self.partition_key)

    @property
    def per_partition(self) -> bool:
        return self.partition_key == EACH_PARTITION

    def covers(self, queue: str, kind: str, partition_key: str | None) -> bool:
        if self.queue is not None and self.queue != queue:
            return False
        if self.kind is not None and self.kind != kind:
            return False
        if self.partition_key is None:
            return True
        if self.per_partition:
            return partition_key is not None
        return self.partition_key == partition_key

    def bucket(self, partition_key: str | None) -> tuple[str, str | None]:
        """What a covered job counts against: the scope, and its own partition
        key under a per-partition limit."""
        return self.scope, partition_key if self.per_partition else None


def scope_of(queue: str | None, kind: str | None, partition_key: str | None) -> str:
    """A scope as one text, one text per scope: `*` stands for any queue or kind
    and `*any` for any partition. Queues and partition keys are identifiers, so
    neither can be `*`; a kind can be nearly any text, so a kind that could be
    read as "any" (`*` itself, or text starting with a quote) is written quoted."""
    return f"queue={queue or '*'} kind={_kind_in_scope(kind)} partition={partition_key or '*any'}"


def _kind_in_scope(kind: str | None) -> str:
    if kind is None:
        return "*"
    if kind == "*" or kind.startswith('"'):
        return json.dumps(kind, ensure_ascii=False)
    return kind


def concurrency_limit(
    queue: object, kind: object, partition_key: object, limit: object
) -> ConcurrencyLimit:
    """A limit from a caller's values, each checked by name."""
    if queue is not None:
        queue = require_name("queue", queue, MAX_QUEUE_LENGTH)
    if kind is not None:
        require("kind", label_problem(kind, MAX_KIND_LENGTH))
    if partition_key is not None and partition_key != EACH_PARTITION:
        require("partition_key", partition_key_problem(partition_key))
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise ValidationError(
            "limit", f"must be an integer from 0 (none run) to {MAX_LIMIT}, got {limit!r}"
        )
    assert queue is None or isinstance(queue, str)
    assert kind is None or isinstance(kind, str)
    assert partition_key is None or isinstance(partition_key, str)
    return ConcurrencyLimit(queue, kind, partition_key, limit)


@dataclass(frozen=True)
class RateLimit:
    """At most `limit` jobs of `rate_class` start in any `per_ms` window."""

    rate_class: str
    limit: int
    per_ms: int


def rate_limit(rate_class: object, limit: object, per_ms: object) -> RateLimit:
    require("rate_class", rate_class_problem(rate_class))
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if (
        isinstance(per_ms, bool)
        or not isinstance(per_ms, int)
        or not 1 <= per_ms <= MAX_RATE_WINDOW_MS
    ):
        raise ValidationError(
            "per_ms", f"must be an integer from 1 to {MAX_RATE_WINDOW_MS} (a day), got {per_ms!r}"
        )
    assert isinstance(rate_class, str)
    return RateLimit(rate_class, limit, per_ms)


@dataclass(frozen=True)
class Exclusions:
    """What a claim in one queue must not take, as its query says it: the whole
    queue; every job of some kinds; every job of some partition keys; every
    job with a partition key (`keyed`); (kind, partition key) pairs, the key
    EACH_PARTITION for any key; and jobs of some rate classes."""

    whole_queue: bool = False
    kinds: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()
    keyed: bool = False
    pairs: frozenset[tuple[str, str]] = frozenset()
    rate_classes: frozenset[str] = frozenset()


@dataclass
class Slots:
    """What a claim may still take under the limits: made from the jobs running
    now and the starts of each rate class within its window, and updated as the
    claim takes jobs (`take`)."""

    limits: tuple[ConcurrencyLimit, ...]
    rates: Mapping[str, RateLimit]
    running: dict[tuple[str, str | None], int] = field(default_factory=dict)
    """(scope, partition key or None) -> running jobs it counts."""
    started: dict[str, int] = field(default_factory=dict)
    """rate class -> starts within its window."""

    @classmethod
    def counted(
        cls,
        limits: Iterable[ConcurrencyLimit],
        rates: Mapping[str, RateLimit],
        running: Mapping[RunningKey, int],
        started: Mapping[str, int],
    ) -> Slots:
        slots = cls(tuple(limits), dict(rates), {}, dict(started))
        for (queue, kind, partition_key), count in running.items():
            for limit in slots.limits:
                if limit.covers(queue, kind, partition_key):
                    bucket = limit.bucket(partition_key)
                    slots.running[bucket] = slots.running.get(bucket, 0) + count
        return slots

    def applies_to(self, queue: str, kinds: Iterable[str]) -> bool:
        """Whether any limit or rate could hold back a job of these kinds here."""
        if self.rates:
            return True
        wanted = set(kinds)
        return any(
            (limit.queue is None or limit.queue == queue)
            and (limit.kind is None or limit.kind in wanted)
            for limit in self.limits
        )

    def blocking(
        self, queue: str, kind: str, partition_key: str | None, rate_class: str | None
    ) -> list[str]:
        """Why a job of this shape cannot start now: each full limit's scope and
        an exhausted rate class, in words (empty: it fits)."""
        reasons = [
            f"concurrency limit {limit.limit} on {limit.scope}"
            + (f" (partition {partition_key})" if limit.per_partition else "")
            for limit in self.limits
            if limit.covers(queue, kind, partition_key)
            and self.running.get(limit.bucket(partition_key), 0) >= limit.limit
        ]
        rate = self.rates.get(rate_class) if rate_class is not None else None
        if rate is not None and self.started.get(rate.rate_class, 0) >= rate.limit:
            reasons.append(f"rate class {rate.rate_class}: {rate.limit} per {rate.per_ms} ms")
        return reasons

    def fits(
        self, queue: str, kind: str, partition_key: str | None, rate_class: str | None
    ) -> bool:
        return not self.blocking(queue, kind, partition_key, rate_class)

    def take(
        self, queue: str, kind: str, partition_key: str | None, rate_class: str | None
    ) -> bool:
        """Count one more job of this shape if it fits; whether it did."""
        if not self.fits(queue, kind, partition_key, rate_class):
            return False
        for limit in self.limits:
            if limit.covers(queue, kind, partition_key):
                bucket = limit.bucket(partition_key)
                self.running[bucket] = self.running.get(bucket, 0) + 1
        if rate_class is not None and rate_class in self.rates:
            self.started[rate_class] = self.started.get(rate_class, 0) + 1
        return True

    def room(self, queue: str, kinds: Iterable[str]) -> int | None:
        """How many more jobs of these kinds a claim in `queue` may take, when the
        limits that apply hold every such job alike (a limit on the queue, or on
        its one kind); None when they depend on each job (a partition, a kind
        among several, a rate class), and the candidates must be read."""
        if self.rates:
            return None
        wanted = set(kinds)
        least: int | None = None
        for limit in self.limits:
            if limit.queue not in (None, queue) or (
                limit.kind is not None and limit.kind not in wanted
            ):
                continue
            if limit.partition_key is not None or (
                limit.kind is not None and wanted != {limit.kind}
            ):
                return None
            left = max(limit.limit - self.running.get(limit.bucket(None), 0), 0)
            least = left if least is None else min(least, left)
        return least

    def count(self, queue: str, kind: str, partition_key: str | None) -> None:
        """Count a job taken within `room`."""
        for limit in self.limits:
            if limit.covers(queue, kind, partition_key):
                bucket = limit.bucket(partition_key)
                self.running[bucket] = self.running.get(bucket, 0) + 1

    def exclusions(self, queue: str) -> Exclusions:
        """What is full now for a claim in `queue`, so its query skips those jobs
        instead of reading past them."""
        kinds: set[str] = set()
        partitions: set[str] = set()
        pairs: set[tuple[str, str]] = set()
        whole = keyed = False
        for limit in self.limits:
            if limit.queue is not None and limit.queue != queue:
                continue
            if limit.per_partition:
                full = {
                    key
                    for (scope, key), count in self.running.items()
                    if scope == limit.scope and key is not None and count >= limit.limit
                }
                if limit.kind is None:
                    partitions |= full
                    keyed = keyed or limit.limit == 0
                else:
                    pairs |= {(limit.kind, key) for key in full}
                    if limit.limit == 0:
                        pairs.add((limit.kind, EACH_PARTITION))
                continue
            if self.running.get(limit.bucket(None), 0) < limit.limit:
                continue
            if limit.kind is None and limit.partition_key is None:
                whole = True
            elif limit.partition_key is None:
                kinds.add(limit.kind or "")
            elif limit.kind is None:
                partitions.add(limit.partition_key)
            else:
                pairs.add((limit.kind, limit.partition_key))
        exhausted = frozenset(
            name for name, rate in self.rates.items() if self.started.get(name, 0) >= rate.limit
        )
        return Exclusions(
            whole, frozenset(kinds), frozenset(partitions), keyed, frozenset(pairs), exhausted
        )
