"""Runs the jobs of this process: claims, handlers, ends, heartbeat, rescue.

One dispatcher thread does all the store work, so every write it makes is
batched: each turn of its loop records the attempts that ended since the
last turn (succeeded, failed, timed out) and claims up to the free capacity
of each queue, oldest run_at first, in one write transaction. Handlers run
on a pool of threads (sync) or one event loop (async), and hand their
outcome back to the dispatcher, which they wake.

* Wake-ups: a job enqueued due in this process is handed to the pool once
  committed (`enqueued_here`), which claims it at once, asking the store
  nothing first; other processes' enqueues arrive by NOTIFY on PostgreSQL,
  and on SQLite as a change of the file's data version (watched every few
  milliseconds). Between them it sleeps, on its clock, until the next
  instant it knows a job of its own becomes claimable: a job it snoozed or
  retried, and, after each claim that left slots free, what the store says
  (`next_claimable_at`: the next run_at, a used-up rate class freeing a
  start). A concurrency limit freeing has no instant: the worker whose end
  frees a limited job's slot notifies its queue. `poll_interval_ms` is the
  backstop behind all of these (and the only wake-up with `listen=False`
  across processes).
* Handlers run as `attempts.Attempt`s, as in `drain()`: the runner holds
  each to its deadline (timed out, retried per policy; `job.cancelled` set,
  an async handler cancelled, a process handler's child killed) and decides
  what is recorded. A handler whose code runs on past its deadline (a sync
  one's thread cannot be killed) keeps its job running, counted as overdue in
  the heartbeat, until it returns; only then is its timeout recorded and the
  job retried. So a fleet-wide concurrency limit is never exceeded by it, and
  the job never runs twice at once; the pool's own slot is given back (a
  thread is added), so a stuck handler does not eat the pool. Whatever it
  returns is refused.
* Heartbeat: renewed every quarter of its TTL, with this process's identity
  on its machine (`local_processes`); the rescuer takes back the jobs of a
  worker whose heartbeat expired, or, on the same machine, whose process is
  certainly dead. It runs before the first claim, so a restarted worker
  counts its predecessor's crash, and runs its orphaned jobs, at once. One
  that fails to renew for its whole TTL stops claiming until it can again.
* Stop: no more claims; running handlers get `shutdown_timeout_s` to end;
  what is still running is released (no attempt or crash counted) so
  another worker takes it at once; the heartbeat row goes.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from headgate._clock import Clock
from headgate._domain.events import JobAttemptFailed, JobReleased, JobSnoozed
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.job_rules import Redactor, unredacted
from headgate._domain.limits import ConcurrencyLimit
from headgate._errors import ConcurrencyConflict, StoreError
from headgate._logs import get_logger
from headgate._model import DrainSummary
from headgate._projections import JobRow
from headgate._runtime import job_units
from headgate._runtime.attempts import Attempt, AttemptRules, AttemptRunner, Outcome, end_append
from headgate._runtime.child_processes import ChildPool
from headgate._runtime.config import DEFAULT_CAPACITY, WorkerConfig
from headgate._runtime.executor import LoopRunner, ThreadRunner
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec
from headgate._runtime.job_units import Claim, origin_fields
from headgate._runtime.local_processes import LocalProcesses
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import (
    JOBS_ENDED,
    JOBS_TAKEN,
    SLOTS_FREED,
    Claimant,
    Listener,
    Store,
    StreamAppend,
    WorkerBeat,
    WriteTransaction,
)

log = get_logger("headgate.workers")
CHILD_START_WAIT_S = 10.0
"""How long start() waits for the first child of process handlers to be ready, so
that the first attempts' timeouts are not spent starting one."""
SCHEDULER_CHECK_EVERY_MS = 15_000
"""How often a worker looks whether anybody fires the ticks."""
SCHEDULER_SAID_EVERY_MS = 600_000
"""How often it repeats that nobody does, while nobody does."""
MAX_CLAIMED_LATELY = 1_024
"""Claimed job ids a worker remembers, to drop a hand-over that came after its claim."""
MAX_DUE_LATER = 1_000
"""Instants a worker keeps to wake at; past it, it keeps the earliest half."""
STOP_WORD_EVERY_S = 5.0
"""How often a stop that waits for running jobs says so."""
MAYBE_TAKEN_EVERY_MS = 50
"""The least time between two looks at the running jobs for a commit that may
have cancelled one (SQLite's wake-ups do not say): its handler is told within
about this much of the cancel."""


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


