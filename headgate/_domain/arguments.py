"""A task's arguments and result as JSON: the one encoding of values beyond JSON.

A value JSON has (None, a bool, an int, a float, a str, a list, a dict with str
keys) is stored as it is. Every other value Headgate takes is an object tagged
with its type, readable in the console and the API, and decoded back to what
was passed:

    datetime (aware)  {"$type": "datetime", "v": "2026-12-05T09:30:00+01:00", "tz": "Europe/Paris"}
    date              {"$type": "date", "v": "2026-12-05"}
    time              {"$type": "time", "v": "09:30:00+01:00"}
    UUID              {"$type": "uuid", "v": "0b6c...-..."}
    Decimal           {"$type": "decimal", "v": "12.50"}
    Enum              {"$type": "enum", "of": "Color", "v": "red"}
    dataclass         {"$type": "dataclass", "of": "Meeting", "v": {"when": {...}, ...}}
    pydantic model    {"$type": "model", "of": "Invoice", "v": {...model_dump(mode="json")}}
    tuple             a list
    a dict with "$type" among its keys   {"$type": "dict", "v": {...}}

("tz" only for a `zoneinfo.ZoneInfo` zone, so the datetime comes back in it.)
The tags of datetime, date, time, UUID and Decimal say all there is to decode
them; an Enum, a dataclass or a pydantic model is decoded to the class its
parameter (or field, or the task's return) is annotated with, matched by the
name in "of", and is left as its tagged JSON where no annotation names it: a
class is never looked up from the stored text, and nothing is ever pickled.

Decoding checks each value against its annotation (`"7"` for an `int` is refused by
its path), and takes a datetime, date, time, UUID or Decimal sent as its usual
text by a client without the tags.

What Headgate cannot encode (a naive datetime, a set, bytes, any other object)
is refused when the job is enqueued, naming where the value is
(`when`, `items[2].price`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final
from zoneinfo import ZoneInfo

from headgate._errors import ValidationError
from headgate._json import JsonValue

__all__ = ["TAG", "decode", "encode"]

TAG: Final = "$type"

MAX_DEPTH: Final = 64
"""How deep a value may nest (lists, dicts, dataclasses, tagged values): deeper is
taken for a value that contains itself, refused by its path, not by a RecursionError."""

_TAKES: Final = (
    "JSON values, aware datetimes, dates, times, UUIDs, Decimals, Enums, dataclasses "
    "and pydantic models"
)


# encoding ---------------------------------------------------------------------


def encode(value: Any, path: str, depth: int = 0) -> JsonValue:
    """`value` as JSON, by the module's encoding; ValidationError naming `path`
    (where the value is, `depth` levels in) for what it cannot encode."""
    _within_depth(depth, path)
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return _finite(value, path)
    if kind is list or kind is tuple:
        return [encode(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    if kind is dict:
        return _encode_dict(value, path, depth)
    encoder = _ENCODERS.get(kind)
    if encoder is not None:
        return encoder(value, path)
    return _encode_other(value, path, depth)


def _within_depth(depth: int, path: str) -> None:
    if depth > MAX_DEPTH:
        raise ValidationError(
            path, f"nests deeper than {MAX_DEPTH} levels (a value that contains itself?)"
        )


def _finite(value: float, path: str) -> float:
    if math.isnan(value) or math.isinf(value):
        raise ValidationError(path, f"must be a finite number, got {value!r}")
    return value


def _encode_dict(value: Mapping[object, object], path: str, depth: int) -> JsonValue:
    encoded: dict[str, JsonValue] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValidationError(path, f"a dict's keys must be strings, got {key!r}")
        encoded[key] = encode(item, f"{path}.{key}", depth + 1)
    if TAG in encoded:
        return {TAG: "dict", "v": encoded}
    return encoded


def _encode_datetime(value: dt.datetime, path: str) -> JsonValue:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            path, f"a datetime must be aware (give it a tzinfo), got naive {value.isoformat()}"
        )
    tagged = {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value.tzinfo, ZoneInfo):
        tagged["tz"] = value.tzinfo.key
    return tagged


def _encode_date(value: dt.date, path: str) -> JsonValue:
    return {TAG: "date", "v": value.isoformat()}


def _encode_time(value: dt.time, path: str) -> JsonValue:
    return {TAG: "time", "v": value.isoformat()}


def _encode_uuid(value: uuid.UUID, path: str) -> JsonValue:
    return {TAG: "uuid", "v": str(value)}


def _encode_decimal(value: Decimal, path: str) -> JsonValue:
    if not value.is_finite():
        raise ValidationError(path, f"must be a finite Decimal, got {value}")
    return {TAG: "decimal", "v": str(value)}


_ENCODERS: Final[dict[type[Any], Callable[[Any, str], JsonValue]]] = {
    dt.datetime: _encode_datetime,
    dt.date: _encode_date,
    dt.time: _encode_time,
    uuid.UUID: _encode_uuid,
    Decimal: _encode_decimal,
}


def _encode_other(value: Any, path: str, depth: int) -> JsonValue:
    """Subclasses of the types above, Enums, dataclasses and pydantic models."""
    if isinstance(value, enum.Enum):
        return {TAG: "enum", "of": type(value).__name__, "v": encode(value.value, path, depth + 1)}
    for base, encoder in _ENCODERS.items():
        if isinstance(value, base):
            return encoder(value, path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            field.name: encode(getattr(value, field.name), f"{path}.{field.name}", depth + 1)
            for field in dataclasses.fields(value)
        }
        return {TAG: "dataclass", "of": type(value).__name__, "v": fields}
    if _is_pydantic_model(value):
        return {TAG: "model", "of": type(value).__name__, "v": _dumped(value, path, depth)}
    if isinstance(value, str | int | float | list | tuple | dict):
        return encode(_plain(value), path, depth)
    raise ValidationError(
        path, f"Headgate cannot encode a {type(value).__qualname__}: it takes {_TAKES}"
    )


def _dumped(model: Any, path: str, depth: int) -> JsonValue:
    """A pydantic model's JSON dump, held to the rules of any other value (finite
    numbers, the depth) by its path; what pydantic cannot dump (a cycle, a value
    of no type it knows) is refused by the model's path."""
    name = type(model).__name__
    try:
        dumped: JsonValue = model.model_dump(mode="json")
    except (ValueError, TypeError) as error:  # pydantic's serialization errors are ValueErrors
        raise ValidationError(path, f"cannot dump the {name} model: {error}") from None
    encode(dumped, path, depth + 1)
    return dumped


