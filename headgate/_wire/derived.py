"""API bodies made from the domain's value objects, field for field.

The request bodies that carry a schedule's definition or a job's options are
not written out here: they are built from `ScheduleDefinition` and
`JobOptions` (each field's type, default and description), so an option
added there is in the API, its OpenAPI schema included, without an edit
here. Pydantic checks only the JSON types; every rule is the value object's,
applied when the body becomes one (its messages name the field).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, Union

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    StrictStr,
)
from pydantic import create_model as _create_model

from headgate._domain.options import (
    JOB_OPTION_FIELDS,
    SCHEDULE_DEFAULTS,
    SCHEDULE_FIELDS,
    JobOptions,
    OptionInfo,
    ScheduleDefinition,
    option_info,
)

_STRICT: dict[object, Any] = {str: StrictStr, int: StrictInt, bool: StrictBool}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _hints(owner: type[Any]) -> dict[str, Any]:
    return typing.get_type_hints(owner)


_SCHEDULE_HINTS = _hints(ScheduleDefinition)
_JOB_HINTS = _hints(JobOptions)


def _json_type(annotation: Any) -> Any:
    """The strict pydantic type of a domain annotation (None stays allowed)."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Literal[tuple(member.value for member in annotation)]
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [_json_type(arg) for arg in typing.get_args(annotation)]
        return Union[tuple(members)]  # noqa: UP007 (built from a list)
    if annotation is type(None):
        return type(None)
    return _STRICT.get(annotation, JsonValue)


def field_annotation(name: str) -> Any:
    """The domain's annotation of a flat schedule field or a job option."""
    return _SCHEDULE_HINTS[name] if name in _SCHEDULE_HINTS else _JOB_HINTS[name]


def _info(name: str) -> OptionInfo:
    return option_info(ScheduleDefinition if name in _SCHEDULE_HINTS else JobOptions, name)


def _doc(name: str) -> str:
    return _info(name).doc


def _taken_as(name: str) -> dict[str, Any]:
    """A renamed option's body field takes its former name too (one minor version)."""
    formerly = _info(name).formerly
    return {"validation_alias": AliasChoices(name, formerly)} if formerly else {}


def _required(name: str) -> Any:
    return (
        _json_type(field_annotation(name)),
        Field(description=_doc(name), **_taken_as(name)),
    )


def _defaulted(name: str, default: Any) -> Any:
    return (
        _json_type(field_annotation(name)),
        Field(default, description=_doc(name), **_taken_as(name)),
    )


def _optional(name: str) -> Any:
    """A field a body may leave out (null is passed on: where the domain does not
    allow it, the value object says so, naming the field)."""
    return (
        _json_type(field_annotation(name)) | None,
        Field(None, description=_doc(name), **_taken_as(name)),
    )


def schedule_body(name: str, *, extra: dict[str, Any] | None = None) -> type[BaseModel]:
    """A PUT body: the definition whole, `spec` and `kind` required, the rest
    with the domain's defaults (a full replace)."""
    fields: dict[str, Any] = {}
    for field in SCHEDULE_FIELDS:
        if field in SCHEDULE_DEFAULTS:
            fields[field] = _defaulted(field, SCHEDULE_DEFAULTS[field])
        else:
            fields[field] = _required(field)
    return _model(name, {**(extra or {}), **fields})


def schedule_changes_body(name: str) -> type[BaseModel]:
    """A PATCH body: any of the definition's fields; those left out stay as they are."""
    return _model(name, {field: _optional(field) for field in SCHEDULE_FIELDS})


def job_options_fields() -> dict[str, Any]:
    """Every job option, each optional (None: its handler's, else the default)."""
    return {field: _optional(field) for field in JOB_OPTION_FIELDS}


def _model(name: str, fields: dict[str, Any]) -> type[BaseModel]:
    model: type[BaseModel] = _create_model(name, __base__=Strict, **fields)
    return model


def out_fields(names: Iterable[str]) -> dict[str, Any]:
    """Response fields for these definition fields or options (as the domain types them)."""
    return {name: (_plain(field_annotation(name)), Field(description=_doc(name))) for name in names}


def _plain(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return Literal[tuple(member.value for member in annotation)]
    return annotation if annotation in (str, int, bool) else _json_type(annotation)
