"""Command-line flags made from the domain's value objects, field for field.

`schedules put`, `schedules update` and `jobs enqueue` take one flag per field
of `ScheduleDefinition` or `JobOptions` (`--max-attempts`, `--timeout-ms`,
...): typed, described and defaulted by the domain, so an option added there
is a flag here without an edit. argparse only parses the text; the rules are
the value object's (a rejection names the field: exit 2).
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Union

from headgate._domain.options import JobOptions, ScheduleDefinition, option_info
from headgate._errors import ValidationError
from headgate._json import JsonValue

_HINTS: Final = {**typing.get_type_hints(JobOptions), **typing.get_type_hints(ScheduleDefinition)}
NONE_WORD: Final = "none"
"""What clears a field that may be empty (`--end-at-ms none`)."""


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _owner(name: str) -> type[Any]:
    return ScheduleDefinition if name in typing.get_type_hints(ScheduleDefinition) else JobOptions


def _parts(annotation: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return args[0], True
    return annotation, False


def json_argument(name: str, text: str) -> JsonValue:
    """A flag's JSON text, parsed; a ValidationError naming the flag when it is not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as error:
        raise ValidationError(flag(name), f"is not valid JSON: {error}") from None


def _is_json(kind: Any) -> bool:
    return kind not in (int, str, bool) and not (
        isinstance(kind, type) and issubclass(kind, enum.Enum)
    )


def _whole_number(text: str) -> int:
    if not (text.lstrip("-").isascii() and text.lstrip("-").isdigit()):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
    return int(text)


def _parser(kind: Any, nullable: bool) -> Callable[[str], object]:
    """How argparse reads a flag's text (JSON is read by `given`, so its error
    names the flag as every other rule does)."""
    base: Callable[[str], object] = _whole_number if kind is int else str
    if not nullable or _is_json(kind):
        return base

    def or_none(text: str) -> object:
        return None if text == NONE_WORD else base(text)

    return or_none


def add_option_flags(
    parser: argparse.ArgumentParser,
    names: Iterable[str],
    *,
    defaults: Mapping[str, Any] | None = None,
    required: Iterable[str] = (),
    changes: bool = False,
) -> None:
    """A flag per field in `names`. A flag left out passes nothing (the value
    object's default applies, or with `changes` the field is left as it is);
    `defaults` only shows those defaults in the help."""
    must = set(required)
    for name in names:
        info = option_info(_owner(name), name)
        kind, nullable = _parts(_HINTS[name])
        help_text = info.doc
        if defaults is not None and name in defaults:
            shown = defaults[name]
            shown = shown.value if isinstance(shown, enum.Enum) else shown
            help_text += f" (default {json.dumps(shown)})"
        if nullable and not _is_json(kind):
            help_text += f"; {NONE_WORD} leaves it unset"
        options: dict[str, Any] = {
            "dest": name,
            "default": argparse.SUPPRESS,
            "help": help_text.replace("%", "%%"),
        }
        if kind is bool:
            parser.add_argument(
                flag(name),
                action=argparse.BooleanOptionalAction if changes else "store_true",
                **options,
            )
            continue
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            options["choices"] = [member.value for member in kind]
        parser.add_argument(
            flag(name),
            type=_parser(kind, nullable),
            metavar=info.unit.upper() or name.split("_")[-1].upper(),
            required=name in must,
            **options,
        )
        if info.formerly:
            parser.add_argument(
                flag(info.formerly),
                type=_parser(kind, nullable),
                action=_FormerFlag,
                **{**options, "help": argparse.SUPPRESS},
            )


class _FormerFlag(argparse.Action):
    """A renamed option's former flag: taken for one minor version, with a note
    on standard error naming the flag now."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        now = flag(self.dest)
        sys.stderr.write(
            f"headgate: {option_string} is deprecated and goes in the next minor version: "
            f"use {now}\n"
        )
        setattr(namespace, self.dest, values)


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The fields whose flags were given, by name (JSON ones parsed)."""
    values: dict[str, Any] = {}
    for name in names:
        if hasattr(args, name):
            value = getattr(args, name)
            is_json = _is_json(_parts(_HINTS[name])[0])
            values[name] = json_argument(name, value) if is_json else value
    return values


def refuse_none_given(fields: Mapping[str, object], what: str) -> None:
    if not fields:
        raise ValidationError(what, "give at least one field to change")
