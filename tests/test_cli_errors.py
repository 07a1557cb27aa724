"""Every way a command can be given a bad store or a bad option ends the same:
one line on stderr, no traceback, the README's exit status (1 not found,
refused or a store error; 2 bad input).

Each case runs through `main()` as the `headgate` script does, with its streams
captured; a warning a command logs would reach stderr in a process of its own
(Python's last-resort handler), so it counts as a line here too. The cases the
issue names run through the installed script as well.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from headgate import Headgate
from headgate._store.sql.store import SqlStore
from headgate.cli import main
from headgate.testing import FakeClock
from tests.conftest import drop_postgres_schema, fresh_postgres_url
from tests.web.serving import headgate_command, server_environment

pytestmark = pytest.mark.processes

NOT_FOUND_OR_STORE = 1
BAD_INPUT = 2

STORE_COMMANDS = [
    ["schedules", "list"],
    ["schedules", "show", "s1"],
    ["schedules", "put", "s1", "--spec", "@every:60000", "--kind", "k"],
    ["schedules", "delete", "s1"],
    ["schedules", "pause", "s1"],
    ["schedules", "resume", "s1"],
    ["schedules", "enqueue-now", "s1"],
    ["jobs", "list"],
    ["jobs", "show", "j"],
    ["jobs", "cancel", "j"],
    ["jobs", "retry", "j"],
    ["quarantine", "list"],
    ["quarantine", "release", "f"],
    ["quarantine", "add", "f"],
    ["events", "show"],
    ["events", "replay"],
    ["projections", "rebuild"],
    ["projections", "rebuild", "--verify"],
]


@dataclass
class Ended:
    status: int
    stdout: str
    lines: list[str]
    """stderr's lines, and the warnings a process of its own would print there."""


@pytest.fixture
def headgate(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> Callable[..., Ended]:
    def run(*argv: str) -> Ended:
        caplog.clear()
        caplog.set_level(logging.WARNING)
        try:
            status = main(list(argv))
        except SystemExit as exit_:  # argparse's own errors
            status = int(exit_.code or 0)
        captured = capsys.readouterr()
        warnings = [record.getMessage() for record in caplog.records]
        return Ended(status, captured.out, captured.err.splitlines() + warnings)

    return run


def _one_line(ended: Ended, status: int, what: str) -> None:
    shown = "\n".join(ended.lines)
    assert "Traceback" not in shown, f"{what}:\n{shown}"
    assert len(ended.lines) == 1, f"{what}: {len(ended.lines)} lines:\n{shown}"
    assert ended.lines[0].startswith("error: "), f"{what}: {shown}"
    assert ended.status == status, f"{what}: exit {ended.status}, not {status}: {shown}"


def _sqlite_cases(tmp_path: Path) -> dict[str, tuple[str, int]]:
    """Bad SQLite --db values: (URL, exit status)."""
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "not-a-database").write_text("just some text, not SQLite\n" * 100)
    with sqlite3.connect(tmp_path / "someone-elses.db") as other:
        other.execute("CREATE TABLE orders (id INTEGER)")
    deep = "/".join(["d" * 200] * 30)
    return {
        "a name too long": ("sqlite:///" + "a" * 300, BAD_INPUT),
        "a path too long": (f"sqlite:///{tmp_path}/{deep}/x.db", BAD_INPUT),
        "a directory": (f"sqlite:///{tmp_path}/a-directory", BAD_INPUT),
        # commands never create a store: where none can be, there is none (1)
        "under a file": (f"sqlite:///{tmp_path}/not-a-database/x.db", NOT_FOUND_OR_STORE),
        "a missing directory": ("sqlite:////nonexistent-dir/x.db", NOT_FOUND_OR_STORE),
        "a file that is not a database": (
            f"sqlite:///{tmp_path}/not-a-database",
            NOT_FOUND_OR_STORE,
        ),
        "a database that is not a store": (
            f"sqlite:///{tmp_path}/someone-elses.db",
            NOT_FOUND_OR_STORE,
        ),
        "a file that does not exist": (f"sqlite:///{tmp_path}/nothing.db", NOT_FOUND_OR_STORE),
        "in memory": ("sqlite://", BAD_INPUT),
        "SQLite options": (f"sqlite:///{tmp_path}/x.db?timeout=5", BAD_INPUT),
        "an unknown scheme": ("redis://localhost/0", BAD_INPUT),
        "an unsupported driver": ("postgresql+asyncpg://app@127.0.0.1/x", BAD_INPUT),
        "an unparseable URL": ("postgresql://postgres:pw@[::1/x", BAD_INPUT),
        "an unparseable port": ("postgresql://postgres@127.0.0.1:abc/x", BAD_INPUT),
        "an unencoded @ in the password": ("postgresql://postgres:p@ss@127.0.0.1/x", BAD_INPUT),
        "an empty URL": ("", BAD_INPUT),
    }


