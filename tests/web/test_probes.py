"""GET /healthz and /readyz as a load balancer or Kubernetes calls them: no token,
on SQLite and PostgreSQL, through the store's real states."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text
from structlog.testing import capture_logs

from headgate import Headgate, StoreUnavailable
from headgate._store.sql.migrations import LATEST_VERSION
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.faults import FaultyStore
from tests.web.conftest import LOCAL


def test_healthz_answers_without_reading_the_store(hg: Headgate) -> None:
    with TestClient(create_app(hg, api_token="")) as client:
        hg.close()  # a store that is gone leaves the process healthy
        response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_reports_the_schema_revision(client: TestClient) -> None:
    response = client.get("/readyz")
    assert (response.status_code, response.json()) == (
        200,
        {
            "status": "ready",
            "schema_revision": LATEST_VERSION,
            "scheduler": {"state": "ok", "message": "ticks fire on time"},
        },
    )


def test_readyz_is_503_when_the_schema_is_behind(hg: Headgate, store_url: str) -> None:
    """As after a restore from an older backup, under a running process."""
    store = SqlStore(store_url, FakeClock())
    with store.engine.begin() as connection:
        connection.execute(text("UPDATE headgate_alembic_version SET version_num = '0001'"))
    store.close()
    with TestClient(create_app(hg, api_token="")) as client, capture_logs() as logs:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": "schema_behind",
        "message": "the store's schema is behind this build: start a process that migrates it",
    }
    (logged,) = [line for line in logs if line["event"] == "not ready"]
    latest = f"{LATEST_VERSION:04d}"
    assert f"schema revision 0001, behind this Headgate's {latest}" in logged["detail"]


@pytest.fixture
def faulty(store_url: str) -> Iterator[tuple[Headgate, FaultyStore]]:
    store = FaultyStore(SqlStore(store_url, FakeClock()))
    hg = Headgate(store)
    yield hg, store
    hg.close()


def test_readyz_is_503_when_the_store_is_unreachable(
    faulty: tuple[Headgate, FaultyStore],
) -> None:
    hg, store = faulty

    def unreachable() -> None:
        raise StoreUnavailable("reading the schema version: store unavailable: connection refused")

    store.faults.before_schema_read = unreachable
    with TestClient(create_app(hg, api_token="")) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["reason"] == "store_unreachable"
        assert "connection refused" not in response.text, "driver text stays in the log"
        store.faults.before_schema_read = None
        assert client.get("/readyz").status_code == 200


def test_readyz_is_503_once_headgate_is_closed(hg: Headgate) -> None:
    with TestClient(create_app(hg, api_token="")) as client:
        hg.close()
        response = client.get("/readyz")
    assert (response.status_code, response.json()["reason"]) == (503, "store_closed")


def test_probes_need_no_token_even_when_mounted(hg: Headgate) -> None:
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="s3cret"))
    with TestClient(host, base_url=LOCAL) as client:
        assert client.get("/scheduler/healthz").json() == {"status": "ok"}
        assert client.get("/scheduler/readyz").json()["status"] == "ready"
        assert client.get("/scheduler/healthz/x").status_code == 401
        assert client.get("/scheduler/api/v1/periodic").status_code == 401


def test_probes_are_not_part_of_the_api_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/healthz", "/readyz"} & set(paths)


def _drop_table(store_url: str, table: str) -> None:
    store = SqlStore(store_url, FakeClock())
    cascade = " CASCADE" if store.backend.name == "postgresql" else ""
    with store.engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {table}{cascade}"))
    store.close()


def test_readyz_is_503_when_a_table_the_api_reads_is_missing(hg: Headgate, store_url: str) -> None:
    """The revision still reads right; every call that reads the table would fail."""
    _drop_table(store_url, "headgate_jobs")
    with TestClient(create_app(hg, api_token="")) as client, capture_logs() as logs:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": "schema_incomplete",
        "message": "a table this build needs is missing from the store: see the log",
    }
    (logged,) = [line for line in logs if line["event"] == "not ready"]
    assert logged["error_type"] == "SchemaIncomplete"
    assert "lacks the table(s) headgate_jobs" in logged["detail"]


def test_readyz_is_503_when_a_column_cannot_be_read(hg: Headgate, store_url: str) -> None:
    store = SqlStore(store_url, FakeClock())
    with store.engine.begin() as connection:
        connection.execute(text("ALTER TABLE headgate_queue_turns DROP COLUMN turn"))
    store.close()
    with TestClient(create_app(hg, api_token="")) as client, capture_logs() as logs:
        response = client.get("/readyz")
    assert response.status_code == 503
    (logged,) = [line for line in logs if line["event"] == "not ready"]
    assert logged["error_type"].startswith("Store")  # the driver's error, translated
    assert "turn" in logged["detail"] and "reading the store's tables" in logged["detail"]


def test_a_503_logs_its_cause_masked(hg: Headgate, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*_: object, **__: object) -> None:
        try:
            raise OSError("connection refused")
        except OSError as cause:
            raise StoreUnavailable(
                "listing jobs: store unavailable: postgresql://app:hunter2@db/app refused"
            ) from cause

    monkeypatch.setattr(hg.jobs, "list", unavailable)
    with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client, capture_logs() as logs:
        response = client.get("/api/v1/jobs")
    assert response.status_code == 503
    assert "refused" not in response.text, "the cause stays in the log"
    (logged,) = [line for line in logs if line["event"] == "store unavailable"]
    assert logged["error_type"] == "StoreUnavailable from OSError"
    assert logged["error"] == "listing jobs: store unavailable: postgresql://app:***@db/app refused"
