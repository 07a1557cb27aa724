"""The store commands as an operator runs them: output, errors, interruption."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url

from headgate import Headgate
from headgate._store.sql.engine import create_store_engine, parse_store_url
from headgate._store.sql.maintenance import verify
from headgate._store.sql.migrations import LATEST_VERSION, migrate, schema_version
from headgate._store.sql.store import SqlStore
from headgate.cli import main
from headgate.testing import FakeClock
from tests.store.builders import create_schedule, fire_tick
from tests.store.snapshots import snapshot

pytestmark = pytest.mark.processes


def _populate(url: str, schedules: int = 3, ticks: int = 4) -> None:
    store = SqlStore(url, FakeClock())
    for n in range(schedules):
        create_schedule(store, f"s{n}")
    for tick in range(1, ticks + 1):
        for n in range(schedules):
            fire_tick(store, f"s{n}", tick * 60_000)
    store.close()


def test_events_show(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _populate(store_url, schedules=1, ticks=1)
    assert main(["events", "show", "--db", store_url, "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[0] == "1"
    assert "schedule-s0 v1  ScheduleDefined/v6" in out[0]
    assert out[1].strip().startswith('{"changed_by":null,"declared":null,"declared_by":null,')
    assert "job-job-for-s0-60000 v1  JobEnqueued/v6" in out[2]
    assert main(["events", "show", "--db", store_url, "--stream", "schedule-s0"]) == 0
    assert "EnqueueAttempted/v3" in capsys.readouterr().out


def test_events_show_escapes_controls_and_bidi_overrides_in_what_was_stored(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A payload's C1 controls (CSI) and bidi overrides pass through JSON as they
    are: printed as JSON's own escapes, the body still the same JSON."""
    hg = Headgate(store_url, clock=FakeClock())
    hidden = "\x9b2J\u202egnp.exe\x1b]0;title\x07\u2028\U000e0041é"
    hg.enqueue("mail.send", {"subject": hidden})
    hg.close()
    assert main(["events", "show", "--db", store_url]) == 0
    out = capsys.readouterr().out
    assert out.isprintable() or all(c.isprintable() or c == "\n" for c in out), repr(out)
    body = json.loads(out.splitlines()[-1])
    assert json.dumps({"subject": hidden}) in json.dumps(body), "the same document"
    assert "é" in out, "printable text stays as it is"


