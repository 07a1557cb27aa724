"""Runs the jobs of this process: claims, handlers, ends, heartbeat, rescue.

One dispatcher thread does all the store work, so every write it makes is
batched: each turn of its loop records the attempts that ended since the
last turn (succeeded, failed, timed out) and claims up to the free capacity
of each queue, oldest run_at first, in one write transaction. Handlers run
on a pool of threads (sync) or one event loop (async), and hand their
outcome back to the dispatcher, which they wake.

* Wake-ups: an enqueue in this process pokes the pool at once; on PostgreSQL
  other processes' enqueues arrive by NOTIFY; otherwise it polls every
  `poll_interval_ms`, and sleeps until a scheduled job's run_at when that is
  sooner.
* Timeouts: at an attempt's deadline the dispatcher records it failed
  (timed out, retried per policy), sets the job's `cancelled` event and
  cancels an async handler. A sync handler's thread cannot be killed: its
  slot is given back (a thread is added), it is counted as overdue in the
  heartbeat, and whatever it returns is dropped (its append would be refused
  by the version check anyway).
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

import asyncio
import contextlib
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from headgate._clock import Clock
from headgate._domain.events import JobAttemptFailed
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.job_rules import (
    ErrorRecord,
    InvalidResult,
    checked_result,
    error_record,
    timed_out_record,
)
from headgate._errors import ConcurrencyConflict, StoreError
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._model import DrainSummary
from headgate._runtime import job_units
from headgate._runtime.config import DEFAULT_CAPACITY, WorkerConfig
from headgate._runtime.executor import LoopRunner, ThreadRunner
from headgate._runtime.handlers import HandlerRegistry, HandlerSpec, JobContext
from headgate._runtime.job_units import Claim
from headgate._runtime.local_processes import LocalProcesses
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import (
    Claimant,
    Listener,
    Store,
    StreamAppend,
    WorkerBeat,
    WriteTransaction,
)

log = get_logger("headgate.workers")


@dataclass
class _Run:
    """One attempt in this process, from its claim to its recorded end."""

    claim: Claim
    spec: HandlerSpec
    context: JobContext
    started_at_ms: int
    overdue: bool = False
    """Its deadline passed and its timeout is recorded; its thread may still run."""
    done: bool = False
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Ended:
    run: _Run
    ended_at_ms: int
    """When its handler returned (or its deadline passed)."""
    result: JsonValue = None
    error: ErrorRecord | None = None
    timed_out: bool = False


@dataclass
class PoolStats:
    """What the pool has done, for logs, drain() and metrics."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    timed_out: int = 0
    released: int = 0
    refused: int = 0
    """Ends not recorded because the job was no longer this worker's."""
    by_kind: Counter[str] = field(default_factory=Counter)


