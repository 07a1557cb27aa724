"""Where Headgate's lines go, in a fresh interpreter: the library configures
nothing; with structlog unconfigured, the host's stdlib logging decides."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headgate._logs import escape_unprintable

pytestmark = pytest.mark.processes

SECRET = "TOPSECRET-PAYLOAD"


def test_a_failing_hook_is_logged_without_the_payload(tmp_path: Path) -> None:
    """Tracebacks by default must not print frames' locals: they hold payloads."""
    script = textwrap.dedent(
        f"""
        from headgate import Headgate
        from headgate.testing import FakeClock

        class Broken:
            def before_enqueue(self, context):
                payload = context.schedule.payload
                raise RuntimeError("hook broke")

            def after_enqueue(self, context, result):
                pass

        clock = FakeClock(1_704_067_200_000)
        hg = Headgate("sqlite:///{tmp_path}/h.db", clock=clock, hooks=[Broken()])
        hg.schedules.put("s", spec="@every:60000", kind="k", payload={{"secret": "{SECRET}"}})
        clock.advance(60_000)
        hg.start()
        assert hg.fire_due_ticks(timeout=30)
        hg.close()
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert "enqueue hook failed" in finished.stderr
    assert "RuntimeError: hook broke" in finished.stderr
    assert SECRET not in finished.stderr + finished.stdout


def test_default_lines_carry_no_colour_codes_off_a_terminal(tmp_path: Path) -> None:
    """A host's log file (stderr not a terminal) gets plain text."""
    script = textwrap.dedent(
        f"""
        import logging
        from headgate import Headgate
        logging.basicConfig(level=logging.INFO)
        hg = Headgate("sqlite:///{tmp_path}/h.db")
        hg.start()
        hg.close()
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert "runtime started" in finished.stderr
    assert "\x1b[" not in finished.stderr


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_hosts_stdlib_level_is_respected_and_nothing_is_configured(tmp_path: Path) -> None:
    """`uvicorn --log-level warning` and the like: INFO lines (one per tick) stay
    quiet, warnings still reach the host's handlers, and Headgate configured
    neither structlog nor the root logger."""
    finished = _run(
        f"""
        import logging, structlog
        from headgate import Headgate
        from headgate.testing import FakeClock

        class Broken:
            def before_enqueue(self, context):
                raise RuntimeError("hook broke")
            def after_enqueue(self, context, result):
                pass

        logging.basicConfig(level=logging.WARNING, format="HOST %(name)s %(message)s")
        clock = FakeClock(1_704_067_200_000)
        hg = Headgate("sqlite:///{tmp_path}/h.db", clock=clock, hooks=[Broken()])
        hg.schedules.put("s", spec="@every:60000", kind="k")
        clock.advance(60_000)
        hg.start()
        assert hg.fire_due_ticks(timeout=30)
        hg.close()
        assert not structlog.is_configured()
        assert len(logging.getLogger().handlers) == 1
        """
    )
    assert finished.returncode == 0, finished.stderr
    assert "HOST headgate.scheduler enqueue hook failed" in finished.stderr
    assert "runtime started" not in finished.stderr
    assert "enqueue attempt" not in finished.stderr


def test_with_no_logging_configured_warnings_still_reach_stderr(tmp_path: Path) -> None:
    finished = _run(
        f"""
        from headgate import Headgate
        from headgate.testing import FakeClock

        class Broken:
            def before_enqueue(self, context):
                raise RuntimeError("hook broke")
            def after_enqueue(self, context, result):
                pass

        clock = FakeClock(1_704_067_200_000)
        hg = Headgate("sqlite:///{tmp_path}/h.db", clock=clock, hooks=[Broken()])
        hg.schedules.put("s", spec="@every:60000", kind="k")
        clock.advance(60_000)
        hg.start()
        assert hg.fire_due_ticks(timeout=30)
        hg.close()
        """
    )
    assert finished.returncode == 0, finished.stderr
    assert "enqueue hook failed" in finished.stderr
    assert "RuntimeError: hook broke" in finished.stderr
    assert "enqueue attempt" not in finished.stderr


def test_making_a_store_says_one_line_and_alembic_says_nothing(tmp_path: Path) -> None:
    """Alembic narrates every run at INFO; a host logging at INFO sees Headgate's
    own line instead, and importing Headgate loads no Alembic at all."""
    finished = _run(
        f"""
        import logging, sys
        logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        import headgate
        assert "alembic" not in sys.modules
        headgate.Headgate("sqlite:///{tmp_path}/h.db").close()
        headgate.Headgate("sqlite:///{tmp_path}/h.db").close()  # up to date: silent
        """
    )
    assert finished.returncode == 0, finished.stderr
    lines = [line for line in finished.stderr.splitlines() if line.strip()]
    assert not [line for line in lines if line.startswith("alembic")], lines
    assert sum("store created" in line for line in lines) == 1, lines


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eexe.txt\nforged line"
"""What a page can make a request carry: an OSC title, a screen clear, a C1 CSI,
a bidi override and a line break."""
UNPRINTABLE = ("\x1b", "\x07", "\x9b", "\u202e")


def test_serves_log_escapes_what_a_request_carries_in_every_field() -> None:
    """Issue 36: the write guard logs the decoded path a cross-site write named; on
    a terminal (key=value lines) its escapes reached the operator's terminal."""
    finished = _run(
        f"""
        from urllib.parse import quote
        from fastapi.testclient import TestClient
        from headgate import Headgate
        from headgate._logs import configure_logging, get_logger
        from headgate.web import create_app

        configure_logging(json_lines=False)  # as on a terminal
        hostile = {HOSTILE!r}
        with Headgate("memory://") as hg:
            app = create_app(hg, api_token="")
            with TestClient(app, base_url="http://127.0.0.1") as client:
                client.post("/api/v1/" + quote(hostile), headers={{"Origin": "http://x"}})
            get_logger("headgate").warning(
                hostile, nested={{hostile: [hostile]}}, error=ValueError(hostile)
            )
            try:
                raise RuntimeError(hostile)
            except RuntimeError:
                get_logger("headgate").exception("failed")
        """
    )
    assert finished.returncode == 0, finished.stderr
    err = finished.stderr
    assert "cross-site write refused" in err
    for character in UNPRINTABLE:
        assert character not in err, (character, err)
    lines = err.splitlines()
    (refused,) = [line for line in lines if "cross-site write refused" in line]
    (logged,) = [line for line in lines if "nested=" in line]
    for line in (refused, logged):
        for shown in ("\\x1b]0;pwned", "\\x07", "\\x1b[2J", "\\x9b31m", "\\u202eexe", "\\nforged"):
            assert shown in line, (shown, line)
    assert "path=" in refused and "error=" in logged
    assert "Traceback (most recent call last):\n" in err, "a traceback keeps its lines"


def test_a_hosts_own_logging_gets_the_fields_escaped_too(tmp_path: Path) -> None:
    """Without structlog configured (the host's stdlib logging), and with a host's
    structlog configuration that renders fields as they are."""
    finished = _run(
        f"""
        import logging, structlog
        from headgate._logs import get_logger

        hostile = {HOSTILE.replace(" ", "")!r}  # a renderer quotes (repr) one with spaces
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        get_logger("headgate").warning("refused", path=hostile)
        structlog.configure(processors=[structlog.processors.LogfmtRenderer()])  # raw values
        get_logger("headgate").warning("refused", path=hostile)
        """
    )
    assert finished.returncode == 0, finished.stderr
    output = finished.stderr + finished.stdout
    assert output.count("x1b]0;pwned") == 2, output
    for character in UNPRINTABLE:
        assert character not in output, (character, output)


def test_the_processor_escapes_every_field_and_keeps_a_tracebacks_lines() -> None:
    fields = escape_unprintable(
        None,
        "warning",
        {
            "event": "a\x1bb",
            "nested": {"k\x9b": ["\u202e", 7, None]},
            "exception": "Traceback\n  boom\x1b[31m",
            "plain": "é日本 ok",
        },
    )
    assert fields == {
        "event": "a\\x1bb",
        "nested": {"k\\x9b": ["\\u202e", 7, None]},
        "exception": "Traceback\n  boom\\x1b[31m",
        "plain": "é日本 ok",
    }


SERVING = "headgate: serving sqlite:///headgate.db on http://127.0.0.1:46615/"


def test_every_writer_to_serves_stderr_writes_whole_lines() -> None:
    """Issue 36: serve's "serving ... on" line and a log line shared a line
    (`...:46615/{"term": 1, ...`). Its own lines, its log lines, uvicorn's and a
    library's last-resort warnings, from threads at once: every line whole."""
    finished = _run(
        f"""
        import logging, threading, uvicorn
        from headgate._http_server import guard_uvicorn_lines
        from headgate._logs import configure_logging, get_logger, say

        configure_logging(json_lines=True)
        uvicorn.Config(lambda *_: None, log_level="warning")  # its handlers, on stderr
        guard_uvicorn_lines()
        go = threading.Barrier(6)

        def repeat(write):
            go.wait()
            for n in range(3000):
                write(n)

        writers = [
            lambda n: get_logger("headgate.scheduler").info("lease acquired", term=n),
            lambda n: get_logger("headgate.web").warning("refused", path="/" * (n % 300)),
            lambda n: get_logger("headgate").info("tick", schedule_id="s" * (n % 50)),
            lambda n: say({SERVING!r}),
            lambda n: logging.getLogger("uvicorn.error").warning("Exceeded concurrency limit."),
            lambda n: logging.getLogger("some.library").warning("a library's warning"),
        ]
        threads = [threading.Thread(target=repeat, args=(w,)) for w in writers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        """
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    lines = finished.stderr.splitlines()
    assert len(lines) == 6 * 3000
    torn = []
    for line in lines:
        if line in (SERVING, "WARNING:  Exceeded concurrency limit.", "a library's warning"):
            continue
        try:
            json.loads(line)
        except ValueError:
            torn.append(line)
    assert torn == [], torn[:5]
