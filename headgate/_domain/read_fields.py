"""What a job or a schedule read back shows: each field once, in the order every
surface shows it, with its label, its shape and its description.

A job's options and a schedule's definition are described where they are
defined (`options.py`); what a read adds (its state, attempts, timestamps,
where it came from) is described here, once. The public read types
(`_model`) hold these fields; the API's response bodies, the command line's
show and the console's detail tables are made by walking `JOB_READ` and
`SCHEDULE_READ`, so an option added to the domain is shown everywhere
without an edit to any of them (`tests/test_option_parity.py`).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from headgate._domain.lifecycle import JobState
from headgate._domain.options import (
    JOB_OPTION_FIELDS,
    SCHEDULE_FIELDS,
    JobOptions,
    ScheduleDefinition,
    option_info,
)


class Shape(StrEnum):
    """How a value is written out for a person (the JSON carries it as it is)."""

    TEXT = "text"
    NUMBER = "number"
    INSTANT = "instant"
    """Epoch ms, shown as a date and time."""
    DURATION = "duration"
    """Milliseconds, shown as a length of time."""
    FLAG = "flag"
    JSON = "json"
    WORDS = "words"
    """A list of short texts (names, reasons)."""
    PARTS = "parts"
    """A structure of its own (an origin, an attempt, a list of attempts): each
    surface writes it its own way."""


@dataclass(frozen=True)
class ReadField:
    name: str
    label: str
    """What a person reads it as (the command line's and the console's label)."""
    shape: Shape
    doc: str
    """One line for the API's schema, the CLI's help and the console's tooltip."""
    option: bool = False
    """A job option or a definition field (described in `options.py`)."""


@dataclass(frozen=True)
class _Fact:
    shape: Shape
    doc: str
    label: str = ""


_OPTIONS: Final = "*options*"
"""Where a read shows the options (or a schedule's definition) among its facts."""

_JOB_FACTS: Final[dict[str, _Fact]] = {
    "id": _Fact(Shape.TEXT, "Its id"),
    "kind": _Fact(Shape.TEXT, "Its kind: which handler runs it"),
    "state": _Fact(Shape.TEXT, "Where it is in its lifecycle: " + ", ".join(JobState)),
    "waiting_for": _Fact(
        Shape.WORDS,
        "Why a due pending job has not started (a paused queue, a full concurrency limit, "
        "a used-up rate class); in a job's own read, empty in lists",
    ),
    _OPTIONS: _Fact(Shape.PARTS, ""),
    "start_by_ms": _Fact(
        Shape.INSTANT,
        "Its start deadline (from start_within_ms): not started by then, it is recorded "
        "expired instead of running; null: none, or it has started",
        "start by",
    ),
    "created_at_ms": _Fact(Shape.INSTANT, "When it was enqueued", "created"),
    "updated_at_ms": _Fact(Shape.INSTANT, "When it last changed", "updated"),
    "periodic_origin": _Fact(
        Shape.PARTS, "The schedule and tick that made it (null: not a tick's job)", "from schedule"
    ),
    "run_now_schedule_id": _Fact(
        Shape.TEXT,
        "The schedule whose Enqueue now made it (a tick's job has periodic_origin)",
        "enqueued now by",
    ),
    "fingerprint": _Fact(
        Shape.TEXT,
        "What quarantine matches (its kind and payload): PUT /quarantine/{fp} refuses jobs "
        "like it, DELETE releases them",
    ),
    "attempts": _Fact(Shape.NUMBER, "Attempts that ran to an end"),
    "crash_count": _Fact(Shape.NUMBER, "Times a worker died running it", "crashes"),
    "snoozes": _Fact(
        Shape.NUMBER, "Times its handler snoozed it (raise Snooze): attempts do not count them"
    ),
    "worker_id": _Fact(Shape.TEXT, "The worker running it, while it runs", "worker"),
    "running_attempt": _Fact(
        Shape.PARTS, "The attempt under way, while the job is running", "running"
    ),
    "error_type": _Fact(
        Shape.TEXT,
        "The newest failed attempt's exception type, named as it is imported; null once the "
        "job has completed (each failed attempt keeps its error in attempt_history)",
        "error",
    ),
    "error_message": _Fact(
        Shape.TEXT, "The newest failed attempt's message (truncated; null when not stored)"
    ),
    "payload": _Fact(Shape.JSON, "What its handler is called with (JSON)"),
    "result": _Fact(Shape.JSON, "What its handler returned, once completed"),
    "attempt_history": _Fact(
        Shape.PARTS,
        "The newest ended attempts, newest first (in a job's own read, empty in lists)",
        "attempts (newest first)",
    ),
}