@pytest.mark.parametrize("command", STORE_COMMANDS, ids=" ".join)
def test_every_command_refuses_every_bad_sqlite_url_in_one_line(
    command: list[str], headgate: Callable[..., Ended], tmp_path: Path
) -> None:
    cases = _sqlite_cases(tmp_path)
    for case, (url, status) in cases.items():
        _one_line(headgate(*command, "--db", url), status, f"{case}: {url[:80]}")
    assert not (tmp_path / "nothing.db").exists(), "no command creates a store"
    with sqlite3.connect(tmp_path / "someone-elses.db") as other:
        tables = other.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == [("orders",)], "nothing was migrated into someone else's database"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes anything")
def test_every_command_refuses_a_store_it_has_no_permission_for(
    headgate: Callable[..., Ended], tmp_path: Path
) -> None:
    SqlStore(f"sqlite:///{tmp_path}/h.db", FakeClock()).close()
    (tmp_path / "h.db").chmod(0o000)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        for command in STORE_COMMANDS:
            for url in (f"sqlite:///{tmp_path}/h.db", f"sqlite:///{locked}/x.db"):
                ended = headgate(*command, "--db", url)
                _one_line(ended, ended.status, url)
                assert ended.status in (NOT_FOUND_OR_STORE, BAD_INPUT)
    finally:
        (tmp_path / "h.db").chmod(0o600)


