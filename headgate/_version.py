"""This Headgate's version, from one source: pyproject.toml's `[project] version`.

Installing writes it into the distribution's metadata, where it is read. A
source tree that was never installed has none: then pyproject.toml beside the
package is read, and without it the version is unknown, not guessed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Final

RELEASED_SCHEMA_HEADS: Final[Mapping[str, int]] = {
    "0.1.0": 6,
    "0.2.0": 9,
}
"""The store schema revision each release migrates a store to. A release refuses
a store migrated past its own revision (`SchemaTooNew`), so a build whose newest
revision is past its version's must not call itself that version: it needs a
version of its own, which goes here when it is released (with its CHANGELOG
heading dated). tests/test_release_schema.py checks both against versions/."""

DISTRIBUTION: Final = "headgate-jobs"
"""The name to install (`pip install headgate-jobs`); the import name is `headgate`."""
UNKNOWN: Final = "0+unknown"


def installed_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _source_tree_version()


def _source_tree_version() -> str:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    version = project.get("version") if project.get("name") == DISTRIBUTION else None
    return version if isinstance(version, str) else UNKNOWN
