"""The actors: thin shells around the lease, the due read and the tick processor.

SchedulerActor (one per runtime) holds or waits for the `scheduler` lease.
Holding it, it reads a bounded batch of due schedules and sends each shard a
TickDue with its share and the lease term; it sweeps again as soon as all
shards report back while a backlog remains, and otherwise sleeps until the
earliest due time or its next renewal. ScheduleShard actors (a fixed pool,
schedule ids hashed onto them) fire their share with the TickProcessor, every
write fenced by that term.
"""

from __future__ import annotations

import threading
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pykka
import structlog

from headgate.clock import Clock
from headgate.errors import LeaseLost, ProjectionsRebuilding, StoreError
from headgate.runtime.config import SCHEDULER_LEASE, RuntimeConfig
from headgate.runtime.tick_batch import TickProcessor
from headgate.runtime.ticker import Ticker
from headgate.store.compaction import compact
from headgate.store.event_store import EventStore, Fence
from headgate.store.leases import Claimant, Lease, LeaseStore
from headgate.store.read_model import ReadModel
from projections import ScheduleRow

log = structlog.get_logger("headgate.scheduler")


@dataclass(frozen=True)
class Wake:
    """Time to look again: a deadline passed, or something changed."""


@dataclass(frozen=True)
class TickDue:
    rows: tuple[ScheduleRow, ...]
    term: int
    reply_to: Any
    """The scheduler's ActorRef, told BatchDone when the batch is finished."""


@dataclass(frozen=True)
class BatchDone:
    progressed: bool
    lease_lost: bool


@dataclass(frozen=True)
class RunPending:
    """Fire everything due now, then set `done` (True in `fired` if this runtime could)."""

    done: threading.Event
    fired: list[bool] = field(default_factory=list)


def shard_of(schedule_id: str, shards: int) -> int:
    """A stable shard: the same schedule always lands on the same actor."""
    return zlib.crc32(schedule_id.encode()) % shards


class ScheduleShard(pykka.ThreadingActor):
    def __init__(self, processor: TickProcessor) -> None:
        super().__init__()
        self._processor = processor

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, TickDue):
            return
        lost, progressed = False, False
        try:
            report = self._processor.fire(message.rows, Fence(SCHEDULER_LEASE, message.term))
            progressed = report.progressed
        except LeaseLost:
            lost = True
            log.warning("lease lost; batch discarded, nothing written", term=message.term)
        except ProjectionsRebuilding as paused:
            log.info("scheduler paused while projections are rebuilt", detail=str(paused))
        except Exception:
            log.exception("schedule batch failed", schedules=len(message.rows))
        finally:
            message.reply_to.tell(BatchDone(progressed, lost))


class SchedulerActor(pykka.ThreadingActor):
    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        config: RuntimeConfig,
        processor: TickProcessor,
        claimant: Claimant,
    ) -> None:
        super().__init__()
        self._store = store
        self._reads = ReadModel(store.engine)
        self._leases = LeaseStore(store)
        self._clock = clock
        self._config = config
        self._processor = processor
        self._claimant = claimant
        self._lease: Lease | None = None
        self._renew_due_ms = 0
        self._shards: list[Any] = []
        self._in_flight = 0
        self._progressed = False
        self._waiters: list[RunPending] = []
        self._last_compaction_ms: int | None = None
        self._ticker = Ticker(clock, lambda: self.actor_ref.tell(Wake()))

    def on_start(self) -> None:
        self._shards = [ScheduleShard.start(self._processor) for _ in range(self._config.shards)]
        self._ticker.start()
        self._cycle()

    def on_stop(self) -> None:
        self._ticker.stop()
        for shard in self._shards:
            shard.stop(block=True)
        if self._lease is not None:
            try:
                self._leases.release(SCHEDULER_LEASE, self._claimant.holder, self._lease.term)
                log.info("lease released", term=self._lease.term)
            except StoreError:
                log.warning("could not release the lease; it will expire", exc_info=True)
        self._notify_waiters(fired=self._lease is not None)

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Wake):
            self._cycle()
        elif isinstance(message, BatchDone):
            self._in_flight -= 1
            self._progressed = self._progressed or message.progressed
            if message.lease_lost:
                self._lease = None
            if self._in_flight == 0:
                self._cycle(after_batch=True)
        elif isinstance(message, RunPending):
            self._waiters.append(message)
            self._cycle()

    def _cycle(self, *, after_batch: bool = False) -> None:
        now = self._clock.now_ms()
        try:
            # Renewal never waits for batches in flight: a long batch must not
            # let the lease lapse under it.
            self._keep_lease(now)
            if self._in_flight:
                self._ticker.wake_at(self._renew_due_ms)
                return
            if self._lease is None:
                self._notify_waiters(fired=False)
                self._ticker.wake_at(now + self._config.renew_every_ms)
                return
            if after_batch and not self._progressed:
                # Nothing could be recorded (the store is failing, a rebuild is
                # running, the lease was lost): do not spin; look again later.
                self._ticker.wake_at(now + self._config.renew_every_ms)
                return
            self._maybe_compact(now)
            if self._dispatch(now):
                return
            self._notify_waiters(fired=True)
            self._sleep_until_next(now)
        except StoreError:
            log.warning("store unavailable; the scheduler will retry", exc_info=True)
            self._ticker.wake_at(now + self._config.renew_every_ms)

    def _keep_lease(self, now: int) -> None:
        lease = self._lease
        if (
            lease is not None
            and now < lease.expires_at_ms - self._config.lease_ttl_ms + self._config.renew_every_ms
        ):
            return
        current_term = lease.term if lease is not None else None
        acquired = self._leases.acquire(
            SCHEDULER_LEASE, self._claimant, self._config.lease_ttl_ms, current_term
        )
        if acquired is not None and (lease is None or acquired.term != lease.term):
            log.info("lease acquired; this process is the scheduler", term=acquired.term)
        elif acquired is None and lease is not None:
            log.warning("lease lost to another process", term=lease.term)
        self._lease = acquired
        if (
            self._lease is not None
            and now >= self._lease.expires_at_ms - self._config.trust_margin_ms
        ):
            self._lease = None

    def _dispatch(self, now: int) -> bool:
        """Send due schedules to their shards; False when nothing is due."""
        assert self._lease is not None
        rows = self._reads.due_schedules(now, self._config.sweep_batch)
        if not rows:
            return False
        by_shard: dict[int, list[ScheduleRow]] = defaultdict(list)
        for row in rows:
            by_shard[shard_of(row.schedule_id, self._config.shards)].append(row)
        self._progressed = False
        self._in_flight = len(by_shard)
        for index, share in by_shard.items():
            self._shards[index].tell(TickDue(tuple(share), self._lease.term, self.actor_ref))
        return True

    def _sleep_until_next(self, now: int) -> None:
        renew_at = now + self._config.renew_every_ms
        earliest = self._reads.earliest_due_at()
        self._ticker.wake_at(renew_at if earliest is None else min(earliest, renew_at))

    def _maybe_compact(self, now: int) -> None:
        if self._last_compaction_ms is None:
            self._last_compaction_ms = now
        if now - self._last_compaction_ms < self._config.compaction_interval_ms:
            return
        self._last_compaction_ms = now
        report = compact(self._store)
        log.info(
            "log compacted",
            streams=report.streams_examined,
            events_deleted=report.events_deleted,
            jobs_removed=report.jobs_removed,
        )

    def _notify_waiters(self, *, fired: bool) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.fired.append(fired)
            waiter.done.set()
