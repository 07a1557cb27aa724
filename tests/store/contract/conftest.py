"""The store contract's fixtures: stores come from one factory.

Every test in this package is written against the port
(`headgate._store.port.Store`) and gets its stores from `make_store` only, so
the same suite proves every implementation: today the SQL adapter on SQLite
(a file) and on PostgreSQL (`store_url` is parametrised over both). To prove
another implementation, give `make_store` another way to open one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from headgate._clock import Clock
from headgate._store.port import Store
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock

StoreFactory = Callable[..., Store]


@pytest.fixture
def make_store(store_url: str, clock: FakeClock) -> Iterator[StoreFactory]:
    """Opens a store on this test's database (each call another handle on it)."""
    opened: list[Store] = []

    def make(clock: Clock = clock) -> Store:
        store = SqlStore(store_url, clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    return make_store()
