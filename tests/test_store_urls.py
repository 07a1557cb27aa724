"""Store URLs as platforms hand them out: `postgres://` and `postgresql://` (a
DATABASE_URL on Heroku or Render) mean PostgreSQL through psycopg 3, whether
given to Headgate(url), `headgate serve --db` or $HEADGATE_DB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from headgate import Headgate, StoreUnopenable
from headgate._store.sql.engine import parse_store_url
from tests.conftest import drop_postgres_schema, fresh_postgres_url
from tests.web.serving import serving, wait_until_answering

pytestmark = pytest.mark.processes


@pytest.mark.parametrize(
    "url",
    [
        "postgres://app:secret@db.example:5433/app?sslmode=require",
        "postgresql://app:secret@db.example:5433/app?sslmode=require",
        "postgres+psycopg://app:secret@db.example:5433/app?sslmode=require",
    ],
)
def test_a_platform_url_means_psycopg_3(url: str) -> None:
    parsed = parse_store_url(url)
    assert parsed.render_as_string(hide_password=False) == (
        "postgresql+psycopg://app:secret@db.example:5433/app?sslmode=require"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "postgres+psycopg2://app@db/app",
            "store URL: driver 'psycopg2' is not supported; use postgresql:// (psycopg 3)",
        ),
        (
            "mysql://app@db/app",
            "store URL: 'mysql' is not supported; use sqlite:///path.db or postgresql://",
        ),
    ],
)
def test_other_urls_are_refused_naming_the_rule(url: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_store_url(url)
    assert str(refused.value) == message


@pytest.fixture
def platform_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh schema's URL, spelled `postgres://` with no driver."""
    url, schema = fresh_postgres_url(postgres_server_url)
    yield "postgres://" + url.split("://", 1)[1]
    drop_postgres_schema(postgres_server_url, schema)


def _command_env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def test_headgate_opens_a_postgres_url(platform_url: str) -> None:
    with Headgate(platform_url) as hg:
        hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
    with Headgate(platform_url.replace("postgres://", "postgresql://", 1)) as hg:
        assert hg.schedules.get("nightly").kind == "report.build"


def test_headgate_db_takes_a_postgres_url(platform_url: str) -> None:
    with Headgate(platform_url) as hg:
        hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
    shown = subprocess.run(
        [sys.executable, "-m", "headgate", "events", "show", "--stream", "nightly"],
        env=_command_env(HEADGATE_DB=platform_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "schedule-nightly v1  ScheduleDefined/v6" in shown.stdout


def test_serve_takes_a_postgres_url(platform_url: str, tmp_path: Path) -> None:
    with serving(tmp_path, "--db", platform_url) as (process, base):
        wait_until_answering(f"{base}/readyz")
        request = urllib.request.Request(
            f"{base}/api/v1/periodic/pulse",
            data=json.dumps({"kind": "demo", "spec": "@every:60000"}).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 201
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    assert not (tmp_path / "headgate.db").exists()
    with Headgate(platform_url) as hg:
        assert hg.schedules.get("pulse").spec == "@every:60000"


def test_headgate_names_an_unopenable_sqlite_path() -> None:
    with pytest.raises(StoreUnopenable) as refused:
        Headgate("sqlite:////nonexistent-dir/x.db")
    assert str(refused.value) == (
        "store URL: cannot open the SQLite database /nonexistent-dir/x.db: "
        "directory /nonexistent-dir does not exist"
    )
