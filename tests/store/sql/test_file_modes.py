"""A SQLite store's files (the database and its `-wal` and `-shm`) hold every
payload, result and error: a store Headgate creates is readable by its owner
alone, whatever the umask allows; a file that exists keeps its mode."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from headgate import Headgate, ops

FILES = ("h.db", "h.db-wal", "h.db-shm")


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    """022, as most hosts run: SQLite alone would create its files 0644."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def _modes(directory: Path, names: tuple[str, ...] = FILES) -> dict[str, str]:
    return {name: oct(stat.S_IMODE((directory / name).stat().st_mode)) for name in names}


def _written(url: str) -> Headgate:
    hg = Headgate(url)
    hg.schedules.put("s", spec="@every:60000", kind="k", payload={"secret": 1})
    hg.enqueue("k", {"secret": 2})
    return hg


def test_a_new_store_and_its_wal_and_shm_are_the_owners_alone(tmp_path: Path) -> None:
    hg = _written(f"sqlite:///{tmp_path / 'h.db'}")
    try:
        assert _modes(tmp_path) == dict.fromkeys(FILES, "0o600")
    finally:
        hg.close()
    assert _modes(tmp_path, ("h.db",)) == {"h.db": "0o600"}


def test_a_store_replayed_into_a_new_file_is_the_owners_alone(tmp_path: Path) -> None:
    _written(f"sqlite:///{tmp_path / 'h.db'}").close()
    ops.replay(f"sqlite:///{tmp_path / 'h.db'}", f"sqlite:///{tmp_path / 'copy.db'}")
    assert _modes(tmp_path, ("copy.db",)) == {"copy.db": "0o600"}


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    """An operator may have opened the file to a group on purpose: Headgate
    neither loosens nor changes it, and SQLite's -wal and -shm follow it."""
    sqlite3.connect(tmp_path / "h.db").close()  # an empty database, made by someone else
    (tmp_path / "h.db").chmod(0o640)
    hg = _written(f"sqlite:///{tmp_path / 'h.db'}")
    try:
        assert _modes(tmp_path) == dict.fromkeys(FILES, "0o640")
    finally:
        hg.close()
