"""The duties one started runtime's keeper runs, whatever it runs besides.

Every runtime, scheduler or workers or both, keeps the same fenced duties
(compaction, the activity roll-up, the rescue of workers whose heartbeat
expired) and competes for the one maintenance lease: whoever holds it runs
them all, so no duty waits for a kind of process the fleet may not have. A
runtime running workers adds its own unfenced ones (`WorkerPool.duties`).
"""

from __future__ import annotations

from headgate._clock import Clock
from headgate._runtime.config import RuntimeConfig, WorkerConfig
from headgate._runtime.duties import Duty, DutyKeeper
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.maintenance import ActivityRollUp, Compaction, ExpiredRescue
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._runtime.worker_pool import WorkerPool
from headgate._store.port import Store

LEASE_TTL_RESCUES = 3
"""The maintenance lease lasts this many rescue intervals without renewal."""


def keeper_for(
    store: Store,
    clock: Clock,
    config: RuntimeConfig,
    pool: WorkerPool | None,
    *,
    recorder: Recorder = NO_METRICS,
) -> DutyKeeper:
    """The keeper of a runtime with these settings (and workers, if `pool`)."""
    duties: list[Duty] = [
        Compaction(store, config.compaction_interval_ms),
        ActivityRollUp(store),
    ]
    if pool is not None:
        identity, worker_config = pool.identity, pool.config
        duties += pool.duties()
    else:
        identity, worker_config = worker_identity(), WorkerConfig()
        rescuer = Rescuer(store, clock, identity, worker_config, recorder=recorder)
        duties.append(ExpiredRescue(rescuer, worker_config.rescue_interval_ms))
    return DutyKeeper(
        store,
        clock,
        identity,
        duties,
        lease_ttl_ms=LEASE_TTL_RESCUES * worker_config.rescue_interval_ms,
    )
