"""Fixtures for the runtime: a Headgate on each backend with a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import select

from headgate import Headgate, RuntimeConfig
from headgate._store.schema import LIVE
from headgate.testing import FakeClock

START_MS = 1_704_067_200_000  # 2024-01-01T00:00Z


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def make_headgate(store_url: str, clock: FakeClock) -> Iterator[Callable[..., Headgate]]:
    created: list[Headgate] = []

    def make(config: RuntimeConfig | None = None, **kwargs: object) -> Headgate:
        hg = Headgate(
            store_url, clock=clock, config=config or RuntimeConfig(lease_ttl_ms=60_000), **kwargs
        )  # type: ignore[arg-type]
        created.append(hg)
        return hg

    yield make
    for hg in created:
        hg.close()


@pytest.fixture
def hg(make_headgate: Callable[..., Headgate]) -> Headgate:
    return make_headgate()


def fire(hg: Headgate) -> None:
    """Start if needed, fire everything due at the fake clock's now, and wait."""
    if not hg.running:
        hg.start()
    assert hg.run_pending(timeout=30), "this runtime should hold the scheduler lease"


def jobs_for(hg: Headgate, schedule_id: str) -> list[int]:
    """Tick of every job the scheduler created for the schedule (oldest first), from the
    jobs themselves: an audit record saying `enqueued` is not proof of a job."""
    jobs = LIVE.jobs
    query = (
        select(jobs.c.periodic_tick_ms)
        .where(jobs.c.periodic_schedule_id == schedule_id)
        .order_by(jobs.c.periodic_tick_ms)
    )
    with hg.store.engine.connect() as connection:
        return [int(tick) for (tick,) in connection.execute(query)]