def test_events_show_takes_a_schedule_or_job_id_for_its_stream(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(store_url, schedules=2, ticks=2)
    assert main(["events", "show", "--db", store_url, "--stream", "s1"]) == 0
    streams = {line.split()[2] for line in capsys.readouterr().out.splitlines()[::2]}
    assert streams == {"schedule-s1"}
    assert main(["events", "show", "--db", store_url, "--stream", "job-for-s0-120000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert "job-job-for-s0-120000 v1  JobEnqueued/v6" in out[0]


def test_events_show_refuses_a_stream_it_cannot_find(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(store_url, schedules=1, ticks=1)
    assert main(["events", "show", "--db", store_url, "--stream", "s9"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: --stream: no stream, schedule or job 's9' has events in the log\n"
    )


READ_ONLY_COMMANDS = {
    "events show": (["events", "show"], "nothing to show"),
    "projections rebuild --verify": (["projections", "rebuild", "--verify"], "nothing to verify"),
}


def _headgate_tables(url: str) -> list[str]:
    """The tables a database holds (for SQLite, only called on a file that exists)."""
    engine = create_engine(url)
    try:
        return sorted(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_read_only_commands_create_no_store(
    command: str, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an empty PostgreSQL schema and a SQLite path with no file, a command
    that only reads says so and leaves nothing behind: no file, no table."""
    argv, nothing_to = READ_ONLY_COMMANDS[command]
    sqlite_file = Path(make_url(store_url).database or "") if "sqlite" in store_url else None
    assert main([*argv, "--db", store_url]) == 1
    captured = capsys.readouterr()
    shown = parse_store_url(store_url).render_as_string(hide_password=True)
    assert captured.err == f"error: no Headgate store at {shown} ({nothing_to})\n"
    if sqlite_file is not None:
        assert list(sqlite_file.parent.iterdir()) == []
    else:
        assert _headgate_tables(store_url) == []


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_read_only_commands_leave_a_store_behind_its_schema_unmigrated(
    command: str, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, _ = READ_ONLY_COMMANDS[command]
    engine = create_store_engine(store_url)
    migrate(engine, target=1)
    tables_before = _headgate_tables(store_url)
    assert main([*argv, "--db", store_url]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: the store at ")
    assert f"is at schema revision 0001, behind this Headgate's {LATEST_VERSION:04d}" in error
    assert "run one that migrates (headgate serve" in error
    assert len(error.splitlines()) == 1
    assert schema_version(engine) == 1
    assert _headgate_tables(store_url) == tables_before
    engine.dispose()


def test_projections_rebuild_and_verify(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _populate(store_url)
    assert main(["projections", "rebuild", "--db", store_url]) == 0
    out = capsys.readouterr().out
    assert "schedules: applied 15 events" in out
    assert "projections rebuilt up to position 27" in out
    assert main(["projections", "rebuild", "--db", store_url, "--verify"]) == 0
    assert "verified up to position 27: identical" in capsys.readouterr().out


def test_replay_prints_a_summary(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _populate(store_url)
    assert main(["events", "replay", "--db", store_url, "--until", "10"]) == 0
    out = capsys.readouterr().out
    assert "replayed events up to position 10 into scratch tables headgate_replay_*" in out
    assert "table headgate_replay_schedules: 3 rows" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["events", "show", "--db", "sqlite:////nonexistent/dir/x.db"],
            "error: no Headgate store at sqlite:////nonexistent/dir/x.db (nothing to show)",
        ),
        (
            ["events", "show", "--db", "postgresql://postgres@127.0.0.1:1/x"],
            "error: reading the schema version: store unavailable: connection failed",
        ),
        (
            ["events", "replay", "--db", "postgresql://postgres@127.0.0.1:1/x"],
            "error: reading the schema version: store unavailable: connection failed",
        ),
        (
            ["events", "show", "--db", "{db}", "--stream", "nope"],
            "error: --stream: no stream, schedule or job 'nope' has events in the log",
        ),
        (
            ["events", "show", "--db", "redis://localhost"],
            "error: store URL: 'redis' is not supported",
        ),
        (
            ["events", "show", "--db", "postgresql+asyncpg://postgres@127.0.0.1/x"],
            "error: store URL: driver 'asyncpg' is not supported; use postgresql:// (psycopg 3)",
        ),
        (
            ["events", "show", "--db", "postgresql://u@[::1/db"],
            "error: store URL: 'postgresql://u@[::1/db' is not a database URL",
        ),
        (
            ["events", "show", "--db", "{db}?timeout=abc"],
            "error: store URL: SQLite takes no options here (timeout)",
        ),
        (
            ["events", "show", "--limit", "0"],
            "error: headgate events show: argument --limit: must be 1-10000, got 0",
        ),
        (
            ["projections", "rebuild", "--batch-size", "99999999999999999999999", "--db", "{db}"],
            "error: headgate projections rebuild: argument --batch-size: must be 1-100000, got",
        ),
        (
            ["ticks", "0 0 29 2 *", "--after-ms", "253402300799999", "--count", "2"],
            "error: no tick of '0 0 29 2 *' after",
        ),
        (
            ["events", "replay", "--until", "x"],
            "error: headgate events replay: argument --until: 'x' is not a whole number",
        ),
        (
            ["projections", "rebuild", "--projection", "nope", "--db", "{db}"],
            "error: --projection: unknown 'nope'",
        ),
        (
            ["projections", "rebuild", "--projection", "no\npe", "--db", "{db}"],
            "error: --projection: unknown 'no\\npe'",
        ),
    ],
)
def test_bad_arguments_get_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    SqlStore(db, FakeClock()).close()
    status = subprocess.run(
        [sys.executable, "-m", "headgate", *[a.replace("{db}", db) for a in argv]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode in (1, 2)
    assert status.stderr.startswith(message), status.stderr
    assert "Traceback" not in status.stderr
    assert len(status.stderr.strip().splitlines()) == 1


def test_a_killed_rebuild_resumes(store_url: str) -> None:
    _populate(store_url, schedules=10, ticks=30)
    store = SqlStore(store_url, FakeClock())
    live = snapshot(store.engine)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "headgate",
            "projections",
            "rebuild",
            "--db",
            store_url,
            "--batch-size",
            "25",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert child.stderr is not None
    for line in child.stderr:
        percent = re.search(r"\((\d+)%", line)
        if line.startswith("rebuild:") and percent and 30 <= int(percent[1]) < 100:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    resumed = subprocess.run(
        [sys.executable, "-m", "headgate", "projections", "rebuild", "--db", store_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "schedules: resumed an interrupted rebuild" in resumed.stdout
    assert snapshot(store.engine) == live
    assert verify(store).ok
    store.close()
