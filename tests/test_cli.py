"""The command line as a user runs it."""

import subprocess
import sys

from headgate._cli import main


def test_ticks_prints_the_next_ticks(capsys: object) -> None:
    assert main(["ticks", "@every:60000", "--count", "2", "--after-ms", "0"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "@every:60000" in out
    assert "60000  1970-01-01 00:01:00 UTC" in out
    assert "120000  1970-01-01 00:02:00 UTC" in out


def test_ticks_reports_a_bad_spec_in_one_line(capsys: object) -> None:
    assert main(["ticks", "61 * * * *"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err == "error: bad cron '61 * * * *': minute 61 out of range 0-59\n"


def test_installed_command_runs_the_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "headgate._cli", "ticks", "--count", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "CRON_TZ=America/New_York 0 9 * * *" in result.stdout
    assert "Traceback" not in result.stderr