@dataclass
class _HandOvers:
    """What tells a worker to claim with no read first."""

    jobs: set[str] = field(default_factory=set)
    """Jobs enqueued in this process, due and committed, not claimed yet."""
    claimed_lately: dict[str, None] = field(default_factory=dict)
    """The ids of the latest claims (an ordered set): a job handed after its
    claim (the enqueue's notification woke the worker first) is not looked for
    again."""
    notified: bool = False
    """A queue of ours was notified while no hand-over waited for its claim (then
    the notification may be the hand-over's own, and a read decides)."""


def worker_identity(prefix: str = "worker") -> Claimant:
    """A worker's identity: one per process start, never a bare hostname."""
    host = socket.gethostname()
    return Claimant(f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}", host, os.getpid())


RunSettled = Callable[[Claim, object], None]
"""Told of each attempt end a worker recorded: its claim and its event."""


def _nobody_told(claimed: Claim, end: object) -> None:
    """No one to tell of attempt ends."""


class WorkerPool:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        handlers: HandlerRegistry,
        config: WorkerConfig,
        identity: Claimant | None = None,
        *,
        recorder: Recorder = NO_METRICS,
        processes: LocalProcesses | None = None,
        redact: Redactor = unredacted,
        scheduler_check: Callable[[], tuple[str, str]] | None = None,
        settled: RunSettled = _nobody_told,
    ) -> None:
        """`redact`: the host's redaction of error texts and tracebacks;
        `scheduler_check`: whether anybody fires the ticks (its state, `ok` or
        not, and what that means), asked every SCHEDULER_CHECK_EVERY_MS;
        `settled`: told of each recorded attempt end (`ScheduleAlerts.run_settled`)."""
        self._settled = settled
        self._scheduler_check = scheduler_check
        self._scheduler_state = "ok"
        self._next_scheduler_check_ms = 0
        self._scheduler_said_ms = 0
        self._store = store
        self._processes = processes if processes is not None else LocalProcesses()
        self._recorder = recorder
        self._clock = clock
        self._handlers = handlers
        self._config = config
        self.identity = identity or worker_identity()
        self.capacity: dict[str, int] = dict(
            config.queues
            if config.queues is not None
            else {queue: DEFAULT_CAPACITY for queue in handlers.by_queue()}
        )
        self._runs: dict[str, Attempt] = {}
        """Attempts whose end is not recorded yet, by job."""
        self._overrunning: set[Attempt] = set()
        """Attempts whose timeout is recorded while their handler still runs: each
        holds a thread until it returns."""
        self._lock = threading.Lock()
        self._children = ChildPool(config.child_limits, handlers.child_modules())
        self._attempts = AttemptRunner(
            clock,
            AttemptRules.of(config, redact),
            on_end=self._attempt_ended,
            recorder=recorder,
            children=self._children,
        )
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._give_back_now = threading.Event()
        self._threads = ThreadRunner("headgate-job")
        self._loop = LoopRunner("headgate-async-jobs")
        self._listener: Listener | None = None
        self._rescuer = Rescuer(
            store, clock, self.identity, config, recorder=recorder, processes=self._processes
        )
        self._started_at_ms = 0
        self._last_beat_ms: int | None = None
        self._next_beat_ms = 0
        self._next_rescue_ms = 0
        self._next_check_ms = 0
        self._check_asked = threading.Event()
        """Look at the running jobs at the next turn: one was cancelled."""
        self._check_maybe = False
        """Something was committed, maybe a cancel (SQLite cannot say what)."""
        self._checked_at_ms = 0
        self._hand_overs = _HandOvers()
        self._limits: list[ConcurrencyLimit] = []
        """The fleet's concurrency limits, as read at the last heartbeat."""
        self._due_later: list[int] = []
        """When jobs this worker knows of become due (a heap): the earliest scheduled
        job it read, those it snoozed or retried, a rate class's next free start."""
        self._due_now = False
        self.stats = PoolStats()
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="headgate-workers", daemon=True
        )

    # lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._started_at_ms = self._clock.now_ms()
        self._threads.ensure(sum(self.capacity.values()))
        self._children.warm(self._handlers.child_slots(self.capacity), wait_s=CHILD_START_WAIT_S)
        self._attempts.start()
        if self._config.listen:
            self._listener = self._store.listen(self._on_enqueued)
        self._warn_of_kinds_nobody_serves()
        self._dispatcher.start()
        log.info(
            "workers started",
            worker_id=self.identity.holder,
            queues=dict(self.capacity),
            kinds=sorted(self._handlers.kinds()),
        )

    def poke(self, *, due_now: bool = False) -> None:
        """Something may be due: look now. `due_now`: a job was just enqueued in
        this process to run now, so the next turn claims without looking first."""
        if due_now:
            self._due_now = True
        self._wake.set()

    def enqueued_here(self, job_id: str, queue: str, kind: str) -> None:
        """A job was enqueued in this process, due now, and committed: the next
        turn claims at once, without reading first whether anything is due."""
        if queue not in self.capacity or self._handlers.get(kind) is None:
            return
        with self._lock:
            if job_id not in self._hand_overs.claimed_lately:
                self._hand_overs.jobs.add(job_id)
        self._wake.set()

    def check_now(self) -> None:
        """A job may have been taken from this worker (an operator or a newer tick
        cancelled it): look at the running jobs now, not at the next heartbeat."""
        self._check_asked.set()
        self._wake.set()

    def give_back_now(self) -> None:
        """Stop waiting for running handlers (a second Ctrl-C): `stop` gives their
        jobs back at once, as at the end of its grace. Safe from a signal handler."""
        self._give_back_now.set()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop claiming, let running handlers finish for up to the shutdown timeout
        (or until `give_back_now`), give back the rest, and remove the heartbeat.
        Returns within the timeout and a second; says what it waits for."""
        grace = self._config.shutdown_timeout_s if timeout_s is None else timeout_s
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + grace
        next_word = time.monotonic()
        while time.monotonic() < deadline and self._busy() and not self._give_back_now.is_set():
            if time.monotonic() >= next_word:
                self._say_what_stop_waits_for(deadline - time.monotonic())
                next_word = time.monotonic() + STOP_WORD_EVERY_S
            self._give_back_now.wait(0.01)
        if self._give_back_now.is_set() and self._busy():
            log.warning("giving running jobs back now, unfinished", running=self.running)
        self._stopped.set()
        self._wake.set()
        self._dispatcher.join(timeout=max(deadline - time.monotonic(), 0) + 1.0)
        if self._listener is not None:
            self._listener.close()
        self._attempts.stop()
        self._threads.close()
        self._loop.close()

    def _say_what_stop_waits_for(self, left_s: float) -> None:
        with self._lock:
            running = [attempt.claim for attempt in self._runs.values() if not attempt.settled]
        if running:
            log.info(
                "stopping: waiting for running jobs to finish, then giving back the rest",
                running=len(running),
                kinds=sorted({claim.kind for claim in running}),
                job_ids=[claim.job_id for claim in running[:10]],
                seconds_left=round(left_s),
            )

    @property
    def running(self) -> int:
        with self._lock:
            return sum(1 for attempt in self._runs.values() if not attempt.overdue)

    # the dispatcher --------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            final = self._stopped.is_set()
            try:
                self._turn(final=final)
            except Exception:
                log.exception("worker turn failed; it goes on", worker_id=self.identity.holder)
                self._wake.wait(0.5)
            if final:
                self._leave()
                return
            self._clock.sleep_until(self._wake_at_ms(), self._wake)
            self._wake.clear()

    def _turn(self, *, final: bool) -> None:
        now = self._clock.now_ms()
        if now >= self._next_beat_ms:
            self._beat(now)
        if self._check_asked.is_set() or now >= self._next_check_ms or self._maybe_taken(now):
            self._check_asked.clear()  # before the reads: one asked meanwhile looks again
            self._check_maybe = False
            self._notice_lost_jobs()
            self._checked_at_ms = now
            self._next_check_ms = now + self._config.heartbeat_every_ms
        if now >= self._next_rescue_ms and not self._stopping.is_set():
            self._rescuer.run_once()  # before claiming: the dead's jobs are claimable now
            self._next_rescue_ms = now + self._config.rescue_interval_ms
        if now >= self._next_scheduler_check_ms:
            self._check_scheduler(now)
        claiming = not self._stopping.is_set() and self._heartbeat_fresh(now)
        self._write(claiming=claiming, release=final)

    def _check_scheduler(self, now_ms: int) -> None:
        """Say so when ticks are due and nobody fires them (workers alone run no
        scheduler): at the change, again every SCHEDULER_SAID_EVERY_MS while it
        lasts, and when ticks fire again."""
        self._next_scheduler_check_ms = now_ms + SCHEDULER_CHECK_EVERY_MS
        if self._scheduler_check is None:
            return
        try:
            state, message = self._scheduler_check()
        except StoreError:
            return
        was, self._scheduler_state = self._scheduler_state, state
        if state == "ok":
            if was != "ok":
                log.info("ticks fire again", worker_id=self.identity.holder)
            return
        if was != state or now_ms - self._scheduler_said_ms >= SCHEDULER_SAID_EVERY_MS:
            self._scheduler_said_ms = now_ms
            log.warning(message, scheduler=state, worker_id=self.identity.holder)

    def _maybe_taken(self, now_ms: int) -> bool:
        """Woken by a commit that may have cancelled a job running here, and not
        looked within `MAYBE_TAKEN_EVERY_MS`: every commit wakes a SQLite store's
        workers, and each look reads every running job."""
        if not self._check_maybe:
            return False
        if self.running == 0:  # nothing here to take: no look, and no wake for one
            self._check_maybe = False
            return False
        return now_ms - self._checked_at_ms >= MAYBE_TAKEN_EVERY_MS

    def _wake_at_ms(self) -> int:
        """The next thing due: a poll, a heartbeat, a rescue, or a job scheduled
        for later (an attempt that ends, or times out, wakes it sooner)."""
        now = self._clock.now_ms()
        due = [
            now + self._config.poll_interval_ms,
            self._next_beat_ms,
            self._next_rescue_ms,
        ]
        if self._check_maybe:
            due.append(self._checked_at_ms + MAYBE_TAKEN_EVERY_MS)
        if self._due_later:
            due.append(max(self._due_later[0], now))
            while self._due_later and self._due_later[0] <= now:
                heapq.heappop(self._due_later)  # due now: this wake claims it
        return max(min(due), now + 1)

    def _write(self, *, claiming: bool, release: bool) -> None:
        """One transaction: record the attempts that ended, and claim into the
        free capacity (or, stopping, give back what still runs)."""
        ended, released = self._ends_to_record(release=release)
        crashed = [attempt for attempt, outcome in ended if outcome.crashed is not None]
        ended = [(attempt, outcome) for attempt, outcome in ended if outcome.crashed is None]
        free = self._free_capacity() if claiming else {}
        with self._lock:
            handed = set(self._hand_overs.jobs)  # committed before the claim below begins
        if (
            not ended
            and not released
            and not crashed
            and not self._worth_claiming(free, handed=bool(handed))
        ):
            return
        now = self._clock.now_ms()
        holder = self.identity.holder
        ends = [
            (attempt, end_append(attempt, outcome, holder, now), outcome.ended_at_ms)
            for attempt, outcome in ended
        ]
        ends += [(attempt, job_units.released(attempt.claim, holder), now) for attempt in released]
        try:
            with self._store.log.write() as transaction:
                results = transaction.append_units(
                    [job_units.end_unit(attempt.claim, append) for attempt, append, _ in ends]
                )
                if any(
                    attempt.spec.awaitable and job_units.ends_job(append)
                    for attempt, append, _ in ends
                ):
                    transaction.notify_enqueued([JOBS_ENDED])
                recorded = self._record_crashes(transaction, crashed) if crashed else set()
                claims = self._claim(transaction, free) if any(free.values()) else []
                claimed_at = transaction.now_ms
                freed = self._limited_queues([attempt for attempt, _, _ in ends] + crashed)
                if freed:
                    transaction.notify_enqueued(freed)
        except StoreError:
            self._rescuer.forget_crashes()
            log.warning(
                "could not record jobs' ends; trying again", ended=len(ended), exc_info=True
            )
            return
        except BaseException:
            self._rescuer.forget_crashes()
            raise
        for (attempt, append, ended_at), result in zip(ends, results, strict=True):
            self._settle(attempt, append, result, ended_at_ms=ended_at)
        if crashed:
            self._settle_crashes(crashed, recorded)
        for claimed, spec in claims:
            self._start(claimed, spec)
        if claims:
            time.sleep(0)  # the GIL to the handlers just woken, before this thread's bookkeeping
        left_free = len(claims) < sum(free.values())
        self._forget_handed([claimed for claimed, _ in claims], handed if left_free else set())
        for due_ms in _due_again_ms([append for _, append, _ in ends]):
            self._look_again_at(due_ms)
        if any(free.values()) and left_free:
            self._look_again_at(self._next_claimable_at(free, claimed_at))

    def _forget_handed(self, claims: Sequence[Claim], passed_over: set[str]) -> None:
        """The handed jobs now claimed, and those a claim with slots left passed
        over (another worker's now, or held by a limit): not looked for again."""
        with self._lock:
            for claimed in claims:
                self._hand_overs.claimed_lately[claimed.job_id] = None
                self._hand_overs.jobs.discard(claimed.job_id)
            while len(self._hand_overs.claimed_lately) > MAX_CLAIMED_LATELY:
                del self._hand_overs.claimed_lately[next(iter(self._hand_overs.claimed_lately))]
            self._hand_overs.jobs -= passed_over

    def _next_claimable_at(self, free: Mapping[str, int], claimed_at_ms: int) -> int | None:
        """After a claim that left slots free: when the store says a job of these
        queues next becomes claimable by time alone (None: nothing known).

        Asked as of the claim's instant, not the read's: a rate window that
        frees between the two is then an instant already past (claim again at
        once), where asked as of the read it would be no used-up class at all."""
        queues = [queue for queue, slots in free.items() if slots > 0]
        try:
            return self._store.reads.next_claimable_at(
                queues, self._handlers.kinds(), claimed_at_ms
            )
        except StoreError:
            return None

    def _limited_queues(self, ending: Sequence[Attempt]) -> list[str]:
        """What to notify of these ending jobs' ends that free a concurrency
        limit's slot another worker may wait for: the limit's queue, or
        `SLOTS_FREED` for a limit on every queue (only these ends: a
        notification costs every commit that sends one)."""
        limits = self._limits
        freed: set[str] = set()
        for claimed in (attempt.claim for attempt in ending):
            for limit in limits:
                if limit.covers(claimed.queue, claimed.kind, claimed.partition_key):
                    freed.add(SLOTS_FREED if limit.queue is None else claimed.queue)
        return sorted(freed)

    def _look_again_at(self, due_ms: int | None) -> None:
        """Claim again at `due_ms` (a job this worker made due later, a rate window
        freeing), as well as at every instant known before."""
        if due_ms is None or due_ms in self._due_later:
            return
        heapq.heappush(self._due_later, due_ms)
        if len(self._due_later) > MAX_DUE_LATER:  # the latest are found again by reads
            self._due_later = heapq.nsmallest(MAX_DUE_LATER // 2, self._due_later)

    def _ends_to_record(
        self, *, release: bool
    ) -> tuple[list[tuple[Attempt, Outcome]], list[Attempt]]:
        """The attempts whose outcome is to be recorded and, stopping (`release`),
        those given back: each still running is withdrawn first, so its handler's
        outcome cannot also be recorded."""
        ended: list[tuple[Attempt, Outcome]] = []
        released: list[Attempt] = []
        with self._lock:
            for attempt in self._runs.values():
                if release and self._attempts.withdraw(attempt):
                    released.append(attempt)
                elif attempt.outcome is not None and (release or not attempt.overdue):
                    ended.append((attempt, attempt.outcome))
        return ended, released

    def _worth_claiming(self, free: Mapping[str, int], *, handed: bool) -> bool:
        """A claim transaction only when a due job may be waiting: free slots, and
        a job handed by this process, or the earliest pending job of our kinds
        already due."""
        if not any(free.values()):
            return False
        if self._due_now or handed or self._hand_overs.notified:
            self._due_now = self._hand_overs.notified = False
            return True
        queues = [queue for queue, slots in free.items() if slots > 0]
        try:
            earliest = self._store.reads.earliest_claimable(queues, self._handlers.kinds())
        except StoreError:
            return False
        if earliest is None:
            return False
        now = self._clock.now_ms()
        if earliest > now:
            self._look_again_at(earliest)
            return False
        return True

    def _claim(
        self, transaction: WriteTransaction, free: Mapping[str, int]
    ) -> list[tuple[Claim, HandlerSpec]]:
        return claim_due(transaction, free, self._handlers, self.identity.holder, self._recorder)

    def _settle(
        self, attempt: Attempt, append: StreamAppend, result: object, *, ended_at_ms: int
    ) -> None:
        """After the write: count and log the end, or say why it was refused."""
        claimed = attempt.claim
        released = isinstance(append.events[0], JobReleased)
        with self._lock:
            if self._runs.get(claimed.job_id) is attempt:
                del self._runs[claimed.job_id]
            if attempt.overdue:
                self._overrunning.add(attempt)
        if isinstance(result, ConcurrencyConflict):
            self.stats.refused += 1
            self._recorder.attempt_ended(claimed.queue, claimed.kind, "refused", None)
            log.warning(
                "job end not recorded: the job is no longer this worker's (rescued or cancelled)",
                job_id=claimed.job_id,
                kind=claimed.kind,
                attempt=claimed.attempt,
                **origin_fields(claimed),
            )
            return
        event = append.events[0]
        if released:
            self.stats.released += 1
            outcome = "released"
        elif isinstance(event, JobAttemptFailed):
            self.stats.timed_out += int(event.timed_out)
            if event.retry_at_ms is None:
                self.stats.failed += 1
                outcome = "failed"
            else:
                self.stats.retried += 1
                outcome = "retrying"
        elif isinstance(event, JobSnoozed):
            self.stats.snoozed += 1
            outcome = "snoozed"
        else:
            self.stats.succeeded += 1
            outcome = "succeeded"
        self.stats.by_kind[claimed.kind] += 1
        duration_ms = None if released else max(ended_at_ms - attempt.started_at_ms, 0)
        self._recorder.attempt_ended(
            claimed.queue, claimed.kind, job_units.attempt_outcome(append), duration_ms
        )
        log_attempt_end(
            claimed, event, outcome, duration_ms, log_successes=self._config.log_successes
        )
        self._settled(claimed, event)

    def _record_crashes(
        self, transaction: WriteTransaction, crashed: Sequence[Attempt]
    ) -> set[str]:
        """Record a crash of each job whose child process died: as a worker's death
        is (crash count, quarantine at the crash limit), the job alone to blame.
        The ids of the jobs recorded: one cancelled or rescued meanwhile is not."""
        ids = {attempt.claim.job_id: attempt.claim.attempt for attempt in crashed}
        rows = [
            row
            for row in transaction.running_on([self.identity.holder])
            if row.job_id in ids and row.attempts + 1 == ids[row.job_id]
        ]
        self._rescuer.take_back_crashed(transaction, rows)
        return {row.job_id for row in rows}

    def _settle_crashes(self, crashed: Sequence[Attempt], recorded: set[str]) -> None:
        self._rescuer.report_crashes()
        for attempt in crashed:
            claimed = attempt.claim
            with self._lock:
                if self._runs.get(claimed.job_id) is attempt:
                    del self._runs[claimed.job_id]
            if claimed.job_id not in recorded:
                log.info(
                    "a handler's child process died after its job had moved on; "
                    "nothing is recorded",
                    job_id=claimed.job_id,
                    kind=claimed.kind,
                    attempt=claimed.attempt,
                )
                continue
            self.stats.crashed += 1
            self._recorder.attempt_ended(claimed.queue, claimed.kind, "crashed", None)
            log.warning(
                "a handler's child process died running its job; the job counts a crash",
                job_id=claimed.job_id,
                kind=claimed.kind,
                attempt=claimed.attempt,
                why=attempt.outcome.crashed if attempt.outcome is not None else None,
                **origin_fields(claimed),
            )

    def _start(self, claimed: Claim, spec: HandlerSpec) -> None:
        attempt = self._attempts.begin(claimed, spec)
        with self._lock:
            self._runs[claimed.job_id] = attempt
        self.stats.claimed += 1
        if spec.is_async:
            self._loop.submit(attempt.run_async())
        else:
            self._threads.submit(functools.partial(self._run_sync, attempt))

    def _run_sync(self, attempt: Attempt) -> None:
        self._attempts.run_here(attempt)

    def _attempt_ended(self, attempt: Attempt, outcome: Outcome | None) -> None:
        """Told by the runner, on the handler's thread or at the deadline: wake the
        dispatcher to record it (an overdue one's once its handler returns), and
        keep track of the threads handlers hold."""
        if outcome is None:  # nothing more to record; its thread is free
            with self._lock:
                if self._runs.get(attempt.claim.job_id) is attempt and attempt.outcome is None:
                    del self._runs[attempt.claim.job_id]  # told to stop: its job is not ours
                self._overrunning.discard(attempt)
        elif attempt.overdue:
            # The thread stuck in it still holds a slot: the pool gets another.
            self._threads.ensure(sum(self.capacity.values()) + self._overdue())
        self._wake.set()

    def _notice_lost_jobs(self) -> None:
        """Tell handlers whose job an operator cancelled, or that was rescued while
        this worker was frozen, to stop: their ends would be refused anyway."""
        with self._lock:
            watched = [attempt for attempt in self._runs.values() if not attempt.settled]
        if not watched:
            return
        try:
            rows = self._store.reads.jobs([attempt.claim.job_id for attempt in watched])
        except StoreError:
            return
        for attempt in watched:
            row = rows.get(attempt.claim.job_id)
            if row is not None and job_units.lost(attempt.claim, row, self.identity.holder):
                attempt.stop()

    # heartbeat and stop ----------------------------------------------------

    def _beat(self, now_ms: int) -> None:
        beat = WorkerBeat(
            worker_id=self.identity.holder,
            host=self.identity.host,
            pid=self.identity.pid,
            queues=self.capacity,
            started_at_ms=self._started_at_ms,
            running=self.running,
            overdue=self._overdue(),
            process=self._processes.here,
            kinds=tuple(sorted(self._handlers.kinds())),
        )
        try:
            self._store.workers.beat(beat, self._config.heartbeat_ttl_ms)
            self._last_beat_ms = now_ms
            self._limits = [row.limit() for row in self._store.reads.limits_state(now_ms).limits]
        except StoreError:
            log.warning("could not renew the worker heartbeat", worker_id=self.identity.holder)
        self._next_beat_ms = now_ms + self._config.heartbeat_every_ms

    def _heartbeat_fresh(self, now_ms: int) -> bool:
        return (
            self._last_beat_ms is not None
            and now_ms - self._last_beat_ms < self._config.heartbeat_ttl_ms
        )

    def _leave(self) -> None:
        self._rescuer.release()
        with contextlib.suppress(StoreError):
            self._store.workers.stop(self.identity.holder)
        log.info("workers stopped", worker_id=self.identity.holder, **_counts(self.stats))

    # helpers ---------------------------------------------------------------

    def _free_capacity(self) -> dict[str, int]:
        """Slots not held by a running handler: an attempt whose end is being
        recorded has given its slot back, so the same write claims into it."""
        with self._lock:
            busy = Counter(
                attempt.claim.queue for attempt in self._runs.values() if not attempt.settled
            )
        return job_units.capacity_left(self.capacity, busy)

    def _overdue(self) -> int:
        with self._lock:
            waiting = sum(1 for attempt in self._runs.values() if attempt.overdue)
            return waiting + len(self._overrunning)

    def _busy(self) -> bool:
        """An attempt runs, or its end is still to be recorded."""
        with self._lock:
            return bool(self._runs)

    def _on_enqueued(self, queue: str | None) -> None:
        """Heard from the store: a queue's enqueue, jobs taken from their workers
        (`JOBS_TAKEN`), a limit's slot freed (`SLOTS_FREED`), or, where the store
        cannot say what (None: SQLite), a commit, which may have been any."""
        if queue == JOBS_TAKEN:
            self.check_now()
        elif queue == SLOTS_FREED:
            self._wake.set()
        elif queue is None:
            self._check_maybe = True
            self._wake.set()
        elif queue in self.capacity:
            with self._lock:
                self._hand_overs.notified = not self._hand_overs.jobs
            self._wake.set()

    def _warn_of_kinds_nobody_serves(self) -> None:
        try:
            pending = self._store.reads.pending_work()
        except StoreError:
            return
        by_kind: dict[str, int] = {}
        for (_, kind), count in pending.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
        orphans = sorted(kind for kind in by_kind if kind not in self._handlers.kinds())
        if orphans:
            log.warning(
                "pending jobs of kinds with no handler in this process wait for one",
                kinds=orphans,
                jobs=sum(by_kind[kind] for kind in orphans),
            )


def log_attempt_end(
    claimed: Claim,
    event: object,
    outcome: str,
    duration_ms: int | None,
    *,
    log_successes: bool,
) -> None:
    """A failed attempt at WARNING, with its error's type and text (never the
    payload); a job that has now failed for good at ERROR; the rest (succeeded,
    snoozed, given back) at INFO when `log_successes`, else DEBUG: a busy worker
    writes no line per job by default."""
    fields: dict[str, object] = {
        "job_id": claimed.job_id,
        "kind": claimed.kind,
        "queue": claimed.queue,
        "attempt": claimed.attempt,
        "outcome": outcome,
        "duration_ms": duration_ms,
        **origin_fields(claimed),
    }
    if isinstance(event, JobAttemptFailed):
        fields.update(
            error_type=event.error_type, error=event.error_message, traceback=event.traceback
        )
        if event.retry_at_ms is None:
            log.error("job failed: its last attempt failed", **fields)
        else:
            log.warning(
                "job attempt failed; it is retried", retry_at_ms=event.retry_at_ms, **fields
            )
    elif log_successes:
        log.info("job attempt ended", **fields)
    else:
        log.debug("job attempt ended", **fields)


def _due_again_ms(ends: Sequence[StreamAppend]) -> set[int]:
    """When the jobs whose ends these record run again (a snooze, a retry): the
    worker claims each then, not at its next poll."""
    due: set[int] = set()
    for append in ends:
        event = append.events[0]
        if isinstance(event, JobSnoozed):
            due.add(event.run_at_ms)
        elif isinstance(event, JobAttemptFailed) and event.retry_at_ms is not None:
            due.add(event.retry_at_ms)
    return due


def _counts(stats: PoolStats) -> dict[str, int]:
    return {
        "claimed": stats.claimed,
        "succeeded": stats.succeeded,
        "failed": stats.failed,
        "retried": stats.retried,
        "released": stats.released,
    }


DRAIN_BATCH = 100
EXPIRED_BATCH = 500
"""Late jobs read and recorded expired per statement."""
MAX_EXPIRED_PER_CLAIM = 5_000
"""The most late jobs one claim's transaction expires; the rest, at the next."""


def drain(
    store: Store,
    clock: Clock,
    handlers: HandlerRegistry,
    queues: Sequence[str],
    timeout_s: float,
    *,
    config: WorkerConfig | None = None,
    recorder: Recorder = NO_METRICS,
    redact: Redactor = unredacted,
    settled: RunSettled = _nobody_told,
) -> DrainSummary:
    """Run every due job of these kinds and queues in the calling thread until none
    is left or `timeout_s` passes; every end recorded (and told `recorder`) as a
    worker would, by the same attempt runner: a handler past its deadline is
    timed out (told to stop, an async one cancelled) as in the pool.

    It holds a heartbeat of its own while it runs, so a process dying mid-drain
    has its jobs rescued like any worker's.
    """
    settings = config or WorkerConfig(queues=dict.fromkeys(queues, DRAIN_BATCH))
    identity = worker_identity()
    give_up = time.monotonic() + timeout_s
    totals = Counter[str]()
    beat = WorkerBeat(
        identity.holder,
        identity.host,
        identity.pid,
        dict.fromkeys(queues, 1),
        clock.now_ms(),
        0,
        0,
        process=LocalProcesses().here,
        kinds=tuple(sorted(handlers.kinds())),
    )
    next_beat = 0.0
    children = ChildPool(settings.child_limits, handlers.child_modules())
    if handlers.child_modules():
        children.warm(1, wait_s=CHILD_START_WAIT_S)  # one runs at a time: ready after a kill
    attempts = AttemptRunner(
        clock,
        AttemptRules.of(settings, redact),
        recorder=recorder,
        name="headgate-drain-deadlines",
        children=children,
    )
    rescuer = Rescuer(store, clock, identity, settings, recorder=recorder)
    attempts.start()
    try:
        while time.monotonic() < give_up:
            if time.monotonic() >= next_beat:
                store.workers.beat(beat, settings.heartbeat_ttl_ms)
                next_beat = time.monotonic() + settings.heartbeat_every_ms / 1000
            with store.log.write() as transaction:
                taken = claim_due(
                    transaction,
                    dict.fromkeys(queues, DRAIN_BATCH),
                    handlers,
                    identity.holder,
                    recorder,
                )
            if not taken:
                break
            ran = _run_each(attempts, taken)
            _record_drained(
                store,
                rescuer,
                identity.holder,
                ran,
                now=clock.now_ms(),
                totals=totals,
                recorder=recorder,
                log_successes=settings.log_successes,
                settled=settled,
            )
    finally:
        attempts.stop()
        with contextlib.suppress(StoreError):
            store.workers.stop(identity.holder)
    return DrainSummary(
        totals["ran"],
        totals["succeeded"],
        totals["failed"],
        totals["retrying"],
        totals["snoozed"],
        totals["crashed"],
    )


def _record_drained(
    store: Store,
    rescuer: Rescuer,
    holder: str,
    ran: Sequence[tuple[Attempt, Outcome]],
    *,
    now: int,
    totals: Counter[str],
    recorder: Recorder,
    log_successes: bool = False,
    settled: RunSettled = _nobody_told,
) -> None:
    """Record the ends of what one drain turn ran, in one write (a crashed child's
    job as a crash), and count them in `totals`."""
    crashed = {a.claim.job_id for a, outcome in ran if outcome.crashed is not None}
    ends = [
        (
            attempt.claim,
            end_append(attempt, outcome, holder, now),
            outcome.ended_at_ms - attempt.started_at_ms,
        )
        for attempt, outcome in ran
        if outcome.crashed is None
    ]
    awaited = {attempt.claim.job_id for attempt, _ in ran if attempt.spec.awaitable}
    with store.log.write() as transaction:
        results = transaction.append_units(
            [job_units.end_unit(claimed, end) for claimed, end, _ in ends]
        )
        if any(claimed.job_id in awaited and job_units.ends_job(end) for claimed, end, _ in ends):
            transaction.notify_enqueued([JOBS_ENDED])
        if crashed:
            running = transaction.running_on([holder])
            rescuer.take_back_crashed(
                transaction, [row for row in running if row.job_id in crashed]
            )
    rescuer.report_crashes()
    totals["ran"] += len(crashed)
    totals["crashed"] += len(crashed)
    for (claimed, end, duration_ms), result in zip(ends, results, strict=True):
        if not isinstance(result, list):
            recorder.attempt_ended(claimed.queue, claimed.kind, "refused", None)
            continue
        outcome = job_units.attempt_outcome(end)
        recorder.attempt_ended(claimed.queue, claimed.kind, outcome, duration_ms)
        event = end.events[0]
        log_attempt_end(claimed, event, outcome, duration_ms, log_successes=log_successes)
        settled(claimed, event)
        totals["ran"] += 1
        if isinstance(event, JobAttemptFailed):
            totals["retrying" if event.retry_at_ms is not None else "failed"] += 1
        elif isinstance(event, JobSnoozed):
            totals["snoozed"] += 1
        else:
            totals["succeeded"] += 1


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


def _run_each(
    attempts: AttemptRunner, taken: Sequence[tuple[Claim, HandlerSpec]]
) -> list[tuple[Attempt, Outcome]]:
    """Run the claimed jobs one after another in this thread; how each ended."""
    ran: list[tuple[Attempt, Outcome]] = []
    for claimed, spec in taken:
        attempt = attempts.begin(claimed, spec)
        outcome = attempts.run_here(attempt)
        if outcome is not None:
            ran.append((attempt, outcome))
    return ran
