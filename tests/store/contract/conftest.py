"""The store contract's fixtures: stores come from one factory.

Every test in this package is written against the port
(`headgate._store.port.Store`) and gets its stores from `make_store` only, so
the same suite proves every implementation: the SQL adapter on SQLite (a
file) and on PostgreSQL, and the memory store. Each call of `make_store`
opens another handle on the test's one store, as another process would
(memory handles share one `MemoryState`). To prove another implementation,
add it to `IMPLEMENTATIONS` and give `make_store` a way to open it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headgate._clock import Clock
from headgate._store.memory import MemoryState, MemoryStore
from headgate._store.port import Store
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import BACKENDS, empty_store_url

StoreFactory = Callable[..., Store]
IMPLEMENTATIONS = [*BACKENDS, "memory"]


@pytest.fixture(params=IMPLEMENTATIONS)
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[StoreFactory]:
    """Opens a handle on this test's store (each call another handle on it)."""
    opened: list[Store] = []
    if request.param == "memory":
        state = MemoryState()

        def open_store(clock: Clock) -> Store:
            return MemoryStore(clock, state)

        urls: Iterator[str] = iter(())
    else:
        urls = empty_store_url(request.param, request, tmp_path)
        url = next(urls)

        def open_store(clock: Clock) -> Store:
            return SqlStore(url, clock)

    def make(clock: Clock = clock) -> Store:
        store = open_store(clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
    for _ in urls:  # drops the PostgreSQL schema
        pass


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    return make_store()
