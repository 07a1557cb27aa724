"""Runs the jobs of this process: claims, handlers, ends.

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
* The heartbeat (`heartbeat`) is renewed by the dispatcher; start deadlines
  are kept by the claim (`claiming`); the rescue of dead workers and the
  watch on the ticks are duties the runtime's keeper runs (`duties()`), the
  local rescue also once as the pool starts, before its first claim.
* Stop: no more claims; running handlers get `shutdown_timeout_s` to end;
  what is still running is released (no attempt or crash counted) so
  another worker takes it at once; the heartbeat row goes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from headgate._clock import Clock
from headgate._domain.events import JobReleased
from headgate._domain.job_rules import Redactor, unredacted
from headgate._errors import ConcurrencyConflict, StoreError
from headgate._logs import get_logger
from headgate._runtime import job_units
from headgate._runtime.attempt_log import (
    RunSettled,
    log_attempt_end,
    log_what_stop_waits_for,
    nobody_told,
)
from headgate._runtime.attempts import Attempt, AttemptRules, AttemptRunner, Outcome, end_append
from headgate._runtime.child_processes import CHILD_START_WAIT_S, ChildPool
from headgate._runtime.claiming import claim_due, warn_of_kinds_nobody_serves
from headgate._runtime.config import DEFAULT_CAPACITY, WorkerConfig
from headgate._runtime.crash_ends import record_child_crashes, report_child_crash
from headgate._runtime.duties import Duty
from headgate._runtime.executor import LoopRunner, ThreadRunner
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec
from headgate._runtime.heartbeat import Heartbeat, worker_identity
from headgate._runtime.job_units import Claim, origin_fields
from headgate._runtime.local_processes import LocalProcesses
from headgate._runtime.maintenance import ExpiredRescue, LocalRescue, SchedulerWatch
from headgate._runtime.pool_stats import PoolStats
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._runtime.wake_ups import DueLater, HandOvers, due_again_ms, freed_queues
from headgate._store.port import (
    JOBS_ENDED,
    JOBS_TAKEN,
    SLOTS_FREED,
    LeaseHolder,
    Listener,
    Store,
    StreamAppend,
    WriteTransaction,
)

log = get_logger("headgate.workers")
STOP_WORD_EVERY_S = 5.0
"""How often a stop that waits for running jobs says so."""
MAYBE_TAKEN_EVERY_MS = 50
"""The least time between two looks at the running jobs for a commit that may
have cancelled one (SQLite's wake-ups do not say): its handler is told within
about this much of the cancel."""


class WorkerPool:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        handlers: HandlerRegistry,
        config: WorkerConfig,
        identity: LeaseHolder | None = None,
        *,
        recorder: Recorder = NO_METRICS,
        processes: LocalProcesses | None = None,
        redact: Redactor = unredacted,
        scheduler_check: Callable[[], tuple[str, str]] | None = None,
        settled: RunSettled = nobody_told,
    ) -> None:
        """`redact`: the host's redaction of error texts and tracebacks;
        `scheduler_check`: whether anybody fires the ticks (its state, `ok` or
        not, and what that means), asked every SCHEDULER_CHECK_EVERY_MS;
        `settled`: told of each recorded attempt end (`ScheduleAlerts.run_settled`)."""
        self._settled = settled
        self._scheduler_check = scheduler_check
        self._store = store
        self._processes = processes if processes is not None else LocalProcesses()
        self._recorder = recorder
        self._clock = clock
        self._handlers = handlers
        self._config = config
        self.config = config
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
        self._heartbeat = Heartbeat(
            store,
            clock,
            self.identity,
            config,
            self._processes,
            queues=self.capacity,
            kinds=lambda: tuple(sorted(handlers.kinds())),
        )
        self._next_check_ms = 0
        self._check_asked = threading.Event()
        """Look at the running jobs at the next turn: one was cancelled."""
        self._check_maybe = False
        """Something was committed, maybe a cancel (SQLite cannot say what)."""
        self._checked_at_ms = 0
        self._hand_overs = HandOvers()
        self._due_later = DueLater()
        """When jobs this worker knows of become due (a heap): the earliest scheduled
        job it read, those it snoozed or retried, a rate class's next free start."""
        self._due_now = False
        self.stats = PoolStats()
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="headgate-workers", daemon=True
        )

    # lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._heartbeat.start()
        self._threads.ensure(sum(self.capacity.values()))
        self._children.warm(self._handlers.child_slots(self.capacity), wait_s=CHILD_START_WAIT_S)
        self._attempts.start()
        if self._config.listen:
            self._listener = self._store.listen(self._on_enqueued)
        warn_of_kinds_nobody_serves(self._store, self._handlers.kinds())
        self._rescuer.rescue_local()  # before the first claim: the dead's jobs are claimable now
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
                with self._lock:
                    running = [a.claim for a in self._runs.values() if not a.settled]
                log_what_stop_waits_for(running, deadline - time.monotonic())
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
        if now >= self._heartbeat.next_beat_ms:
            self._heartbeat.beat(now, running=self.running, overdue=self._overdue())
        if self._check_asked.is_set() or now >= self._next_check_ms or self._maybe_taken(now):
            self._check_asked.clear()  # before the reads: one asked meanwhile looks again
            self._check_maybe = False
            self._notice_lost_jobs()
            self._checked_at_ms = now
            self._next_check_ms = now + self._config.heartbeat_every_ms
        claiming = not self._stopping.is_set() and self._heartbeat.fresh(now)
        self._write(claiming=claiming, release=final)

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
        """The next thing due: a poll, a heartbeat, or a job scheduled for later
        (an attempt that ends, or times out, wakes it sooner)."""
        now = self._clock.now_ms()
        due = [now + self._config.poll_interval_ms, self._heartbeat.next_beat_ms]
        if self._check_maybe:
            due.append(self._checked_at_ms + MAYBE_TAKEN_EVERY_MS)
        next_due = self._due_later.take_next(now)
        if next_due is not None:
            due.append(next_due)
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
                freed = freed_queues(
                    self._heartbeat.limits,
                    [attempt.claim for attempt, _, _ in ends] + [a.claim for a in crashed],
                )
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
        with self._lock:  # the handed jobs claimed, and those passed over: not looked for again
            self._hand_overs.forget([c.job_id for c, _ in claims], handed if left_free else set())
        for due_ms in due_again_ms([append for _, append, _ in ends]):
            self._look_again_at(due_ms)
        if any(free.values()) and left_free:
            self._look_again_at(self._next_claimable_at(free, claimed_at))

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

    def _look_again_at(self, due_ms: int | None) -> None:
        """Claim again at `due_ms` (a job this worker made due later, a rate window
        freeing), as well as at every instant known before."""
        if due_ms is not None:
            self._due_later.add(due_ms)

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
        outcome = self.stats.count_end(claimed.kind, event, released=released)
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
        return record_child_crashes(transaction, self._rescuer, self.identity.holder, crashed)

    def _settle_crashes(self, crashed: Sequence[Attempt], recorded: set[str]) -> None:
        self._rescuer.report_crashes()
        for attempt in crashed:
            with self._lock:
                if self._runs.get(attempt.claim.job_id) is attempt:
                    del self._runs[attempt.claim.job_id]
            if report_child_crash(attempt, attempt.claim.job_id in recorded, self._recorder):
                self.stats.crashed += 1

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

    # stop ----------------------------------------------------------------

    def duties(self) -> list[Duty]:
        """What the runtime's keeper runs for these workers: the rescue of dead
        workers (by TTL under the maintenance lease, and this machine's own
        dead), and, given `scheduler_check`, the watch on the ticks."""
        interval = self._config.rescue_interval_ms
        duties: list[Duty] = [
            ExpiredRescue(self._rescuer, interval),
            LocalRescue(self._rescuer, interval),
        ]
        if self._scheduler_check is not None:
            duties.append(SchedulerWatch(self._scheduler_check, self.identity.holder))
        return duties

    def _leave(self) -> None:
        self._heartbeat.remove()
        log.info("workers stopped", worker_id=self.identity.holder, **self.stats.counts())

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
