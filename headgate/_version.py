"""This Headgate's version, from one source: pyproject.toml's `[project] version`.

Installing writes it into the distribution's metadata, where it is read. A
source tree that was never installed has none: then pyproject.toml beside the
package is read, and without it the version is unknown, not guessed.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path
from typing import Final

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
