"""Shared fixtures: every storage test runs on SQLite (file) and PostgreSQL.

PostgreSQL comes from $HEADGATE_TEST_POSTGRES_URL; each test gets a fresh
schema in that database (cheap, and isolated under pytest-xdist). Without the
variable the PostgreSQL half is skipped with a visible reason. A test that
runs in one process on a fake clock may take the memory store too
(`AND_MEMORY`): it is fast, and proves the runtime on a second store.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NoReturn

import pytest
import structlog
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from headgate._store.opening import MEMORY_URL
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock

POSTGRES_URL = os.environ.get("HEADGATE_TEST_POSTGRES_URL", "")
BACKENDS = ["sqlite", "postgresql"]
AND_MEMORY = pytest.mark.parametrize("store_url", [*BACKENDS, "memory"], indirect=True)
"""`store_url` names each backend and `memory://` (each Headgate made on it gets a
store of its own: for tests of one Headgate in one process)."""


def _ensure_database(url: str) -> None:
    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            exists = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"),
                {"name": parsed.database},
            ).first()
            if exists is None:
                connection.execute(text(f'CREATE DATABASE "{parsed.database}"'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    if not POSTGRES_URL:
        pytest.skip("HEADGATE_TEST_POSTGRES_URL is not set; PostgreSQL half skipped")
    _ensure_database(POSTGRES_URL)
    return POSTGRES_URL


def fresh_postgres_url(server_url: str) -> tuple[str, str]:
    """A URL whose search_path is a new, empty schema; returns (url, schema)."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    engine = create_engine(server_url)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False), schema


def drop_postgres_schema(server_url: str, schema: str) -> None:
    engine = create_engine(server_url)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store on each backend."""
    yield from empty_store_url(request.param, request, tmp_path)


def empty_store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty store on `backend` (its PostgreSQL schema dropped after)."""
    if backend == "memory":
        yield MEMORY_URL
        return
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'headgate.db'}"
        return
    server = request.getfixturevalue("postgres_server_url")
    url, schema = fresh_postgres_url(server)
    yield url
    drop_postgres_schema(server, schema)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(store_url: str, clock: FakeClock) -> Iterator[SqlStore]:
    event_store = SqlStore(store_url, clock)
    yield event_store
    event_store.close()


@pytest.fixture(autouse=True)
def _structlog_as_a_host_left_it() -> Iterator[None]:
    """structlog.testing.capture_logs leaves structlog marked configured (with
    its defaults, which print to stdout): a later test would then see Headgate's
    log lines in its captured output. Each test starts unconfigured."""
    yield
    structlog.reset_defaults()


FAST_HALF_LEAVES_OUT: Final = ("postgresql", "processes", "slow")
"""The markers `--fast` leaves out: a developer's minute-long run of everything
that runs in one process on SQLite, memory or no store, on a fake clock."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast half: leave out the " + ", ".join(FAST_HALF_LEAVES_OUT) + " tests",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the PostgreSQL half (`postgresql`) by a parameter or its fixture, and
    with `--fast` leave out every test that one of FAST_HALF_LEAVES_OUT marks."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        if "postgresql" in params or "postgres_server_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgresql)
    if not config.getoption("--fast"):
        return
    kept, left_out = [], []
    for item in items:
        marked = any(item.get_closest_marker(name) for name in FAST_HALF_LEAVES_OUT)
        (left_out if marked else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


class _UnmarkedProcessStart(AssertionError):
    """A test not marked `processes` started an operating-system process."""


@pytest.fixture(autouse=True)
def _processes_are_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test that starts a process (subprocess, multiprocessing, a fork) carries
    the `processes` marker, so `--fast` can leave it out: unmarked, the start fails."""
    if request.node.get_closest_marker("processes") is not None:
        yield
        return

    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise _UnmarkedProcessStart(
            f"{request.node.nodeid} starts a process: mark it @pytest.mark.processes"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    yield