def _plain(value: Any) -> object:
    """A subclass of a JSON type (a str subclass, a NamedTuple) as its base type."""
    bases: tuple[Callable[[Any], object], ...] = (bool, int, float, str, list, tuple, dict)
    for base in bases:
        if isinstance(value, base):  # type: ignore[arg-type]
            return base(value)
    return value


def _is_pydantic_model(value: object) -> bool:
    """Without importing pydantic: a model exists only where it was imported."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


# decoding ---------------------------------------------------------------------


def decode(value: JsonValue, annotation: object, path: str, depth: int = 0) -> object:
    """A stored value back as `annotation` says (Any or a missing annotation: by its
    tags alone). Raises ValidationError naming `path` for a value that is not
    what it should be: of another kind than the annotation allows (`"3"` for an
    `int`), or a stored job whose task changed its signature since."""
    return _of_the_annotated_kind(_decoded(value, annotation, path, depth), annotation, path)


def _decoded(value: JsonValue, annotation: object, path: str, depth: int) -> object:
    _within_depth(depth, path)
    if isinstance(value, dict):
        tag = value.get(TAG)
        if tag is not None:
            return _decode_tagged(tag, value, annotation, path, depth)
        inner = _mapping_values(annotation)
        kind = _dataclass_in(annotation)
        if kind is not None:  # a dataclass given as its fields (from another language)
            return _build_dataclass(kind, value, path, depth)
        model = _model_in(annotation, None)
        if model is not None:
            return _validated(model, value, path)
        return {key: decode(item, inner, f"{path}.{key}", depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return _decode_list(value, annotation, path, depth)
    return _decode_scalar(value, annotation, path)


def _decode_scalar(value: JsonValue, annotation: object, path: str) -> object:
    if value is None:
        return None
    member = _enum_in(annotation, None)
    if member is not None:
        return _enum_member(member, value, path)
    if type(value) is int and float in _members(annotation) and int not in _members(annotation):
        return float(value)
    return value


def _decode_list(value: list[JsonValue], annotation: object, path: str, depth: int) -> object:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    for member in _members(annotation):
        member_origin = typing.get_origin(member) or member
        if member_origin is tuple:
            origin, arguments = tuple, typing.get_args(member)
            break
        if member_origin in (list, Sequence, set, frozenset):
            origin, arguments = member_origin, typing.get_args(member)
            break
    if origin is tuple:
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            items = [
                decode(item, arguments[0], f"{path}[{i}]", depth + 1)
                for i, item in enumerate(value)
            ]
        elif arguments:
            items = [
                decode(item, arguments[i] if i < len(arguments) else Any, f"{path}[{i}]", depth + 1)
                for i, item in enumerate(value)
            ]
        else:
            items = [decode(item, Any, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
        return tuple(items)
    inner = arguments[0] if arguments else Any
    return [decode(item, inner, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]


def _decode_tagged(
    tag: object, value: dict[str, JsonValue], annotation: object, path: str, depth: int
) -> object:
    text = value.get("v")
    try:
        if tag == "datetime":
            decoded = dt.datetime.fromisoformat(str(text))
            if decoded.utcoffset() is None:
                raise ValueError("a datetime must be aware (give it an offset)")
            zone = value.get("tz")
            return decoded.astimezone(ZoneInfo(str(zone))) if zone is not None else decoded
        if tag == "date":
            return dt.date.fromisoformat(str(text))
        if tag == "time":
            return dt.time.fromisoformat(str(text))
        if tag == "uuid":
            return uuid.UUID(str(text))
        if tag == "decimal":
            return Decimal(str(text))
    except (ValueError, ArithmeticError, KeyError) as error:
        raise ValidationError(path, f"not a {tag}: {text!r} ({error})") from None
    if tag == "dict":
        if not isinstance(text, dict):
            raise ValidationError(path, "a tagged dict's 'v' must be an object")
        inner = _mapping_values(annotation)
        return {key: decode(item, inner, f"{path}.{key}", depth + 1) for key, item in text.items()}
    name = value.get("of")
    if tag == "enum":
        member = _enum_in(annotation, name)
        return value if member is None else _enum_member(member, text, path)
    if tag == "dataclass":
        if not isinstance(text, dict):
            raise ValidationError(path, "a dataclass's 'v' must be an object of its fields")
        kind = _dataclass_in(annotation, name)
        return value if kind is None else _build_dataclass(kind, text, path, depth)
    if tag == "model":
        model = _model_in(annotation, name)
        return value if model is None else _validated(model, text, path)
    raise ValidationError(path, f"unknown {TAG} {tag!r}")


_FROM_TEXT: Final[dict[type, Callable[[str], object]]] = {
    dt.datetime: dt.datetime.fromisoformat,
    dt.date: dt.date.fromisoformat,
    dt.time: dt.time.fromisoformat,
    uuid.UUID: uuid.UUID,
    Decimal: Decimal,
}
"""The kinds a client without the tags (another language, the HTTP API) may send
as their usual text: ISO 8601, a UUID's hex, a decimal's digits."""


def _of_the_annotated_kind(value: object, annotation: object, path: str) -> object:
    """`value` when the annotation allows it, parsed from its text where a kind of
    `_FROM_TEXT` is annotated, else a ValidationError naming what was expected.
    An annotation this cannot check (Any, object, a type variable, a protocol, a
    TypedDict) allows everything."""
    kinds: list[type] = []
    for member in _members(annotation):
        if member is None or member is type(None):
            kinds.append(type(None))
            continue
        if typing.get_origin(member) is typing.Literal:
            if value in typing.get_args(member):
                return value
            continue
        kind = typing.get_origin(member) or member
        if not isinstance(kind, type) or kind is object or _is_unchecked(kind):
            return value
        kinds.append(kind)
    if not kinds:
        raise ValidationError(path, f"must be one of {typing.get_args(annotation)!r}")
    if any(_is_a(value, kind) for kind in kinds):
        return value
    if isinstance(value, str):
        for kind in kinds:
            parse = _FROM_TEXT.get(kind)
            if parse is not None:
                return _parsed(parse, kind, value, path)
    expected = " or ".join(kind.__name__ for kind in kinds)
    raise ValidationError(path, f"must be {expected}, got {type(value).__name__}")


def _is_unchecked(kind: type) -> bool:
    return bool(getattr(kind, "_is_protocol", False)) or typing.is_typeddict(kind)


def _is_a(value: object, kind: type) -> bool:
    if isinstance(value, bool) and kind in (int, float):
        return False  # JSON's true is no number
    if kind is float:
        return isinstance(value, int | float)
    if kind in (Sequence, list, tuple, set, frozenset):
        return isinstance(value, list | tuple | set | frozenset)
    try:
        return isinstance(value, kind)
    except TypeError:
        return True


def _parsed(parse: Callable[[str], object], kind: type, text: str, path: str) -> object:
    try:
        parsed = parse(text)
    except (ValueError, ArithmeticError) as error:
        raise ValidationError(path, f"not a {kind.__name__}: {text!r} ({error})") from None
    if isinstance(parsed, dt.datetime) and parsed.utcoffset() is None:
        raise ValidationError(path, "a datetime must be aware (give it an offset)")
    return parsed


_MEMBERS: dict[object, tuple[object, ...]] = {}


def _members(annotation: object) -> tuple[object, ...]:
    """The types an annotation allows: a union's members, else itself (remembered
    per annotation: a worker decodes the same few again and again)."""
    try:
        return _MEMBERS[annotation]
    except KeyError:
        found = _members_of(annotation)
        _MEMBERS[annotation] = found
        return found
    except TypeError:  # an annotation that cannot be a key
        return _members_of(annotation)


def _members_of(annotation: object) -> tuple[object, ...]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    if origin is typing.Annotated:
        return _members_of(typing.get_args(annotation)[0])
    return (annotation,)


def _mapping_values(annotation: object) -> object:
    for member in _members(annotation):
        if typing.get_origin(member) in (dict, Mapping):
            arguments = typing.get_args(member)
            return arguments[1] if len(arguments) == 2 else Any
    return Any


def _enum_in(annotation: object, name: object) -> type[enum.Enum] | None:
    for member in _members(annotation):
        if (isinstance(member, type) and issubclass(member, enum.Enum)) and (
            name is None or member.__name__ == name
        ):
            return member
    return None


def _enum_member(kind: type[enum.Enum], value: JsonValue, path: str) -> enum.Enum:
    try:
        return kind(value)
    except ValueError:
        raise ValidationError(path, f"{value!r} is not a {kind.__name__}") from None


def _dataclass_in(annotation: object, name: object = None) -> type[Any] | None:
    for member in _members(annotation):
        if (isinstance(member, type) and dataclasses.is_dataclass(member)) and (
            name is None or member.__name__ == name
        ):
            return member
    return None


def _build_dataclass(
    kind: type[Any], values: Mapping[str, JsonValue], path: str, depth: int
) -> object:
    hints = _hints(kind)
    fields = {field.name: field for field in dataclasses.fields(kind)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValidationError(f"{path}.{unknown[0]}", f"is not a field of {kind.__name__}")
    given = {
        name: decode(item, hints.get(name, Any), f"{path}.{name}", depth + 1)
        for name, item in values.items()
    }
    init = {name: item for name, item in given.items() if fields[name].init}
    try:
        built = kind(**init)
    except TypeError as error:
        raise ValidationError(path, f"cannot make a {kind.__name__}: {error}") from None
    for name, item in given.items():
        if not fields[name].init:
            object.__setattr__(built, name, item)
    return built


def _model_in(annotation: object, name: object) -> Any:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return None
    for member in _members(annotation):
        if (isinstance(member, type) and issubclass(member, pydantic.BaseModel)) and (
            name is None or member.__name__ == name
        ):
            return member
    return None


def _validated(model: Any, values: JsonValue, path: str) -> object:
    pydantic = sys.modules["pydantic"]
    try:
        return model.model_validate(values)
    except pydantic.ValidationError as error:
        raise ValidationError(path, f"not a valid {model.__name__}: {error}") from None


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(kind: type[Any]) -> dict[str, Any]:
    """A dataclass's field types, resolved once (string annotations included)."""
    hints = _HINTS.get(kind)
    if hints is None:
        try:
            hints = typing.get_type_hints(kind)
        except Exception:  # an annotation that cannot be resolved: decode by tags alone
            hints = {}
        _HINTS[kind] = hints
    return hints
