"""The actors: thin shells around the lease, the due read and the tick processor.

SchedulerActor (one per runtime) holds or waits for the `scheduler` lease.
Holding it, it reads a bounded batch of due schedules and sends each shard a
TickDue with its share and the lease term; it sweeps again as soon as all
shards report back while a backlog remains, and otherwise sleeps until just
before the earliest due instant (or its next renewal), when it sends the
schedules due at that instant ahead of time. Every dispatch also sets its
ticker for the next renewal, so the lease is renewed while batches run: no
batch and no hook runs on this actor's thread.

ScheduleShard actors (a fixed pool, schedule ids hashed onto them) plan their
share and run the before-enqueue hooks (each call on a helper thread, waited for
at most its budget: see hook_runner). The shards of one sweep then group
commit: the last to finish planning writes every shard's ticks in one
transaction fenced by the term (the store serialises writers anyway, so one
transaction per sweep loses nothing and saves a commit per shard), committing
at the instant the ticks are due.

The lease is kept by `lease_keeping.LeaseKeeping`, the rule the maintenance
duties' keeper (`duties.DutyKeeper`) holds its own lease by.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

import pykka

from headgate._clock import Clock
from headgate._errors import LeaseLost, ProjectionsRebuilding, StoreError
from headgate._logs import get_logger
from headgate._projections import ScheduleRow
from headgate._runtime.config import SCHEDULER_LEASE, RuntimeConfig
from headgate._runtime.hook_runner import HooksInterrupted
from headgate._runtime.instants import next_lead_ms
from headgate._runtime.lease_keeping import LeaseKeeping, LeaseTiming, LeaseWords
from headgate._runtime.planner import PreparedBatch
from headgate._runtime.tick_batch import TickProcessor
from headgate._runtime.ticker import Ticker
from headgate._store.port import Fence, Lease, LeaseHolder, Store

log = get_logger("headgate.scheduler")
SCHEDULER_WORDS: Final = LeaseWords(
    prefix="",
    acquired="lease acquired; this process is the scheduler",
    untrusted="lease renewal came back too late to trust; not firing ticks under it",
)

INSTANT_SWEEPS: Final = 10
"""How many sweeps' worth of schedules due at one instant are sent ahead of it
together (10,000 at the default sweep_batch): ticks at one instant are written
in one transaction, committed at it; beyond this many, the rest follow it."""


@dataclass(frozen=True)
class Wake:
    """Time to look again: a deadline passed, or something changed."""

    pending: threading.Event | None = None
    """Set by the sender while this wake waits in the inbox, cleared as it is
    taken: a sender that finds it set sends none (`WakeSignal`)."""


class WakeSignal:
    """Wakes the scheduler for a change (a schedule put, a run requested),
    never more than one wake waiting in its inbox: a burst of puts costs the
    scheduler one look at the store, not one per put. The look happens after
    the last of them, since a wake is marked taken before the look begins."""

    def __init__(self) -> None:
        self._pending = threading.Event()

    def send(self, scheduler: pykka.ActorRef[Any]) -> None:
        if self._pending.is_set():
            return
        self._pending.set()
        try:
            scheduler.tell(Wake(self._pending))
        except pykka.ActorDeadError:
            self._pending.clear()  # nobody will take it
            raise


class GroupCommit:
    """Collects one sweep's prepared shares; the last shard to arrive writes them all."""

    def __init__(self, parties: int) -> None:
        self._lock = threading.Lock()
        self._waiting_for = parties
        self._batch = PreparedBatch()

    def arrive(self, share: PreparedBatch) -> PreparedBatch | None:
        """The whole sweep for the last arrival (the one to commit it), else None."""
        with self._lock:
            self._batch.plans.extend(share.plans)
            self._batch.deferred += share.deferred
            self._waiting_for -= 1
            return self._batch if self._waiting_for == 0 else None


@dataclass(frozen=True)
class TickDue:
    rows: tuple[ScheduleRow, ...]
    term: int
    reply_to: pykka.ActorRef[SchedulerActor]
    """Told BatchDone when the batch is finished."""
    group: GroupCommit
    at_ms: int | None = None
    """The instant these ticks are due when sent ahead of it; None for "due now"."""


@dataclass(frozen=True)
class BatchDone:
    term: int
    """The term the batch was sent under: a loss it reports is that term's. The
    scheduler may have taken the lease again under a newer term meanwhile (the
    process stalled past the TTL while the batch waited for its instant or a
    hook), and that term is not lost."""
    progressed: bool
    lease_lost: bool
    postponed_at_ms: int | None = None
    """Set when a batch sent ahead of its instant was abandoned before it."""
    late_ms: int | None = None
    """For a batch sent ahead of its instant and committed: how long after the
    instant it committed (0 when on time)."""


