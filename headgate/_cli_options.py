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


def _json(text: str) -> JsonValue:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as error:
        raise argparse.ArgumentTypeError(f"is not valid JSON: {error}") from None


def _whole_number(text: str) -> int:
    if not (text.lstrip("-").isascii() and text.lstrip("-").isdigit()):
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
    return int(text)


def _parser(kind: Any, nullable: bool) -> Callable[[str], object]:
    base: Callable[[str], object]
    if kind is int:
        base = _whole_number
    elif kind is str or (isinstance(kind, type) and issubclass(kind, enum.Enum)):
        base = str
    else:
        base = _json
    if not nullable or base is _json:
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
        if nullable and kind is not object:
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


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The fields whose flags were given, by name."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def refuse_none_given(fields: Mapping[str, object], what: str) -> None:
    if not fields:
        raise ValidationError(what, "give at least one field to change")
