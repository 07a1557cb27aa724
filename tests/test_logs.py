"""Where Headgate's lines go, in a fresh interpreter: the library configures
nothing; with structlog unconfigured, the host's stdlib logging decides."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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
        hg.put_schedule("s", spec="@every:60000", kind="k", payload={{"secret": "{SECRET}"}})
        clock.advance(60_000)
        hg.start()
        assert hg.run_pending(timeout=30)
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
        hg.put_schedule("s", spec="@every:60000", kind="k")
        clock.advance(60_000)
        hg.start()
        assert hg.run_pending(timeout=30)
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
        hg.put_schedule("s", spec="@every:60000", kind="k")
        clock.advance(60_000)
        hg.start()
        assert hg.run_pending(timeout=30)
        hg.close()
        """
    )
    assert finished.returncode == 0, finished.stderr
    assert "enqueue hook failed" in finished.stderr
    assert "RuntimeError: hook broke" in finished.stderr
    assert "enqueue attempt" not in finished.stderr


def test_migrating_a_store_says_one_line_and_alembic_says_nothing(tmp_path: Path) -> None:
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
    assert sum("store schema migrated" in line for line in lines) == 1, lines