@dataclass(frozen=True)
class RunPending:
    """Fire everything due now, then set `done` (True in `fired` if this runtime could)."""

    done: threading.Event
    fired: list[bool] = field(default_factory=list)


def shard_of(schedule_id: str, shards: int) -> int:
    """A stable shard: the same schedule always lands on the same actor."""
    return zlib.crc32(schedule_id.encode()) % shards


class ScheduleShard(pykka.ThreadingActor):
    use_daemon_thread = True  # see SchedulerActor

    def __init__(self, processor: TickProcessor) -> None:
        super().__init__()
        self._processor = processor

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, TickDue):
            return
        share = PreparedBatch()
        try:
            share = self._processor.prepare(message.rows, message.at_ms)
        except HooksInterrupted:
            pass  # stopping: nothing of this share is written, and it stays due
        except Exception:
            log.exception("schedule batch could not be planned", schedules=len(message.rows))
        batch = message.group.arrive(share)
        if batch is None:
            _reply(message, BatchDone(message.term, progressed=False, lease_lost=False))
            return
        lost, progressed, postponed, late = False, False, None, None
        try:
            fence = Fence(SCHEDULER_LEASE, message.term)
            report = self._processor.commit(batch, fence, message.at_ms)
            progressed = report.progressed
            if report.postponed:
                postponed = message.at_ms
            if message.at_ms is not None and report.committed_at_ms is not None:
                late = max(report.committed_at_ms - message.at_ms, 0)
            self._processor.finish(report)
        except LeaseLost:
            lost = True
            log.warning("lease lost; batch discarded, nothing written", term=message.term)
        except ProjectionsRebuilding as paused:
            log.info("scheduler paused while projections are rebuilt", detail=str(paused))
        except Exception:
            log.exception("schedule batch failed", schedules=len(batch.plans))
        finally:
            _reply(message, BatchDone(message.term, progressed, lost, postponed, late))


def _reply(message: TickDue, done: BatchDone) -> None:
    # The scheduler may have stopped while the batch ran; then nobody is waiting.
    with contextlib.suppress(pykka.ActorDeadError):
        message.reply_to.tell(done)


