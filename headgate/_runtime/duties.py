"""Background duties, all of one shape, run by one keeper per runtime.

A `Duty` is a small object: its name (for logs), its interval (when it is due
again after a run), its fence (whether it runs under the maintenance lease's
term, as one process of the fleet at a time, or in every runtime with no
lease), `start`/`stop`, and `run(now_ms, fence)`, the test seam: one run now,
at the clock's instant given.

The `DutyKeeper` holds the maintenance lease by the scheduler's rule
(`lease_keeping`: renewed at a quarter of its TTL, a renewal too late to trust
gives up the term, every change of hands logged with its terms), on a thread
of its own that does nothing else: each duty runs on a thread of its own, so a
compaction of seconds never delays a renewal nor another duty, and a duty
still running when it is due again is not started twice. A fenced duty runs only
while the lease is held and trusted, with the term's `Fence`; a write it makes
under a term since lost is refused (`LeaseLost`), the keeper forgets that term
and takes the lease again under the next one if it is still its own. A duty
that raises is logged and runs again at its next interval; the keeper goes on.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, Final

from headgate._clock import Clock
from headgate._errors import LeaseLost, StoreError
from headgate._logs import get_logger
from headgate._runtime.lease_keeping import LeaseKeeping, LeaseTiming, LeaseWords
from headgate._store.port import Fence, LeaseHolder, Store

log = get_logger("headgate.maintenance")
MAINTENANCE_LEASE: Final = "rescuer"
"""The maintenance lease's stored name: the rescuer's lease before its duties were
joined under it, kept so a fleet mid-upgrade still holds one lease."""
MAINTENANCE_WORDS: Final = LeaseWords(
    prefix="maintenance ",
    acquired="lease acquired; this process runs the maintenance duties",
    untrusted="lease renewal came back too late to trust; no duty runs under it",
)
IDLE_WAKE_MS: Final = 1_000
"""How long a keeper with nothing due sleeps before it looks again."""
STOP_WAIT_S: Final = 10.0
"""How long stop() waits, by default, for the keeper and its duties' runs to end."""


class Duty(ABC):
    """One background duty (see the module's docstring)."""

    name: ClassVar[str]
    fenced: ClassVar[bool]
    """True: one process of the fleet at a time runs it, under the maintenance
    lease's term; False: every runtime runs it, with no lease."""

    @property
    @abstractmethod
    def interval_ms(self) -> int:
        """How long after a run the duty is due again."""

    def first_due_ms(self, now_ms: int) -> int:
        """When it first runs, from the instant it may (the keeper's start, or the
        lease's first taking for a fenced duty): by default, an interval later."""
        return now_ms + self.interval_ms

    def next_due_ms(self, ran_at_ms: int) -> int:
        """When it runs again after a run begun at `ran_at_ms`."""
        return ran_at_ms + self.interval_ms

    @abstractmethod
    def run(self, now_ms: int, fence: Fence | None) -> None:
        """Do the duty once, now (`fence`: the term it runs under, None unfenced).
        Raises LeaseLost when a fenced write is refused."""

    def start(self) -> None:
        """Called once as the keeper starts, before any run."""
        return None

    def stop(self) -> None:
        """Cut a run in progress short: the runtime is stopping."""
        return None


