"""PostgreSQL's NOTIFY channel spans a database; stores in schemas side by side
must not wake each other's workers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import drop_postgres_schema, fresh_postgres_url


@pytest.fixture
def two_schemas(postgres_server_url: str) -> Iterator[tuple[SqlStore, SqlStore]]:
    (url_a, schema_a), (url_b, schema_b) = (
        fresh_postgres_url(postgres_server_url),
        fresh_postgres_url(postgres_server_url),
    )
    store_a, store_b = SqlStore(url_a, FakeClock()), SqlStore(url_b, FakeClock())
    yield store_a, store_b
    store_a.close()
    store_b.close()
    drop_postgres_schema(postgres_server_url, schema_a)
    drop_postgres_schema(postgres_server_url, schema_b)


def test_a_listener_hears_its_own_schemas_enqueues_only(
    two_schemas: tuple[SqlStore, SqlStore],
) -> None:
    store_a, store_b = two_schemas
    heard: list[str] = []
    arrived = threading.Event()

    def on_enqueued(queue: str) -> None:
        heard.append(queue)
        arrived.set()

    listener = store_a.listen(on_enqueued)
    assert listener is not None
    try:
        time.sleep(0.3)  # the listener connects
        with store_b.log.write() as transaction:
            transaction.notify_enqueued(["theirs"])
        with store_a.log.write() as transaction:
            transaction.notify_enqueued(["ours"])
        assert arrived.wait(10)
        time.sleep(0.2)
        assert heard == ["ours"]
    finally:
        listener.close()
