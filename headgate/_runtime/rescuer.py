"""The rescue duty: jobs of dead workers made claimable again, by lease.

One process at a time holds the `rescuer` lease (any process running
workers competes for it). Every rescue interval it reads the workers whose
heartbeat has expired and, in one write fenced by its term, records what
`job_rules.rescue` decides for each running job of theirs: abandoned (crash
count + 1, claimable again), or quarantined with its fingerprint; then it
forgets those workers. A worker that is alive, however long its job runs,
keeps renewing its heartbeat and is never rescued from; one frozen past its
expiry comes back to find its jobs moved on, and its appends are refused.
"""

from __future__ import annotations

from collections import defaultdict

from headgate._clock import Clock
from headgate._domain.events import JobQuarantined
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.job_rules import CrashedJob, rescue
from headgate._domain.streams import job_stream, quarantine_stream
from headgate._errors import LeaseLost, StoreError
from headgate._logs import get_logger
from headgate._projections import JobRow
from headgate._runtime.config import RESCUER_LEASE, WorkerConfig
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._store.port import ANY_VERSION, Claimant, Fence, Lease, Store, StreamAppend, Unit

log = get_logger("headgate.workers")


class Rescuer:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        claimant: Claimant,
        config: WorkerConfig,
        *,
        recorder: Recorder = NO_METRICS,
    ):
        self._store = store
        self._recorder = recorder
        self._clock = clock
        self._claimant = claimant
        self._config = config
        self._lease: Lease | None = None
        self.rescued = 0
        """Jobs taken back from dead workers by this process, in all."""
        self.quarantined = 0

    def run_once(self) -> int:
        """Rescue what is due if this process holds (or takes) the lease; returns
        how many jobs it took back."""
        try:
            lease = self._keep_lease()
            if lease is None:
                return 0
            return self._rescue(Fence(RESCUER_LEASE, lease.term))
        except LeaseLost:
            self._lease = None
            return 0
        except StoreError:
            log.warning("rescue failed; it runs again at the next interval", exc_info=True)
            return 0

    def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                self._store.leases.release(RESCUER_LEASE, self._claimant.holder, lease.term)
            except StoreError:
                log.warning("could not release the rescuer lease; it will expire")

    def _keep_lease(self) -> Lease | None:
        current = self._lease.term if self._lease is not None else None
        ttl = 3 * self._config.rescue_interval_ms
        self._lease = self._store.leases.acquire(RESCUER_LEASE, self._claimant, ttl, current)
        return self._lease

    def _rescue(self, fence: Fence) -> int:
        taken = 0
        with self._store.log.write(fence) as transaction:
            dead = transaction.expired_workers(transaction.now_ms)
            if not dead:
                return 0
            jobs = transaction.running_on([worker.worker_id for worker in dead])
            by_id = {row.job_id: row for row in jobs}
            crashed_by_worker: dict[str, list[CrashedJob]] = defaultdict(list)
            for row in jobs:
                assert row.worker_id is not None
                crashed_by_worker[row.worker_id].append(
                    CrashedJob(
                        row.job_id,
                        row.worker_id,
                        fingerprint_of_text(row.kind, row.payload),
                        row.crash_count,
                        row.version,
                    )
                )
            fingerprints = {
                job.fingerprint for crashed in crashed_by_worker.values() for job in crashed
            }
            blame = transaction.crash_blame(fingerprints)
            quarantined = transaction.quarantined(fingerprints)
            units: list[Unit] = []
            owners: list[JobRow] = []
            for worker_id in sorted(crashed_by_worker):
                for job, job_events, fingerprint_events in rescue(
                    crashed_by_worker[worker_id], blame, self._config.crash_limit, quarantined
                ):
                    owners.append(by_id[job.job_id])
                    units.append(
                        [
                            StreamAppend(job_stream(job.job_id), job.version, job_events),
                            StreamAppend(
                                quarantine_stream(job.fingerprint), ANY_VERSION, fingerprint_events
                            ),
                        ]
                    )
            results = transaction.append_units(units)
            rescued: list[tuple[JobRow, bool]] = []
            for unit, owner, result in zip(units, owners, results, strict=True):
                if isinstance(result, list):
                    taken += 1
                    held = any(isinstance(e, JobQuarantined) for e in unit[0].events)
                    self.quarantined += int(held)
                    rescued.append((owner, held))
            transaction.forget_workers([worker.worker_id for worker in dead])
        self.rescued += taken
        for row, held in rescued:  # counted once the write has committed
            self._recorder.job_rescued(row.queue, row.kind, quarantined=held)
        for worker in dead:
            log.warning(
                "worker stopped heartbeating; its jobs were rescued",
                worker_id=worker.worker_id,
                host=worker.host,
                pid=worker.pid,
                jobs=len(crashed_by_worker.get(worker.worker_id, [])),
            )
        return taken
