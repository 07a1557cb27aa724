"""The command line as a user runs it."""

import subprocess
import sys

import pytest

from headgate.cli import main


def test_ticks_prints_the_next_ticks(capsys: object) -> None:
    assert main(["ticks", "@every:60000", "--count", "2", "--after-ms", "0"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "@every:60000" in out
    assert "60000  1970-01-01 00:01:00 UTC" in out
    assert "120000  1970-01-01 00:02:00 UTC" in out


def test_ticks_print_milliseconds_when_ticks_are_not_whole_seconds(capsys: object) -> None:
    assert main(["ticks", "@every:1500", "@every:1s", "--count", "2", "--after-ms", "0"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert out.splitlines() == [
        "@every:1500",
        "  1500  1970-01-01 00:00:01.500 UTC  (1970-01-01 00:00:01.500 UTC)",
        "  3000  1970-01-01 00:00:03.000 UTC  (1970-01-01 00:00:03.000 UTC)",
        "@every:1000",
        "  1000  1970-01-01 00:00:01 UTC  (1970-01-01 00:00:01 UTC)",
        "  2000  1970-01-01 00:00:02 UTC  (1970-01-01 00:00:02 UTC)",
    ]


def test_ticks_reports_a_bad_spec_in_one_line(capsys: object) -> None:
    assert main(["ticks", "61 * * * *"]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err == "error: bad cron '61 * * * *': minute 61 out of range 0-59\n"


@pytest.mark.processes
def test_installed_command_runs_the_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "headgate", "ticks", "--count", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "CRON_TZ=America/New_York 0 9 * * *" in result.stdout
    assert "Traceback" not in result.stderr


def test_worker_refuses_a_queue_name_no_job_can_have(capsys: object) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--app", "x:hg", "--queue", "mail\n=2"])
    assert exited.value.code == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.startswith("error: headgate worker: argument --queue: queue 'mail\\n': may contain")
    assert err.count("\n") == 1