def worker_identity(prefix: str = "worker") -> Claimant:
    """A worker's identity: one per process start, never a bare hostname."""
    host = socket.gethostname()
    return Claimant(f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}", host, os.getpid())


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
    ) -> None:
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
        self._runs: dict[str, _Run] = {}
        self._ended: list[_Ended] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
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
        self._next_scheduled_ms: int | None = None
        self._due_now = False
        """The run_at of the earliest job scheduled for later, when one was seen."""
        self.stats = PoolStats()
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="headgate-workers", daemon=True
        )

    # lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._started_at_ms = self._clock.now_ms()
        self._threads.ensure(sum(self.capacity.values()))
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

    def check_now(self) -> None:
        """A job may have been taken from this worker (an operator cancelled it):
        look at the running jobs now, not at the next heartbeat."""
        self._next_check_ms = 0
        self._wake.set()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop claiming, let running handlers finish for up to the shutdown timeout,
        give back the rest, and remove the heartbeat. Returns within the timeout
        and a second."""
        grace = self._config.shutdown_timeout_s if timeout_s is None else timeout_s
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self._busy():
            time.sleep(0.01)
        self._stopped.set()
        self._wake.set()
        self._dispatcher.join(timeout=max(deadline - time.monotonic(), 0) + 1.0)
        if self._listener is not None:
            self._listener.close()
        self._threads.close()
        self._loop.close()

    @property
    def running(self) -> int:
        with self._lock:
            return sum(1 for run in self._runs.values() if not run.overdue)

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
            self._wake.wait(self._sleep_s())
            self._wake.clear()

    def _turn(self, *, final: bool) -> None:
        now = self._clock.now_ms()
        if now >= self._next_beat_ms:
            self._beat(now)
        self._time_out(now)
        if now >= self._next_check_ms:
            self._notice_lost_jobs()
            self._next_check_ms = now + self._config.heartbeat_every_ms
        if now >= self._next_rescue_ms and not self._stopping.is_set():
            self._rescuer.run_once()  # before claiming: the dead's jobs are claimable now
            self._next_rescue_ms = now + self._config.rescue_interval_ms
        claiming = not self._stopping.is_set() and self._heartbeat_fresh(now)
        self._write(claiming=claiming, release=final)

    def _sleep_s(self) -> float:
        """Until the next thing due: a poll, a heartbeat, a deadline, a rescue,
        or a job scheduled for later."""
        now = self._clock.now_ms()
        due = [
            now + self._config.poll_interval_ms,
            self._next_beat_ms,
            self._next_rescue_ms,
        ]
        if self._next_scheduled_ms is not None:
            due.append(self._next_scheduled_ms)
            self._next_scheduled_ms = None
        with self._lock:
            due.extend(run.claim.deadline_ms for run in self._runs.values() if not run.overdue)
        return max(min(due) - now, 1) / 1000

    def _write(self, *, claiming: bool, release: bool) -> None:
        """One transaction: record the attempts that ended, and claim into the
        free capacity (or, stopping, give back what still runs)."""
        with self._lock:
            ended, self._ended = self._ended, []
            released = [run for run in self._runs.values() if release and not run.done]
        free = self._free_capacity() if claiming else {}
        if not ended and not released and not self._worth_claiming(free):
            return
        now = self._clock.now_ms()
        ends = [(end.run, self._end_append(end, now), end.ended_at_ms) for end in ended]
        ends += [
            (run, job_units.released(run.claim, self.identity.holder), now) for run in released
        ]
        try:
            with self._store.log.write() as transaction:
                results = transaction.append_units(
                    [job_units.end_unit(run.claim, append) for run, append, _ in ends]
                )
                claims = self._claim(transaction, free) if any(free.values()) else []
        except StoreError:
            log.warning(
                "could not record jobs' ends; trying again", ended=len(ended), exc_info=True
            )
            with self._lock:
                self._ended = ended + self._ended
            return
        for (run, append, ended_at), result in zip(ends, results, strict=True):
            self._settle(run, append, result, released=run in released, ended_at_ms=ended_at)
        for run in released:
            run.context.cancelled.set()  # its job is given back: whatever it returns is dropped
        for claimed, spec in claims:
            self._start(claimed, spec)

    def _worth_claiming(self, free: Mapping[str, int]) -> bool:
        """A claim transaction only when a due job may be waiting: free slots, and
        the earliest pending job of our kinds already due."""
        if not any(free.values()):
            return False
        if self._due_now:
            self._due_now = False
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
            self._next_scheduled_ms = earliest
            return False
        return True

    def _claim(
        self, transaction: WriteTransaction, free: Mapping[str, int]
    ) -> list[tuple[Claim, HandlerSpec]]:
        return claim_due(transaction, free, self._handlers, self.identity.holder)

    def _end_append(self, end: _Ended, now_ms: int) -> StreamAppend:
        run = end.run
        if end.error is None:
            return job_units.succeeded(
                run.claim, self.identity.holder, run.started_at_ms, end.result
            )
        return job_units.failed(
            run.claim,
            self.identity.holder,
            run.started_at_ms,
            end.error,
            now_ms,
            timed_out=end.timed_out,
        )

    def _settle(
        self,
        run: _Run,
        append: StreamAppend,
        result: object,
        *,
        released: bool,
        ended_at_ms: int,
    ) -> None:
        """After the write: count and log the end, or say why it was refused."""
        claimed = run.claim
        with self._lock:
            if self._runs.get(claimed.job_id) is run and (run.done or released):
                del self._runs[claimed.job_id]
        if isinstance(result, ConcurrencyConflict):
            self.stats.refused += 1
            self._recorder.attempt_ended(claimed.queue, claimed.kind, "refused", None)
            log.warning(
                "job end not recorded: the job is no longer this worker's (rescued or cancelled)",
                job_id=claimed.job_id,
                kind=claimed.kind,
                attempt=claimed.attempt,
                **_origin(claimed),
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
        else:
            self.stats.succeeded += 1
            outcome = "succeeded"
        self.stats.by_kind[claimed.kind] += 1
        self._recorder.attempt_ended(
            claimed.queue,
            claimed.kind,
            job_units.attempt_outcome(append),
            None if released else max(ended_at_ms - run.started_at_ms, 0),
        )
        log.info(
            "job attempt ended",
            job_id=claimed.job_id,
            kind=claimed.kind,
            attempt=claimed.attempt,
            outcome=outcome,
            **_origin(claimed),
        )

    def _start(self, claimed: Claim, spec: HandlerSpec) -> None:
        context = JobContext(
            id=claimed.job_id,
            kind=claimed.kind,
            queue=claimed.queue,
            payload=claimed.payload,
            attempt=claimed.attempt,
            max_attempts=claimed.max_attempts,
            crash_count=claimed.crash_count,
            periodic_origin=claimed.periodic_origin,
            deadline_ms=claimed.deadline_ms,
        )
        run = _Run(claimed, spec, context, started_at_ms=self._clock.now_ms())
        with self._lock:
            self._runs[claimed.job_id] = run
        self.stats.claimed += 1
        self._recorder.handler_started(
            claimed.queue, claimed.kind, max(run.started_at_ms - claimed.run_at_ms, 0)
        )
        if spec.is_async:
            self._loop.submit(self._run_async(run))
        else:
            self._threads.submit(lambda: self._run_sync(run))

    def _run_sync(self, run: _Run) -> None:
        try:
            result = run.spec.function(run.context)
        except BaseException as error:  # the host's code: whatever it raises fails the attempt
            self._deliver(run, error=error)
            return
        self._deliver(run, result=result)

    async def _run_async(self, run: _Run) -> None:
        run.task = asyncio.current_task()
        try:
            result = await run.spec.function(run.context)
        except asyncio.CancelledError:
            self._deliver(run, error=TimeoutError("cancelled at its deadline"), cancelled=True)
            return
        except BaseException as error:
            self._deliver(run, error=error)
            return
        self._deliver(run, result=result)

    def _deliver(
        self,
        run: _Run,
        *,
        result: JsonValue = None,
        error: BaseException | None = None,
        cancelled: bool = False,
    ) -> None:
        """A handler ended: hand its outcome to the dispatcher (dropped if the attempt
        was already settled: timed out, cancelled, given back)."""
        keep = self._config.store_error_messages
        now = self._clock.now_ms()
        ended: _Ended
        if error is None:
            try:
                checked = checked_result(result, self._config.max_result_bytes)
                ended = _Ended(run, now, result=checked)
            except InvalidResult as invalid:
                ended = _Ended(run, now, error=error_record(invalid, keep_messages=keep))
        else:
            ended = _Ended(run, now, error=error_record(error, keep_messages=keep))
        with self._lock:
            if run.overdue or run.done or cancelled or run.context.cancelled.is_set():
                # Settled already (timed out, given back) or taken away (cancelled,
                # rescued): its thread is free again, and nothing more is recorded.
                if self._runs.get(run.claim.job_id) is run:
                    del self._runs[run.claim.job_id]
                late = True
            else:
                run.done = True
                self._ended.append(ended)
                late = False
        if late:
            log.info(
                "a handler returned after its attempt was settled; its outcome is dropped",
                job_id=run.claim.job_id,
                kind=run.claim.kind,
                attempt=run.claim.attempt,
            )
        self._wake.set()

    def _time_out(self, now_ms: int) -> None:
        """Record the attempts past their deadline as timed out, and tell them to stop."""
        with self._lock:
            late = [
                run
                for run in self._runs.values()
                if not run.overdue and not run.done and run.claim.deadline_ms <= now_ms
            ]
            for run in late:
                run.overdue = True
                error = timed_out_record(run.claim.timeout_ms)
                self._ended.append(_Ended(run, now_ms, error=error, timed_out=True))
        for run in late:
            run.context.cancelled.set()
            self._cancel_task(run)
            log.warning(
                "handler ran past its timeout; its attempt is recorded as failed",
                job_id=run.claim.job_id,
                kind=run.claim.kind,
                attempt=run.claim.attempt,
                **_origin(run.claim),
            )
        if late:
            # The threads stuck in them still hold a slot each: keep the capacity.
            self._threads.ensure(sum(self.capacity.values()) + self._overdue())

    def _notice_lost_jobs(self) -> None:
        """Tell handlers whose job an operator cancelled, or that was rescued while
        this worker was frozen, to stop: their ends would be refused anyway."""
        with self._lock:
            watched = [run for run in self._runs.values() if not run.done and not run.overdue]
        for run in watched:
            try:
                row = self._store.reads.job(run.claim.job_id)
            except StoreError:
                return
            if row is None or row.version != run.claim.claimed_version:
                run.context.cancelled.set()
                self._cancel_task(run)

    def _cancel_task(self, run: _Run) -> None:
        task = run.task
        if task is not None:

            def cancel() -> None:
                task.cancel()

            self._loop.call_soon(cancel)

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
        )
        try:
            self._store.workers.beat(beat, self._config.heartbeat_ttl_ms)
            self._last_beat_ms = now_ms
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
                run.claim.queue for run in self._runs.values() if not run.overdue and not run.done
            )
        return job_units.capacity_left(self.capacity, busy)

    def _overdue(self) -> int:
        with self._lock:
            return sum(1 for run in self._runs.values() if run.overdue)

    def _busy(self) -> bool:
        with self._lock:
            return bool(self._ended) or any(not run.overdue for run in self._runs.values())

    def _on_enqueued(self, queue: str) -> None:
        if queue in self.capacity:
            self._wake.set()

    def _warn_of_kinds_nobody_serves(self) -> None:
        try:
            pending = self._store.reads.pending_kinds()
        except StoreError:
            return
        orphans = sorted(kind for kind in pending if kind not in self._handlers.kinds())
        if orphans:
            log.warning(
                "pending jobs of kinds with no handler in this process wait for one",
                kinds=orphans,
                jobs=sum(pending[kind] for kind in orphans),
            )


def _origin(claimed: Claim) -> dict[str, object]:
    origin = claimed.periodic_origin
    return {} if origin is None else {"schedule_id": origin.schedule_id, "tick_ms": origin.tick_ms}


def _counts(stats: PoolStats) -> dict[str, int]:
    return {
        "claimed": stats.claimed,
        "succeeded": stats.succeeded,
        "failed": stats.failed,
        "retried": stats.retried,
        "released": stats.released,
    }


DRAIN_BATCH = 100


def drain(
    store: Store,
    clock: Clock,
    handlers: HandlerRegistry,
    queues: Sequence[str],
    timeout_s: float,
    *,
    config: WorkerConfig | None = None,
    recorder: Recorder = NO_METRICS,
) -> DrainSummary:
    """Run every due job of these kinds and queues in the calling thread until none
    is left or `timeout_s` passes; every end recorded (and told `recorder`) as a
    worker would.

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
    )
    next_beat = 0.0
    try:
        while time.monotonic() < give_up:
            if time.monotonic() >= next_beat:
                store.workers.beat(beat, settings.heartbeat_ttl_ms)
                next_beat = time.monotonic() + settings.heartbeat_every_ms / 1000
            with store.log.write() as transaction:
                taken = claim_due(
                    transaction, dict.fromkeys(queues, DRAIN_BATCH), handlers, identity.holder
                )
            if not taken:
                break
            ends = [
                (
                    claimed,
                    *_run_inline(
                        claimed, spec, identity.holder, clock, settings, recorder=recorder
                    ),
                )
                for claimed, spec in taken
            ]
            with store.log.write() as transaction:
                results = transaction.append_units(
                    [job_units.end_unit(claimed, end) for claimed, end, _ in ends]
                )
            for (claimed, end, duration_ms), result in zip(ends, results, strict=True):
                if not isinstance(result, list):
                    recorder.attempt_ended(claimed.queue, claimed.kind, "refused", None)
                    continue
                outcome = job_units.attempt_outcome(end)
                recorder.attempt_ended(claimed.queue, claimed.kind, outcome, duration_ms)
                event = end.events[0]
                totals["ran"] += 1
                if isinstance(event, JobAttemptFailed):
                    totals["retrying" if event.retry_at_ms is not None else "failed"] += 1
                else:
                    totals["succeeded"] += 1
    finally:
        with contextlib.suppress(StoreError):
            store.workers.stop(identity.holder)
    return DrainSummary(totals["ran"], totals["succeeded"], totals["failed"], totals["retrying"])