class SchedulerActor(pykka.ThreadingActor):
    use_daemon_thread = True
    """The actors never keep the host's interpreter alive: a host that exits
    without stopping Headgate has it stopped at exit (headgate._app)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        config: RuntimeConfig,
        processor: TickProcessor,
        holder: LeaseHolder,
    ) -> None:
        super().__init__()
        self._reads = store.reads
        self._clock = clock
        self._config = config
        self._processor = processor
        self._lease_keeping = LeaseKeeping(
            store.leases,
            SCHEDULER_LEASE,
            holder,
            clock,
            LeaseTiming(config.lease_ttl_ms),
            log=log,
            words=SCHEDULER_WORDS,
        )
        self._lease: Lease | None = None
        """The lease as this actor last kept it: the term its sweeps are sent under."""
        self._shards: list[pykka.ActorRef[ScheduleShard]] = []
        self._in_flight = 0
        self._sweep_term: int | None = None
        """The term the last sweep was sent under."""
        self._progressed = False
        self._waiters: list[RunPending] = []
        self._not_ahead_of_ms = 0
        """Instants up to this one are fired when due, not ahead (an early try was abandoned)."""
        self._postponed = False
        """The last batch was only postponed: nothing failed, its instant is still to come."""
        self._lead_ms = config.prepare_ahead_ms
        """How long before an instant its schedules are sent (`instants.next_lead_ms`)."""
        self._ticker = Ticker(clock, lambda: self.actor_ref.tell(Wake()))

    def on_start(self) -> None:
        self._shards = [ScheduleShard.start(self._processor) for _ in range(self._config.shards)]
        self._ticker.start()
        self._cycle()

    def on_stop(self) -> None:
        self._ticker.stop()
        self._processor.cancel()
        for shard in self._shards:
            shard.stop(block=True)
        self._processor.close()  # no batch is left to queue after-hooks
        held = self._lease is not None
        self._lease_keeping.release()
        self._notify_waiters(fired=held)

    def on_receive(self, message: Any) -> None:
        if isinstance(message, Wake):
            if message.pending is not None:
                message.pending.clear()
            self._cycle()
        elif isinstance(message, BatchDone):
            self._in_flight -= 1
            self._progressed = self._progressed or message.progressed
            if message.lease_lost:
                self._forget_lost_term(message.term)
            if message.postponed_at_ms is not None:
                self._not_ahead_of_ms = max(self._not_ahead_of_ms, message.postponed_at_ms)
                self._postponed = True
            if message.late_ms is not None:
                self._lead_ms = next_lead_ms(
                    self._lead_ms, message.late_ms, self._config.prepare_ahead_ms
                )
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
            # A claim re-reads the store's clock, which may have stepped: go on
            # from the corrected time, not the one read before.
            now = self._clock.now_ms()
            if self._in_flight:
                self._ticker.wake_at(self._renewal_due_ms(now))
                return
            if self._lease is None:
                self._notify_waiters(fired=False)
                self._ticker.wake_at(now + self._config.renew_every_ms)
                return
            postponed, self._postponed = self._postponed, False
            retaken = self._sweep_term != self._lease.term
            if after_batch and not self._progressed and not postponed and not retaken:
                # Nothing could be recorded (the store is failing, a rebuild is
                # running): do not spin; look again later. A sweep sent under a
                # term since replaced proves nothing of the kind: its ticks are
                # still due, and fire under the new term now.
                self._ticker.wake_at(now + self._config.renew_every_ms)
                return
            if self._dispatch(now):
                return
            self._notify_waiters(fired=True)
            self._prepare_or_sleep(now)
        except StoreError:
            log.warning("store unavailable; the scheduler will retry", exc_info=True)
            self._ticker.wake_at(now + self._config.renew_every_ms)

    def _forget_lost_term(self, term: int) -> None:
        """A batch sent under `term` found it lost: forget the lease if it is still
        that term; a newer one, taken again since the batch was sent, stays held."""
        if self._lease is None:
            return
        if self._lease_keeping.forget_lost_term(term):
            self._lease = None
            return
        log.info(
            "a batch sent under an earlier term was discarded; its ticks fire under this one",
            batch_term=term,
            term=self._lease.term,
        )

    def _renewal_due_ms(self, now: int) -> int:
        """When the lease is next renewed (or, without one, claimed again)."""
        return self._lease_keeping.renewal_due_ms(now)

    def _keep_lease(self, now: int) -> None:
        self._lease = self._lease_keeping.keep(now)

    def _dispatch(self, due_by_ms: int, at_ms: int | None = None) -> bool:
        """Send the schedules due by `due_by_ms` to their shards; False when there are none.

        `at_ms` marks a sweep sent ahead of its instant: it takes up to
        INSTANT_SWEEPS sweeps' worth of the schedules due then, so that they all
        commit in one transaction at the instant. Sent a sweep at a time, only
        the first would: each other one would be planned and written after it,
        one write later than the one before.
        """
        assert self._lease is not None
        limit = self._config.sweep_batch * (1 if at_ms is None else INSTANT_SWEEPS)
        rows = self._reads.due_schedules(due_by_ms, limit)
        if not rows:
            return False
        by_shard: dict[int, list[ScheduleRow]] = defaultdict(list)
        for row in rows:
            by_shard[shard_of(row.schedule_id, self._config.shards)].append(row)
        self._progressed = False
        self._postponed = False
        self._sweep_term = self._lease.term
        self._in_flight = len(by_shard)
        group = GroupCommit(len(by_shard))
        for index, share in by_shard.items():
            self._shards[index].tell(
                TickDue(tuple(share), self._lease.term, self.actor_ref, group, at_ms)
            )
        # The batch may take long (a slow store, a hook): be woken to renew meanwhile.
        self._ticker.wake_at(self._renewal_due_ms(self._clock.now_ms()))
        return True

    def _prepare_or_sleep(self, now: int) -> None:
        """Send the next instant's schedules ahead of it when it is close (within the
        lead: `prepare_ahead_ms`, or more after a batch that committed late); else sleep."""
        renew_at = now + self._config.renew_every_ms
        earliest = self._reads.earliest_due_at()
        if earliest is None:
            self._ticker.wake_at(renew_at)
            return
        if earliest <= now:
            # Made due since this cycle's sweep (a resume keeps its old phase): the
            # next sweep fires it as due now, under its missed-run policy, never
            # as an instant prepared ahead.
            self._ticker.wake_at(now)
            return
        ahead = self._lead_ms
        if earliest > self._not_ahead_of_ms:
            if earliest - now <= ahead and self._dispatch(earliest, at_ms=earliest):
                return
            self._ticker.wake_at(min(earliest - ahead, renew_at))
            return
        self._ticker.wake_at(min(earliest, renew_at))

    def _notify_waiters(self, *, fired: bool) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.fired.append(fired)
            waiter.done.set()
