"""A worker's claim in its write: the due jobs of its kinds that fit its free
capacity, each with its handler; those past their start deadline recorded
expired instead (and, when a claim meets one, every other late pending job of
its queues and kinds, in bulk), so late jobs take no slot and never run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from headgate._domain.ids import fingerprint_of_text
from headgate._errors import StoreError
from headgate._logs import get_logger
from headgate._projections import JobRow
from headgate._runtime import job_units
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec
from headgate._runtime.job_units import Claim
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._store.port import Store, WriteTransaction

log = get_logger("headgate.workers")
EXPIRED_BATCH = 500
"""Late jobs read and recorded expired per statement."""
MAX_EXPIRED_PER_CLAIM = 5_000
"""The most late jobs one claim's transaction expires; the rest, at the next."""


def claim_due(
    transaction: WriteTransaction,
    capacity: Mapping[str, int],
    handlers: HandlerRegistry,
    worker_id: str,
    recorder: Recorder = NO_METRICS,
) -> list[tuple[Claim, HandlerSpec]]:
    """Claim the due jobs of the registered kinds that fit `capacity`, in this
    transaction, each with the handler that runs it. A claimed job past its start
    deadline is recorded expired instead of run; when the claim finds one, the
    other pending jobs past theirs are expired too, in bulk, and the claim is
    made again into the capacity the late ones took: late jobs take no slot and
    do not end the claim. (A claim that finds none, the common case, costs no
    read more.)"""
    now = transaction.now_ms
    timeouts = handlers.timeouts_ms()
    claimed = transaction.claim(capacity, timeouts, worker_id, now)
    rows = _runnable(transaction, claimed, recorder)
    if len(rows) < len(claimed):
        _expire_late(transaction, capacity, handlers, now, recorder)
        left = job_units.capacity_left(dict(capacity), Counter(row.queue for row in rows))
        if any(slots > 0 for slots in left.values()):
            again = transaction.claim(left, timeouts, worker_id, now)
            rows += _runnable(transaction, again, recorder)
    if not rows:
        return []
    fingerprints = {row.job_id: fingerprint_of_text(row.kind, row.payload) for row in rows}
    blamed = transaction.crash_blame(set(fingerprints.values()))
    taken: list[tuple[Claim, HandlerSpec]] = []
    for row in rows:
        spec = handlers.get(row.kind)
        assert spec is not None, "only the kinds of registered handlers are claimed"
        fingerprint = fingerprints[row.job_id]
        taken.append(
            (
                job_units.claimed(
                    row, spec, blamed=fingerprint if blamed.get(fingerprint) else None
                ),
                spec,
            )
        )
    return taken


def _runnable(
    transaction: WriteTransaction, rows: list[JobRow], recorder: Recorder
) -> list[JobRow]:
    """The claimed rows that can still start; the late ones recorded expired."""
    now = transaction.now_ms
    late = [row for row in rows if row.start_by_ms is not None and row.start_by_ms < now]
    if late:
        transaction.append_units([[job_units.expired(row)] for row in late])
        for row in late:
            _expired(row, now, recorder)
    return [row for row in rows if row.start_by_ms is None or row.start_by_ms >= now]


def _expire_late(
    transaction: WriteTransaction,
    capacity: Mapping[str, int],
    handlers: HandlerRegistry,
    now_ms: int,
    recorder: Recorder,
) -> None:
    """Record expired the pending jobs of these queues and kinds whose start
    deadline has passed, up to `MAX_EXPIRED_PER_CLAIM` in this transaction."""
    queues = [queue for queue, slots in capacity.items() if slots > 0]
    kinds = handlers.kinds()
    left = MAX_EXPIRED_PER_CLAIM
    while left > 0:
        late = transaction.late_jobs(queues, kinds, now_ms, min(EXPIRED_BATCH, left))
        if not late:
            return
        transaction.append_units([[job_units.expired(row)] for row in late])
        for row in late:
            _expired(row, now_ms, recorder)
        left -= len(late)


def _expired(row: JobRow, now_ms: int, recorder: Recorder) -> None:
    assert row.start_by_ms is not None
    recorder.job_expired(row.queue, row.kind)
    log.warning(
        "job expired: not started by its start deadline",
        job_id=row.job_id,
        kind=row.kind,
        queue=row.queue,
        late_ms=now_ms - row.start_by_ms,
        **job_units.row_origin_fields(row),
    )


def warn_of_kinds_nobody_serves(store: Store, kinds: frozenset[str]) -> None:
    """As workers start: say so when pending jobs wait for kinds with no handler here."""
    try:
        pending = store.reads.pending_work()
    except StoreError:
        return
    by_kind: dict[str, int] = {}
    for (_, kind), count in pending.items():
        by_kind[kind] = by_kind.get(kind, 0) + count
    orphans = sorted(kind for kind in by_kind if kind not in kinds)
    if orphans:
        log.warning(
            "pending jobs of kinds with no handler in this process wait for one",
            kinds=orphans,
            jobs=sum(by_kind[kind] for kind in orphans),
        )
