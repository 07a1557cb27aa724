"""The core install (`pip install headgate-jobs`, no extra): the library, the
workers and the store's commands run without the server extra's packages, and
whatever needs them (`headgate serve`, `--json`, `headgate.web`) says what to
install in one line. Each test runs a fresh interpreter with those packages
hidden, as if they were not installed (`.ci/package` checks a real core-only venv)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from headgate._server_extra import INSTALL, SERVER_MODULES

pytestmark = pytest.mark.processes

HIDE_SERVER = "".join(
    f"sys.modules[{name!r}] = None\n" for name in sorted(SERVER_MODULES)
)  # as if the server extra were not installed


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys\n" + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return _python(HIDE_SERVER + f"from headgate.cli import main\nsys.exit(main({argv!r}))\n", cwd)


def test_the_library_and_the_cli_import_nothing_of_the_server_extra(tmp_path: Path) -> None:
    loaded = _python(
        "import headgate, headgate.cli, headgate.ops, headgate.testing\n"
        "print(sorted({m.partition('.')[0] for m in sys.modules} & "
        + repr(set(SERVER_MODULES))
        + "))\n",
        tmp_path,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout == "[]\n"


def test_the_library_and_its_workers_run_without_the_server_extra(tmp_path: Path) -> None:
    ran = _python(
        HIDE_SERVER
        + "from headgate import Headgate, JobContext\n"
        + "with Headgate('sqlite:///headgate.db') as hg:\n"
        + "    @hg.handler('ping')\n"
        + "    def ping(job: JobContext) -> str:\n"
        + "        return 'pong'\n"
        + "    job = hg.enqueue('ping')\n"
        + "    hg.drain()\n"
        + "    hg.schedules.put('pulse', spec='@every:60000', kind='ping')\n"
        + "    print(hg.jobs.get(job.id).result)\n",
        tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "pong\n"


def test_the_stores_commands_run_without_the_server_extra(tmp_path: Path) -> None:
    made = _python(
        HIDE_SERVER
        + "from headgate import Headgate\n"
        + "with Headgate('sqlite:///headgate.db') as hg:\n"
        + "    hg.schedules.put('pulse', spec='@every:60000', kind='ping')\n",
        tmp_path,
    )
    assert made.returncode == 0, made.stderr
    listed = _cli(["schedules", "list"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "pulse" in listed.stdout
    queues = _cli(["queues", "list"], tmp_path)  # which queues it shows: the domain says
    assert queues.returncode == 0, queues.stderr
    assert queues.stdout == "no queues\n"
    shown = _cli(["events", "show", "--limit", "1"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    rebuilt = _cli(["projections", "rebuild", "--verify"], tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr


def test_serve_without_the_server_extra_says_what_to_install(tmp_path: Path) -> None:
    served = _cli(["serve", "--port", "0"], tmp_path)
    assert served.returncode == 2
    assert served.stdout == ""
    (line,) = served.stderr.splitlines()
    assert line.startswith("error: headgate serve needs the server extra (")
    assert line.endswith(INSTALL)
    assert not (tmp_path / "headgate.db").exists()  # nothing was started or made


def test_json_without_the_server_extra_says_so_before_the_command_acts(tmp_path: Path) -> None:
    made = _python(
        "from headgate import Headgate\n"
        "with Headgate('sqlite:///headgate.db') as hg:\n"
        "    hg.schedules.put('pulse', spec='@every:60000', kind='ping')\n",
        tmp_path,
    )
    assert made.returncode == 0, made.stderr
    paused = _cli(["schedules", "pause", "pulse", "--json"], tmp_path)
    assert paused.returncode == 2
    (line,) = paused.stderr.splitlines()
    assert line.startswith("error: --json (it prints the HTTP API's bodies) needs the server")
    assert line.endswith(INSTALL)
    shown = _cli(["schedules", "show", "pulse"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "paused:         no" in shown.stdout


def test_importing_the_web_app_without_the_server_extra_names_it(tmp_path: Path) -> None:
    imported = _python(
        HIDE_SERVER
        + "try:\n"
        + "    import headgate.web\n"
        + "except ModuleNotFoundError as error:\n"
        + "    print(error.name, '|', error)\n",
        tmp_path,
    )
    assert imported.returncode == 0, imported.stderr
    name, _, message = imported.stdout.strip().partition(" | ")
    assert name in SERVER_MODULES
    assert message.startswith("headgate.web (the HTTP API and the console) needs the server")
    assert message.endswith(INSTALL)