def claim_due(
    transaction: WriteTransaction,
    capacity: Mapping[str, int],
    handlers: HandlerRegistry,
    worker_id: str,
) -> list[tuple[Claim, HandlerSpec]]:
    """Claim the due jobs that fit `capacity`, in this transaction; only those
    whose claim was recorded are returned (another worker may take one first)."""
    now = transaction.now_ms
    rows = transaction.claimable(capacity, handlers.kinds(), now)
    if not rows:
        return []
    fingerprints = {row.job_id: fingerprint_of_text(row.kind, row.payload) for row in rows}
    blamed = transaction.crash_blame(set(fingerprints.values()))
    taken: list[tuple[StreamAppend, Claim, HandlerSpec]] = []
    for row in rows:
        spec = handlers.get(row.kind)
        if spec is None:
            continue
        fingerprint = fingerprints[row.job_id]
        append, claimed = job_units.claim(
            row, spec, worker_id, now, blamed=fingerprint if blamed.get(fingerprint) else None
        )
        taken.append((append, claimed, spec))
    results = transaction.append_units([[append] for append, _, _ in taken])
    return [
        (claimed, spec)
        for (_, claimed, spec), result in zip(taken, results, strict=True)
        if isinstance(result, list)
    ]


def _run_inline(
    claimed: Claim,
    spec: HandlerSpec,
    worker_id: str,
    clock: Clock,
    config: WorkerConfig,
    *,
    recorder: Recorder,
) -> tuple[StreamAppend, int]:
    """Run the attempt here; its end to append, and how long the handler ran."""
    context = JobContext(
        id=claimed.job_id,
        kind=claimed.kind,
        queue=claimed.queue,
        payload=claimed.payload,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        crash_count=claimed.crash_count,
        periodic_origin=claimed.periodic_origin,
        deadline_ms=claimed.deadline_ms,
    )
    started = clock.now_ms()
    recorder.handler_started(claimed.queue, claimed.kind, max(started - claimed.run_at_ms, 0))
    keep = config.store_error_messages
    try:
        if spec.is_async:
            seconds = max(claimed.deadline_ms - started, 1) / 1000
            result = asyncio.run(asyncio.wait_for(spec.function(context), seconds))
        else:
            result = spec.function(context)
        checked = checked_result(result, config.max_result_bytes)
    except BaseException as error:  # the host's code: whatever it raises fails the attempt
        if isinstance(error, KeyboardInterrupt):
            raise
        ended = clock.now_ms()
        record = error_record(error, keep_messages=keep)
        return job_units.failed(claimed, worker_id, started, record, ended), ended - started
    return job_units.succeeded(claimed, worker_id, started, checked), clock.now_ms() - started
