"""A version names one store schema: a release refuses a store migrated past its
own revision (`SchemaTooNew`), so a build that adds a revision after its version
was released must not keep calling itself that version (0.2.0 refused stores a
build still called "0.2.0" had migrated). `RELEASED_SCHEMA_HEADS`
(headgate/_version.py) records each release's revision; these tests hold it,
pyproject.toml's version and CHANGELOG.md's headings to the migrations on disk,
and say what to do when they part."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

from headgate._store.sql.migrations import revisions_on_disk
from headgate._version import RELEASED_SCHEMA_HEADS

ROOT = Path(__file__).resolve().parents[1]
UNRELEASED = "Unreleased"
_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>.+))?$", re.MULTILINE)


def _version() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert isinstance(version, str)
    return version


def _changelog_headings() -> list[tuple[str, str | None]]:
    text = (ROOT / "CHANGELOG.md").read_text()
    return [(found["version"], found["date"]) for found in _HEADING.finditer(text)]


def _next_minor(version: str) -> str:
    major, minor = Version(version).release[:2]
    return f"{major}.{minor + 1}.0"


def test_a_released_version_is_not_kept_past_its_schema() -> None:
    version, newest = _version(), revisions_on_disk()[-1]
    released = RELEASED_SCHEMA_HEADS.get(version)
    if released is None:
        return  # not released yet: its schema may still move (the next test)
    bump = _next_minor(version)
    assert released == newest, (
        f"schema revision {newest} was added after {version} was released with revision "
        f"{released}: a {version} refuses a store this build migrates (SchemaTooNew), so this "
        f"build must not call itself {version}. Set version = {bump!r} in pyproject.toml and "
        f"head CHANGELOG.md's new entries '## [{bump}] - {UNRELEASED}'; when {bump} is "
        f"released, date that heading and record {bump!r}: {newest} in headgate/_version.py's "
        "RELEASED_SCHEMA_HEADS."
    )


def test_an_unreleased_version_is_newer_than_every_release_and_heads_the_changelog() -> None:
    version = _version()
    if version in RELEASED_SCHEMA_HEADS:
        return  # the test above holds it
    newest_release = max(RELEASED_SCHEMA_HEADS, key=Version)
    assert Version(version) > Version(newest_release), (
        f"version {version} (pyproject.toml) is not newer than the release {newest_release}"
    )
    assert _changelog_headings()[0] == (version, UNRELEASED), (
        f"CHANGELOG.md's first heading must be '## [{version}] - {UNRELEASED}' "
        "(the version pyproject.toml gives this build, not yet released)"
    )


def test_each_dated_release_records_its_schema_revision() -> None:
    dated = {version for version, date in _changelog_headings() if date not in (None, UNRELEASED)}
    assert dated == set(RELEASED_SCHEMA_HEADS), (
        "CHANGELOG.md dates the releases "
        f"{sorted(dated, key=Version)}, and headgate/_version.py's RELEASED_SCHEMA_HEADS "
        f"records {sorted(RELEASED_SCHEMA_HEADS, key=Version)}: a release dated in the "
        "changelog is recorded there with the schema revision it migrates stores to"
    )
    heads = [RELEASED_SCHEMA_HEADS[v] for v in sorted(RELEASED_SCHEMA_HEADS, key=Version)]
    assert heads == sorted(heads), "a later release never has an older schema"
    assert set(heads) <= set(revisions_on_disk()), "each recorded revision is in versions/"
