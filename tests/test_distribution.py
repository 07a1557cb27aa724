"""What the distribution says of itself: one version everywhere (pyproject.toml's,
through the package metadata), and PostgreSQL support as an extra, whose absence
a PostgreSQL URL reports in one line while SQLite needs nothing of it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import headgate
from headgate import _version

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]
HIDE_PSYCOPG = 'import sys; sys.modules["psycopg"] = None  # as if the extra were not installed\n'
POSTGRES_URL = "postgresql://app@127.0.0.1:1/app"


def _pyproject_version() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert isinstance(version, str)
    return version


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_version_is_the_metadatas_and_pyprojects() -> None:
    assert headgate.__version__ == metadata.version("headgate-jobs") == _pyproject_version()


def test_headgate_version_prints_it() -> None:
    shown = subprocess.run(
        [Path(sys.executable).with_name("headgate"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout == f"headgate {headgate.__version__}\n"


def test_a_source_tree_without_metadata_reads_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert _version.installed_version() == _pyproject_version()


def test_without_metadata_or_pyproject_the_version_is_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.setattr(_version, "__file__", str(tmp_path / "headgate" / "_version.py"))
    assert _version.installed_version() == _version.UNKNOWN


def test_a_postgresql_url_without_psycopg_names_the_extra(tmp_path: Path) -> None:
    opened = _python(
        HIDE_PSYCOPG
        + "from headgate import Headgate, ValidationError\n"
        + "try:\n"
        + f"    Headgate({POSTGRES_URL!r})\n"
        + "except ValidationError as error:\n"
        + "    print(error)\n",
        tmp_path,
    )
    assert opened.returncode == 0, opened.stderr
    (line,) = opened.stdout.splitlines()
    assert line.startswith("store URL: PostgreSQL support is not installed")
    assert line.endswith("pip install 'headgate-jobs[postgresql]'")


def test_the_cli_says_so_in_one_line(tmp_path: Path) -> None:
    listed = _python(
        HIDE_PSYCOPG
        + "from headgate.cli import main\n"
        + f"sys.exit(main(['schedules', 'list', '--db', {POSTGRES_URL!r}]))\n",
        tmp_path,
    )
    assert listed.returncode == 2
    (line,) = listed.stderr.splitlines()
    assert "headgate-jobs[postgresql]" in line
    assert line.startswith("error: store URL: PostgreSQL support is not installed")


def test_sqlite_and_the_web_app_need_no_psycopg(tmp_path: Path) -> None:
    used = _python(
        HIDE_PSYCOPG
        + "from headgate import Headgate\n"
        + "from headgate.web import create_app\n"
        + "with Headgate('sqlite:///headgate.db') as hg:\n"
        + "    create_app(hg)\n"
        + "    hg.schedules.put('pulse', spec='@every:60000', kind='ping')\n"
        + "    print(hg.schedules.get('pulse').kind)\n",
        tmp_path,
    )
    assert used.returncode == 0, used.stderr
    assert used.stdout == "ping\n"