class _Slot:
    """One duty, when it is next due, and the thread its runs go on."""

    def __init__(self, duty: Duty, run: Callable[[_Slot, int, Fence | None], None]) -> None:
        self.duty = duty
        self.due_ms: int | None = None
        """None until the duty may first run (a fenced one: until the lease is held)."""
        self.busy = threading.Event()
        """A run was handed to the thread and has not ended: none is queued beside it."""
        self._run = run
        self._runs: queue.SimpleQueue[tuple[int, Fence | None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._serve, name=f"headgate-{duty.name.replace(' ', '-')}", daemon=True
        )

    def hand(self, now_ms: int, fence: Fence | None) -> None:
        self.busy.set()
        self._runs.put((now_ms, fence))

    def close(self) -> None:
        self._runs.put(None)

    def _serve(self) -> None:
        while (run := self._runs.get()) is not None:
            self._run(self, *run)


class DutyKeeper:
    """Runs `duties` when due, holding the maintenance lease for the fenced ones."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        holder: LeaseHolder,
        duties: Sequence[Duty],
        *,
        lease_ttl_ms: int,
    ) -> None:
        self._clock = clock
        self._slots = [_Slot(duty, self._run) for duty in duties]
        self.lease = LeaseKeeping(
            store.leases,
            MAINTENANCE_LEASE,
            holder,
            clock,
            LeaseTiming(lease_ttl_ms),
            log=log,
            words=MAINTENANCE_WORDS,
        )
        self._fenced = any(slot.duty.fenced for slot in self._slots)
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._store_back_ms = 0
        """After the store failed to answer for the lease: not asked again before."""
        self._thread = threading.Thread(target=self._loop, name="headgate-duties", daemon=True)

    @property
    def duties(self) -> list[Duty]:
        return [slot.duty for slot in self._slots]

    def start(self) -> None:
        for slot in self._slots:
            slot.duty.start()
            slot.thread.start()
        self._thread.start()

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Stop: no duty is started again, a run in progress is cut short, and the
        lease is released once the runs have ended, so another keeper takes it at
        once. Waits up to `timeout_s` (a write the store blocks may take longer:
        the keeper's threads end, and release the lease, once it returns)."""
        self._stopped.set()
        self._wake.set()
        for slot in self._slots:
            slot.duty.stop()
        if not self._thread.is_alive():
            if self._thread.ident is None:  # never started: the test seam's use
                self.lease.release()
            return
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)

    def run_due(self, now_ms: int | None = None) -> list[str]:
        """The test seam: keep the lease, then run every duty due at `now_ms` (the
        clock's now by default) here, one after another; the names of those run."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        ran: list[str] = []
        for slot, fence in self._due(now):
            slot.busy.set()
            self._run(slot, now, fence)
            ran.append(slot.duty.name)
        return ran

    def _loop(self) -> None:
        while not self._stopped.is_set():
            now = self._clock.now_ms()
            try:
                for slot, fence in self._due(now):
                    slot.hand(now, fence)
            except Exception:
                log.exception("the duty keeper's turn failed; it goes on")
            self._clock.sleep_until(self._next_wake_ms(), self._wake)
            self._wake.clear()
        for slot in self._slots:
            slot.close()
        for slot in self._slots:
            slot.thread.join()
        self.lease.release()

    def _due(self, now_ms: int) -> list[tuple[_Slot, Fence | None]]:
        """The duties due now and free to run, each with its fence; their next due
        instants set. Keeps the lease first when a fenced duty is kept."""
        fence = self._keep_lease(now_ms) if self._fenced else None
        due: list[tuple[_Slot, Fence | None]] = []
        for slot in self._slots:
            if slot.duty.fenced and fence is None:
                continue
            if slot.due_ms is None:
                slot.due_ms = slot.duty.first_due_ms(now_ms)
            if now_ms < slot.due_ms:
                continue
            slot.due_ms = slot.duty.next_due_ms(now_ms)
            if slot.busy.is_set():
                continue  # still running: not queued twice
            due.append((slot, fence if slot.duty.fenced else None))
        return due

    def _keep_lease(self, now_ms: int) -> Fence | None:
        if now_ms < self._store_back_ms:
            lease = self.lease.lease
            return None if lease is None else Fence(MAINTENANCE_LEASE, lease.term)
        try:
            lease = self.lease.keep(now_ms)
            if self.lease.distrusted:  # the next term at once, as the scheduler takes it
                lease = self.lease.keep(self._clock.now_ms())
        except StoreError:
            log.warning("store unavailable; the duty keeper will retry", exc_info=True)
            self._store_back_ms = now_ms + self.lease.timing.renew_every_ms
            lease = self.lease.lease
        return None if lease is None else Fence(MAINTENANCE_LEASE, lease.term)

    def _run(self, slot: _Slot, now_ms: int, fence: Fence | None) -> None:
        try:
            slot.duty.run(now_ms, fence)
        except LeaseLost:
            if fence is not None and self.lease.forget_lost_term(fence.term):
                self._wake.set()  # take it again now, under the next term, if still ours
        except Exception:
            log.exception("duty failed; it runs again at its next interval", duty=slot.duty.name)
        finally:
            slot.busy.clear()

    def _next_wake_ms(self) -> int:
        """The next instant something is due: a renewal, or a duty that may run
        (a fenced one only while the lease is held); now, if one is already."""
        now = self._clock.now_ms()
        held = self.lease.lease is not None
        due = [
            slot.due_ms
            for slot in self._slots
            if slot.due_ms is not None and (held or not slot.duty.fenced)
        ]
        if self._fenced:
            due.append(max(self.lease.renewal_due_ms(now), self._store_back_ms))
        elif not due:
            due.append(now + IDLE_WAKE_MS)
        return max(min(due), now)