_SCHEDULE_FACTS: Final[dict[str, _Fact]] = {
    "id": _Fact(Shape.TEXT, "Its id"),
    _OPTIONS: _Fact(Shape.PARTS, ""),
    "next_run_ms": _Fact(Shape.INSTANT, "Its next tick", "next run"),
    "next_due_at_ms": _Fact(
        Shape.INSTANT,
        "When next_run_ms is enqueued (its jitter or a retry included); null once finished",
        "next due",
    ),
    "last_enqueued_ms": _Fact(Shape.INSTANT, "The newest tick it enqueued", "last enqueued"),
    "retry_at_ms": _Fact(
        Shape.INSTANT,
        "Set while the current tick is failing and waits for its retry",
        "retry at",
    ),
    "finished": _Fact(Shape.FLAG, "Its next tick is past end_at_ms: no tick is left"),
    "declared_in_code": _Fact(
        Shape.FLAG,
        "The host's code declares it (Headgate.periodic): the code owns its definition, and "
        "what operators change is an override",
        "defined by",
    ),
    "overrides": _Fact(
        Shape.WORDS,
        "The fields operators changed from what the code declares; they survive deploys until "
        "they are cleared (DELETE /schedules/{id}/overrides)",
    ),
    "undeclared_at_ms": _Fact(
        Shape.INSTANT,
        "When a runtime started whose code no longer declares it (null: declared, or never was)",
        "undeclared since",
    ),
}


def _label(name: str) -> str:
    return name.removesuffix("_ms").replace("_", " ")


def _option_shape(owner: type[Any], name: str) -> Shape:
    hints = typing.get_type_hints(owner)
    annotation = hints[name]
    info = option_info(owner, name)
    if info.unit == "ms":
        return Shape.INSTANT if name.endswith("_at_ms") else Shape.DURATION
    members = set(typing.get_args(annotation)) or {annotation}
    if any(typing.get_origin(member) in (tuple, list) for member in members):
        return Shape.WORDS
    if bool in members:
        return Shape.FLAG
    if int in members:
        return Shape.NUMBER
    if str in members or any(isinstance(m, type) and issubclass(m, StrEnum) for m in members):
        return Shape.TEXT
    return Shape.JSON


def _option_field(name: str) -> ReadField:
    own = {f.name for f in dataclasses.fields(ScheduleDefinition)}
    owner: type[Any] = ScheduleDefinition if name in own else JobOptions
    shape = _option_shape(owner, name)
    return ReadField(name, _label(name), shape, option_info(owner, name).doc, option=True)


def _table(facts: dict[str, _Fact], options: tuple[str, ...]) -> tuple[ReadField, ...]:
    shown: list[ReadField] = []
    for name, fact in facts.items():
        if name == _OPTIONS:
            shown.extend(_option_field(option) for option in options)
        else:
            shown.append(ReadField(name, fact.label or _label(name), fact.shape, fact.doc))
    return tuple(shown)


JOB_READ: Final = _table(_JOB_FACTS, JOB_OPTION_FIELDS)
"""Every field of a job read back (`Job`, `JobOut`), in the order it is shown."""
SCHEDULE_READ: Final = _table(_SCHEDULE_FACTS, SCHEDULE_FIELDS)
"""Every field of a schedule read back (`Schedule`, `ScheduleOut`), in the order
it is shown: its id, its definition flat, then where it stands."""


def read_field(fields: tuple[ReadField, ...], name: str) -> ReadField:
    """The field of a read named `name` (KeyError if it has none)."""
    for found in fields:
        if found.name == name:
            return found
    raise KeyError(name)