@pytest.fixture
def postgres_cases(postgres_server_url: str) -> Iterator[dict[str, tuple[str, int]]]:
    """Bad PostgreSQL --db values, the server up: (URL, exit status)."""
    url, schema = fresh_postgres_url(postgres_server_url)
    no_rights_url, no_rights_schema = fresh_postgres_url(postgres_server_url)
    SqlStore(no_rights_url, FakeClock()).close()
    engine = create_engine(postgres_server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(
            text(
                "DO $$ BEGIN CREATE ROLE headgate_test_no_rights LOGIN; "
                "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
            )
        )
        connection.execute(
            text(f'GRANT USAGE ON SCHEMA "{no_rights_schema}" TO headgate_test_no_rights')
        )
    engine.dispose()
    parsed = make_url(url)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    yield {
        "a host that refuses": (
            parsed.set(port=closed_port).render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "an unknown host": (
            parsed.set(host="nosuch.invalid").render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "a wrong database": (
            parsed.set(database="no_such_database").render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "an unknown role": (
            parsed.set(username="no_such_role").render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "no permission on the store": (
            make_url(no_rights_url)
            .set(username="headgate_test_no_rights")
            .render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "a bad driver option": (
            parsed.update_query_dict({"sslmode": "bogus"}).render_as_string(hide_password=False),
            NOT_FOUND_OR_STORE,
        ),
        "a schema that holds no store": (url, NOT_FOUND_OR_STORE),
    }
    drop_postgres_schema(postgres_server_url, schema)
    drop_postgres_schema(postgres_server_url, no_rights_schema)


def test_every_command_refuses_every_bad_postgres_url_in_one_line(
    postgres_cases: dict[str, tuple[str, int]],
    headgate: Callable[..., Ended],
    postgres_server_url: str,
) -> None:
    for command in STORE_COMMANDS:
        for case, (url, status) in postgres_cases.items():
            _one_line(headgate(*command, "--db", url), status, f"{command}: {case}")
    empty = postgres_cases["a schema that holds no store"][0]
    engine = create_engine(empty)
    with engine.connect() as connection:
        schema = connection.execute(text("SELECT current_schema()")).scalar()
        tables = connection.execute(
            text("SELECT count(*) FROM information_schema.tables WHERE table_schema = :s"),
            {"s": schema},
        ).scalar()
    engine.dispose()
    assert tables == 0, "no command made a store in a database that held none"


@pytest.fixture
def store_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    with Headgate(url) as hg:
        hg.schedules.put("s1", spec="@every:60000", kind="k")
    return url


def test_bad_options_are_refused_in_one_line(
    headgate: Callable[..., Ended], store_db: str, tmp_path: Path
) -> None:
    db = ["--db", store_db]
    cases: list[tuple[list[str], int]] = [
        ([], BAD_INPUT),
        (["schedules"], BAD_INPUT),
        (["jobs"], BAD_INPUT),
        (["quarantine"], BAD_INPUT),
        (["events"], BAD_INPUT),
        (["projections"], BAD_INPUT),
        (["nosuchcommand"], BAD_INPUT),
        (["schedules", "list", "--limit", "0", *db], BAD_INPUT),
        (["schedules", "list", "--limit", "x", *db], BAD_INPUT),
        (["schedules", "list", "--cursor", "forged", *db], BAD_INPUT),
        (["schedules", "put", "x", "--spec", "61 * * * *", "--kind", "k", *db], BAD_INPUT),
        (
            [
                "schedules",
                "put",
                "x",
                "--spec",
                "@every:1000",
                "--kind",
                "k",
                "--payload",
                "{",
                *db,
            ],
            BAD_INPUT,
        ),
        (
            [
                "schedules",
                "put",
                "x",
                "--spec",
                "@every:1000",
                "--kind",
                "k",
                "--payload",
                "[" * 100_000,
                *db,
            ],
            BAD_INPUT,
        ),
        (
            [
                "schedules",
                "put",
                "x",
                "--spec",
                "@every:1000",
                "--kind",
                "k",
                "--jitter-ms",
                "-1",
                *db,
            ],
            BAD_INPUT,
        ),
        (
            [
                "schedules",
                "put",
                "x",
                "--spec",
                "@every:1000",
                "--kind",
                "k",
                "--start-at-ms",
                "9" * 30,
                *db,
            ],
            BAD_INPUT,
        ),
        (["schedules", "put", "x" * 1000, "--spec", "@every:1000", "--kind", "k", *db], BAD_INPUT),
        (["schedules", "enqueue-now", "s1", "--idempotency-key", "", *db], BAD_INPUT),
        (["schedules", "show", "nope", *db], NOT_FOUND_OR_STORE),
        (["jobs", "list", "--state", "bogus", *db], BAD_INPUT),
        (["jobs", "show", "nope", *db], NOT_FOUND_OR_STORE),
        (["quarantine", "release", "nope", *db], BAD_INPUT),
        (["quarantine", "release", "0" * 32, *db], NOT_FOUND_OR_STORE),
        (["events", "show", "--after", "-1", *db], BAD_INPUT),
        (["events", "show", "--stream", "nope", *db], NOT_FOUND_OR_STORE),
        (["events", "replay", "--until", "x", *db], BAD_INPUT),
        (["events", "replay", "--to", "sqlite:///" + "a" * 300, *db], BAD_INPUT),
        (["events", "replay", "--to", "sqlite:////nonexistent-dir/x.db", *db], BAD_INPUT),
        (["events", "replay", "--to", f"sqlite:///{tmp_path}", *db], BAD_INPUT),
        (["events", "replay", "--to", "postgresql://u:pw@[::1/x", *db], BAD_INPUT),
        (["events", "replay", "--to", store_db, *db], NOT_FOUND_OR_STORE),
        (["projections", "rebuild", "--batch-size", "0", *db], BAD_INPUT),
        (["projections", "rebuild", "--projection", "nope", *db], BAD_INPUT),
        (["ticks", "bogus"], NOT_FOUND_OR_STORE),
        (["ticks", "--count", "0"], BAD_INPUT),
        (["worker"], BAD_INPUT),
        (["worker", "--app", "x:y", "--shutdown-timeout", "nan"], BAD_INPUT),
        (["worker", "--app", "x:y", "--shutdown-timeout", "inf"], BAD_INPUT),
        (["worker", "--app", "x:y", "--shutdown-timeout", "1e400"], BAD_INPUT),
        (["worker", "--app", "x:y", "--shutdown-timeout", "-1"], BAD_INPUT),
        (["worker", "--app", "x:y", "--max-jobs-per-child", "0"], BAD_INPUT),
        (["worker", "--app", "x:y", "--child-memory-limit-mb", "8"], BAD_INPUT),
        (["worker", "--app", "x:y", "--queue", "a=0"], BAD_INPUT),
        (["worker", "--app", "no_such_module:hg"], NOT_FOUND_OR_STORE),
        (["serve", "--port", "99999"], BAD_INPUT),
        (["serve", "--header-timeout", "0"], BAD_INPUT),
        (["serve", "--header-timeout", "nan"], BAD_INPUT),
        (["serve", "--body-timeout", "-5"], BAD_INPUT),
        (["serve", "--body-timeout", "x"], BAD_INPUT),
        (["serve", "--max-connections", "0"], BAD_INPUT),
        (["serve", "--host", "no such host!", "--port", "0", *db], BAD_INPUT),
        (["serve", "--host", "192.0.2.1", "--port", "0", *db], BAD_INPUT),
    ]
    for argv, status in cases:
        _one_line(headgate(*argv), status, " ".join(a[:40] for a in argv))


def _script(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [headgate_command(), *argv],
        cwd=cwd,
        env=server_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cases_the_issue_names_through_the_installed_script(tmp_path: Path) -> None:
    long_name = _script("jobs", "list", "--db", "sqlite:///" + "a" * 300, cwd=tmp_path)
    assert long_name.returncode == BAD_INPUT
    assert long_name.stderr == (
        f"error: store URL: cannot open the SQLite database {'a' * 300}: File name too long\n"
    )
    unparseable = _script("schedules", "list", "--db", "postgresql://u:pw@[::1/x", cwd=tmp_path)
    assert unparseable.returncode == BAD_INPUT
    assert unparseable.stderr == (
        "error: store URL: 'postgresql://u:***@[::1/x' is not a database URL\n"
    )
    assert list(tmp_path.iterdir()) == []
