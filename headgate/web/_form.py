"""The console's schedule form, one input per field of a schedule's definition.

The fields, their order, labels and help come from `ScheduleDefinition` (flat:
`SCHEDULE_FIELDS`), so an option added there is in the form without an edit.
Each input says how its text becomes JSON (`data-type`); console.js sends the
whole definition to PUT /api/v1/schedules/{id}, whose rules name a bad field.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Union

from headgate._domain import missed_runs, overlap
from headgate._domain.options import (
    SCHEDULE_DEFAULTS,
    SCHEDULE_FIELDS,
    JobOptions,
    ScheduleDefinition,
    option_info,
)
from headgate._model import Schedule

_CHOICE_LABELS: Final[dict[type[enum.Enum], Mapping[Any, str]]] = {
    missed_runs.MissedRunPolicy: missed_runs.LABELS,
    overlap.OverlapPolicy: overlap.LABELS,
}
"""Each choice's label, by the option's enum."""
_HINTS: Final = {**typing.get_type_hints(JobOptions), **typing.get_type_hints(ScheduleDefinition)}


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    help: str
    widget: str
    """text, number, json, checkbox or select."""
    data_type: str
    """How console.js reads it: text, int, int-or-null, json, bool."""
    value: Any
    choices: tuple[tuple[str, str], ...] = ()
    required: bool = False


def _label(name: str, unit: str) -> str:
    words = name.removesuffix("_ms").replace("_", " ")
    label = words[:1].upper() + words[1:]
    return f"{label} ({unit})" if unit else label


def _parts(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return args[0], True
    return annotation, False


def form_fields(schedule: Schedule | None) -> list[FormField]:
    """The form's inputs, filled from `schedule` (None: a new one, with the defaults)."""
    shown = []
    for name in SCHEDULE_FIELDS:
        owner = (
            ScheduleDefinition if name in typing.get_type_hints(ScheduleDefinition) else JobOptions
        )
        info = option_info(owner, name)
        kind, nullable = _parts(_HINTS[name])
        value = getattr(schedule, name) if schedule is not None else SCHEDULE_DEFAULTS.get(name)
        if isinstance(value, enum.Enum):
            value = value.value
        label = _label(name, info.unit)
        if kind is bool:
            shown.append(FormField(name, label, info.doc, "checkbox", "bool", bool(value)))
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            labels = _CHOICE_LABELS.get(kind, {})
            choices = tuple((m.value, labels.get(m, m.value)) for m in kind)
            shown.append(FormField(name, label, info.doc, "select", "text", value, choices))
        elif kind is int:
            data_type = "int-or-null" if nullable else "int"
            text = "" if value is None else str(value)
            shown.append(FormField(name, label, info.doc, "number", data_type, text))
        elif kind is str:
            text = "" if value is None else str(value)
            required = name not in SCHEDULE_DEFAULTS
            data_type = "text-or-null" if nullable else "text"
            shown.append(FormField(name, label, info.doc, "text", data_type, text, (), required))
        else:
            text = json.dumps(value, indent=2, ensure_ascii=False)
            shown.append(FormField(name, f"{label} (JSON)", info.doc, "json", "json", text))
    return shown
