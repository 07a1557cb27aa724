"""Headgate's own log defaults, in a fresh interpreter (structlog unconfigured)."""

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
        from headgate import Headgate
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
