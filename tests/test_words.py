"""One word per concept (ARCHITECTURE.md, "Words"): every public name that holds
a watched word means what the table says that word means, or is listed there as
kept, with why. A former name, still taken as an alias or with a
DeprecationWarning for one minor version, is not a public name."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import headgate
from headgate import Headgate
from headgate._deprecated import Deprecated, DeprecatedProperty, DeprecatedStatic
from headgate.cli._main import build_parser
from headgate.web import create_app

ROOT = Path(__file__).resolve().parents[1]
NOUNS = ("schedules", "jobs", "queues", "limits", "rates", "quarantine", "metrics", "runtime")


def _rows() -> dict[str, tuple[set[str], set[str]]]:
    """Each watched word: (names its meaning column gives, names its kept column gives)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("### Words", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = (_names(cells[1]), _names(cells[3]))
    return rows


def _names(cell: str) -> set[str]:
    """The names a cell gives in backticks, each path or dotted name in its parts."""
    return {
        part.replace("-", "_").lower()
        for quoted in re.findall(r"`([^`]+)`", cell)
        for part in re.split(r"[^A-Za-z0-9_*-]+", quoted)
        if part
    }


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).replace("-", "_")
    return [token.lower() for token in spaced.split("_") if token]


@functools.cache
def _public_names() -> list[tuple[str, str]]:
    return list(_each_public_name())


def _each_public_name() -> Iterator[tuple[str, str]]:
    """(name, where it is seen), every public name a user meets."""
    for name in headgate.__all__:
        yield name, "headgate"
        exported = getattr(headgate, name)
        if dataclasses.is_dataclass(exported):
            for field in dataclasses.fields(exported):
                yield field.name, name
    old = (Deprecated, DeprecatedProperty, DeprecatedStatic)
    for name in dir(Headgate):
        if not name.startswith("_") and not isinstance(inspect.getattr_static(Headgate, name), old):
            yield name, "Headgate"
    with Headgate("memory://") as hg:
        for noun in NOUNS:
            for name in dir(type(getattr(hg, noun))):
                if not name.startswith("_"):
                    yield name, f"hg.{noun}"
        document = create_app(hg, api_token="").openapi()
    for path, operations in document["paths"].items():
        if any(not operation.get("deprecated") for operation in operations.values()):
            for segment in re.split(r"[/:{}]", path):
                if segment:
                    yield segment, f"path {path}"
    for schema_name, schema in document["components"]["schemas"].items():
        yield schema_name, "an API schema"
        for field_name, field in schema.get("properties", {}).items():
            if not field.get("deprecated"):
                yield field_name, f"API schema {schema_name}"
    yield from _commands(build_parser(), "headgate")


def _commands(parser: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, str]]:
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for option in action.option_strings:
            yield option.lstrip("-"), prefix
        if isinstance(action, argparse._SubParsersAction):
            for command in action._choices_actions:
                yield command.dest, prefix
                yield from _commands(action.choices[command.dest], f"{prefix} {command.dest}")


def _allowed(name: str, allowed: set[str]) -> bool:
    normal = name.replace("-", "_").lower()
    return any(
        normal == given or (given.endswith("*") and normal.startswith(given[:-1]))
        for given in allowed
    )


ROWS = _rows()


def test_the_table_watches_these_words() -> None:
    assert set(ROWS) >= {"periodic", "run", "limit", "rate", "enqueue_now", "claim"}


@pytest.mark.parametrize("word", sorted(ROWS))
def test_a_public_name_with_a_watched_word_means_it_or_is_kept(word: str) -> None:
    means, kept = ROWS[word]
    watched = {word, word + "s"}
    stray = sorted(
        {
            f"{name} ({where})"
            for name, where in _public_names()
            if watched & set(_tokens(name)) and not _allowed(name, means | kept)
        }
    )
    assert stray == [], (
        "\n".join(stray) + f"\nrename them (ARCHITECTURE.md, Words: {word}), or list them as kept"
    )
