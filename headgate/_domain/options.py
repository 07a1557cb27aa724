"""A job's options and a schedule's definition: one value object each.

Every layer passes these along, as River's `InsertOpts` and APScheduler's
`Schedule` are passed: the events carry them whole, the projections, the
commands and the planner read them, and every surface (Python keywords, the
API's bodies, the CLI's flags, the console's form) is derived from their
fields or checked against them (`tests/test_option_parity.py`). Adding an
option is a field here (its default, its rule, its description), its column
if a query needs it, and its use.

Each object checks its fields when it is made; a rejection names the field
and the rule (`ValidationError`). Rules that depend on a server's settings
(the payload size limit, the minimum interval between ticks) are checked by
the commands, which know the settings. What a store already holds is read
back with `restored`, which checks nothing: a name stored before today's
rules stays readable and runnable.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from headgate._domain import option_rules as rules
from headgate._domain.missed_runs import MissedRunPolicy
from headgate._domain.overlap import OverlapPolicy
from headgate._domain.spec import InvalidSpec, parse_spec
from headgate._domain.tick_timing import TickTiming
from headgate._errors import ValidationError
from headgate._json import JsonValue, canonical_json

__all__ = [
    "CHOSEN_AT_ENQUEUE",
    "DEFAULT_PRIORITY",
    "DEFAULT_QUEUE",
    "FORMER_NAMES",
    "JOB_OPTION_FIELDS",
    "PER_JOB_FIELDS",
    "SCHEDULE_DEFAULTS",
    "SCHEDULE_FIELDS",
    "SCHEDULE_KEYWORDS",
    "JobOptions",
    "OptionInfo",
    "ScheduleDefinition",
    "current_names",
    "option_info",
    "refuse_unknown",
]

DEFAULT_QUEUE: Final = "default"
DEFAULT_PRIORITY: Final = 0

Check = rules.Check


@dataclass(frozen=True)
class OptionInfo:
    """What every surface needs to know of a field besides its type and default."""

    doc: str
    """One line for the API's schema, the CLI's help and the console's form."""
    check: Check
    per_job: bool = False
    """Set per job only: a schedule's ticks and a handler's jobs cannot share it."""
    unit: str = ""
    """The unit of a number ("ms"), shown beside it."""
    formerly: str | None = None
    """Its name before a rename: still taken, with a DeprecationWarning, for one
    minor version (`current_names`), and read back from what a store holds."""
    chosen_at_enqueue: bool = False
    """A claim reads it from the job's row, so what a job leaves unset is taken
    from its handler when it is enqueued (`CHOSEN_AT_ENQUEUE`)."""
    on_every_job: bool = False
    """Every job read back has one (chosen at enqueue, else Headgate's default):
    the read types carry it as a value, never None."""


def _option(
    doc: str,
    check: Check,
    *,
    per_job: bool = False,
    unit: str = "",
    formerly: str | None = None,
    chosen_at_enqueue: bool = False,
    on_every_job: bool = False,
) -> dict[str, Any]:
    """A field's metadata: `field(default=..., metadata=_option(...))`."""
    info = OptionInfo(doc, check, per_job, unit, formerly, chosen_at_enqueue, on_every_job)
    return {"option": info}


def option_info(owner: type[Any], name: str) -> OptionInfo:
    """The description and rule of one field of JobOptions or ScheduleDefinition."""
    info: OptionInfo = _fields_of(owner)[name].metadata["option"]
    return info


def _schedule_job(name: str, value: object) -> JobOptions:
    if not isinstance(value, JobOptions):
        raise ValidationError(name, f"must be JobOptions, got {type(value).__name__}")
    for per_job in PER_JOB_FIELDS:
        if getattr(value, per_job) is not None:
            raise ValidationError(per_job, "is set per job: a schedule's ticks each have their own")
    if value.queue is None:
        return dataclasses.replace(value, queue=DEFAULT_QUEUE)
    return value


# The value objects ---------------------------------------------------------

V = TypeVar("V")
V2 = TypeVar("V2")


_FIELDS: dict[type[Any], dict[str, dataclasses.Field[Any]]] = {}


def _fields_of(owner: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    """The fields of a value object's class, by name (read once: every stored
    event's options are read back through them)."""
    found = _FIELDS.get(owner)
    if found is None:
        found = _FIELDS[owner] = {f.name: f for f in dataclasses.fields(owner)}
    return found


def _checked(owner: object, values: Mapping[str, object]) -> None:
    """Check these fields of a value object being made, in place."""
    for name, value in values.items():
        info: OptionInfo = _fields_of(type(owner))[name].metadata["option"]
        object.__setattr__(owner, name, info.check(name, value))


def _restored(cls: type[V], values: Mapping[str, Any]) -> V:
    """An object of `cls` with these field values, unchecked (defaults for the rest;
    a field stored under its former name read as it is named now)."""
    made = object.__new__(cls)
    for name, spec in _fields_of(cls).items():
        formerly = spec.metadata["option"].formerly if "option" in spec.metadata else None
        value = values.get(name, values.get(formerly, spec.default) if formerly else spec.default)
        object.__setattr__(made, name, value)
    return made


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """How a job runs: set per job (`enqueue`), for a schedule's ticks
    (`hg.schedules.put`), or as a handler's defaults (`handler`). None means: the
    handler's setting, else Headgate's default."""

    queue: str | None = field(
        default=None,
        metadata=_option(
            "The queue it waits in (none: its handler's, else default)",
            rules.optional(rules.queue),
            chosen_at_enqueue=True,
            on_every_job=True,
        ),
    )
    max_attempts: int | None = field(
        default=None,
        metadata=_option(
            "Attempts before it fails for good (none: its handler's, else 25)",
            rules.optional(rules.attempts),
        ),
    )
    timeout_ms: int | None = field(
        default=None,
        metadata=_option(
            "How long one attempt may run (none: its handler's, else 30 min)",
            rules.optional(rules.timeout_ms),
            unit="ms",
        ),
    )
    priority: int | None = field(
        default=None,
        metadata=_option(
            "Higher is claimed first within its queue; equal priorities oldest run_at "
            "first (none: its handler's, else 0)",
            rules.optional(rules.priority),
            chosen_at_enqueue=True,
            on_every_job=True,
        ),
    )
    start_within_ms: int | None = field(
        default=None,
        metadata=_option(
            "Expires instead of running if not started this long after it was due "
            "(a tick job: after its tick; none: its handler's, else never)",
            rules.optional(rules.start_within_ms),
            unit="ms",
            chosen_at_enqueue=True,
        ),
    )
    partition_key: str | None = field(
        default=None,
        metadata=_option(
            "Its share of the queue (a tenant id): jobs of one key take turns with other "
            "keys', and concurrency limits can count them per key (none: its handler's)",
            rules.optional(rules.partition_key),
            chosen_at_enqueue=True,
        ),
    )
    rate_class: str | None = field(
        default=None,
        metadata=_option(
            "The rate limit it starts under (set_rate_limit); while the class is used up it "
            "waits, spending no attempt (none: its handler's, else no rate limit)",
            rules.optional(rules.rate_class),
            chosen_at_enqueue=True,
        ),
    )
    run_at_ms: int | None = field(
        default=None,
        metadata=_option(
            "When it may first run, epoch ms (none: at once)",
            rules.optional(rules.instant),
            per_job=True,
            unit="ms",
            on_every_job=True,
        ),
    )
    unique_key: str | None = field(
        default=None,
        metadata=_option(
            "While a pending or running job holds this key, another job with it is refused",
            rules.optional(rules.unique_key),
            per_job=True,
        ),
    )

    tags: tuple[str, ...] | None = field(
        default=None,
        metadata=_option(
            f"Labels to find it by (at most {rules.MAX_TAGS}, each an identifier of up to "
            f"{rules.MAX_TAG_LENGTH} characters)",
            rules.optional(rules.tags),
            per_job=True,
            on_every_job=True,
        ),
    )

    def __post_init__(self) -> None:
        _checked(self, self.__dict__)

    @classmethod
    def restored(cls, **values: Any) -> JobOptions:
        """Options as stored, unchecked (fields absent from an older record: defaults)."""
        return _restored(cls, values)

    def keyed(self, unique_key: str) -> JobOptions:
        """These options with a key Headgate made (a tick's), unchecked: made for
        every tick, so copied as they are rather than field by field."""
        made = object.__new__(JobOptions)
        made.__dict__.update(self.__dict__, unique_key=unique_key)
        return made

    def under(self, defaults: JobOptions) -> JobOptions:
        """These options, each one left unset (None) taken from `defaults`."""
        chosen = {
            name: getattr(defaults, name) if value is None else value
            for name, value in self.__dict__.items()
        }
        return _restored(JobOptions, chosen)

    def changed(self, changes: Mapping[str, object]) -> JobOptions:
        """These options with `changes` (field -> value), only the changes checked."""
        return _with_changes(self, changes)


def _first_tick_within(definition: ScheduleDefinition) -> None:
    """A bounded schedule has a tick between its start and its end."""
    start, end = definition.start_at_ms, definition.end_at_ms
    if start is None or end is None:
        return
    timing = TickTiming("", parse_spec(definition.spec), start, end)
    try:
        first = timing.first_tick_ms(start - 1) if start > 0 else timing.spec.next_tick_ms(0)
    except InvalidSpec:
        first = None
    if first is None or first > end:
        raise ValidationError(
            "end_at_ms", f"no tick of '{definition.spec}' falls from start_at_ms to end_at_ms"
        )


def _cross_checked(definition: ScheduleDefinition) -> None:
    start, end = definition.start_at_ms, definition.end_at_ms
    if start is not None and end is not None and end <= start:
        raise ValidationError("end_at_ms", f"must be after start_at_ms ({start}), got {end}")
    _first_tick_within(definition)


_DEFAULT_SCHEDULE_JOB: Final = JobOptions(queue=DEFAULT_QUEUE)


@dataclass(frozen=True, kw_only=True)
class ScheduleDefinition:
    """What a schedule is: when it ticks, what each tick enqueues, and how.

    Flat, as every surface shows it, its fields are these (`job` aside) and
    the job options a schedule may set (`SCHEDULE_FIELDS`): `fields()` and
    `from_fields()` convert."""

    spec: str = field(
        metadata=_option(
            'When it ticks: "@every:30s", a cron ("0 9 * * *"), with CRON_TZ=Zone', rules.spec
        )
    )
    kind: str = field(metadata=_option("The job kind each tick enqueues", rules.kind))
    summary: str = field(
        default="",
        metadata=_option("What it is for, in a line, shown to operators", rules.summary),
    )
    payload: JsonValue = field(
        default=None, metadata=_option("Each tick's job's payload (JSON)", rules.payload)
    )
    on_missed: MissedRunPolicy = field(
        default=MissedRunPolicy.SKIP,
        metadata=_option("What it does with ticks missed while nobody fired them", rules.policy),
    )
    backfill_max: int = field(
        default=1,
        metadata=_option(
            "How many missed ticks backfill enqueues (1 to 1000)",
            rules.backfill_max,
            formerly="backfill_limit",
        ),
    )
    overlap: OverlapPolicy = field(
        default=OverlapPolicy.ALLOW,
        metadata=_option(
            "What a tick does while the schedule's previous tick job is pending or running: "
            "allow, skip, buffer_one or cancel_previous",
            rules.overlap,
        ),
    )
    paused: bool = field(
        default=False,
        metadata=_option("A paused schedule fires no tick, keeping its phase", rules.boolean),
    )
    start_at_ms: int | None = field(
        default=None,
        metadata=_option(
            "No tick before it, epoch ms (none: unbounded)",
            rules.optional(rules.instant),
            unit="ms",
        ),
    )
    end_at_ms: int | None = field(
        default=None,
        metadata=_option(
            "No tick after it, epoch ms, after start_at_ms (none: unbounded)",
            rules.optional(rules.instant),
            unit="ms",
        ),
    )
    jitter_ms: int = field(
        default=0,
        metadata=_option(
            "Each tick is enqueued a stable delay in [0, jitter_ms) after it (up to an hour)",
            rules.jitter_ms,
            unit="ms",
        ),
    )
    job: JobOptions = field(
        default=_DEFAULT_SCHEDULE_JOB,
        metadata=_option("The options of each tick's job", _schedule_job),
    )

    def __post_init__(self) -> None:
        _checked(self, self.__dict__)
        _cross_checked(self)

    @classmethod
    def restored(cls, **values: Any) -> ScheduleDefinition:
        """A definition as stored, unchecked (fields absent from an older record:
        defaults); `job` may be given as a mapping of its fields."""
        job = values.get("job")
        if isinstance(job, Mapping):
            values = {**values, "job": JobOptions.restored(**job)}
        policy = values.get("on_missed")
        if policy is not None and not isinstance(policy, MissedRunPolicy):
            values = {**values, "on_missed": MissedRunPolicy(policy)}
        overlap = values.get("overlap")
        if overlap is not None and not isinstance(overlap, OverlapPolicy):
            values = {**values, "overlap": OverlapPolicy(overlap)}
        return _restored(cls, values)

    @classmethod
    def from_fields(cls, values: Mapping[str, object]) -> ScheduleDefinition:
        """A definition from its flat fields (`SCHEDULE_FIELDS`: spec and kind
        required, the rest default); an unknown field is refused by name."""
        values = current_names(values)
        refuse_unknown(values, SCHEDULE_FIELDS)
        for required in ("spec", "kind"):
            if required not in values:
                raise ValidationError(required, "is required")
        job: dict[str, Any] = {"queue": DEFAULT_QUEUE}
        own: dict[str, Any] = {}
        for name, value in values.items():
            (job if name in _JOB_FIELD_SET else own)[name] = value
        return cls(**own, job=JobOptions(**job))

    @classmethod
    def restored_fields(cls, values: Mapping[str, Any]) -> ScheduleDefinition:
        """A definition as stored from its flat fields, unchecked."""
        job = {name: value for name, value in values.items() if name in _JOB_FIELD_SET}
        own = {name: value for name, value in values.items() if name not in _JOB_FIELD_SET}
        return cls.restored(**own, job=JobOptions.restored(**job))

    def restored_with(self, changes: Mapping[str, Any]) -> ScheduleDefinition:
        """This definition with flat `changes` a store already held, unchecked."""
        return ScheduleDefinition.restored_fields({**self.fields(), **changes})

    def fields(self) -> dict[str, Any]:
        """The definition flat, as every surface shows it (`SCHEDULE_FIELDS`)."""
        flat = {name: value for name, value in self.__dict__.items() if name != "job"}
        flat.update((name, getattr(self.job, name)) for name in _SCHEDULE_JOB_FIELDS)
        return flat

    def changed(self, changes: Mapping[str, object]) -> ScheduleDefinition:
        """This definition with flat `changes` applied; only the changed fields are
        checked (with the rules that tie fields together), so a schedule stored
        under older rules can still be paused or re-timed."""
        refuse_unknown(changes, SCHEDULE_FIELDS)
        job_changes = {k: v for k, v in changes.items() if k in _JOB_FIELD_SET}
        own = {k: v for k, v in changes.items() if k not in _JOB_FIELD_SET}
        if job_changes:
            job = self.job.changed(job_changes)
            own["job"] = job if job.queue is not None else job.changed({"queue": DEFAULT_QUEUE})
        updated = _with_changes(self, own)
        _cross_checked(updated)
        return updated

    def same_as(self, other: ScheduleDefinition) -> bool:
        """Equal, payloads compared as stored (canonical JSON: 1 and true differ)."""
        if dataclasses.replace(self, payload=None) != dataclasses.replace(other, payload=None):
            return False
        return canonical_json(self.payload) == canonical_json(other.payload)


def _with_changes(current: V, changes: Mapping[str, object]) -> V:
    refuse_unknown(changes, tuple(_fields_of(type(current))))
    values = dict(current.__dict__)
    for name, value in changes.items():
        info: OptionInfo = _fields_of(type(current))[name].metadata["option"]
        values[name] = info.check(name, value)
    return _restored(type(current), values)


def current_names(values: Mapping[str, V2]) -> Mapping[str, V2]:
    """`values` with each option given by its former name (`OptionInfo.formerly`)
    under its name now, with a DeprecationWarning at the caller outside Headgate
    naming both; both names at once are refused."""
    former = [name for name in values if name in FORMER_NAMES]
    if not former:
        return values
    renamed = dict(values)
    for old in former:
        new = FORMER_NAMES[old]
        if new in values:
            raise ValidationError(old, f"is {new}'s former name: give {new} alone")
        warnings.warn(
            f"the option {old} is deprecated and will be removed in the next minor version: "
            f"use {new}",
            DeprecationWarning,
            stacklevel=_caller_outside_headgate(),
        )
        renamed[new] = renamed.pop(old)
    return renamed


def _caller_outside_headgate() -> int:
    """The stack level of the nearest caller whose code is not Headgate's own."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("headgate."):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def refuse_unknown(values: Mapping[str, object], known: Collection[str]) -> None:
    """The one check of the option names a caller gives (Python keywords, a bulk
    item's keys): the first name not in `known` (in sorted order) is a
    ValidationError naming it and the known name it is closest to, if one is
    close (`prority: is not a known option (did you mean priority?)`)."""
    unknown = sorted(str(name) for name in values if name not in known)
    if not unknown:
        return
    name = unknown[0]
    if name in PER_JOB_FIELDS:
        raise ValidationError(name, "is set per job: a schedule's ticks each have their own")
    close = difflib.get_close_matches(name, sorted(known), n=1)
    raise ValidationError(
        name, "is not a known option" + (f" (did you mean {close[0]}?)" if close else "")
    )


JOB_OPTION_FIELDS: Final = tuple(f.name for f in dataclasses.fields(JobOptions))
"""Every job option, as enqueue takes them."""
CHOSEN_AT_ENQUEUE: Final = tuple(
    name for name in JOB_OPTION_FIELDS if option_info(JobOptions, name).chosen_at_enqueue
)
"""The options a claim reads from a job's row: what a job leaves unset is taken
from its handler when it is enqueued (the attempt limit and timeout are taken
when it runs, and recorded on the job when its attempt ends)."""
PER_JOB_FIELDS: Final = tuple(
    name for name in JOB_OPTION_FIELDS if option_info(JobOptions, name).per_job
)
_SCHEDULE_JOB_FIELDS: Final = tuple(
    name for name in JOB_OPTION_FIELDS if name not in PER_JOB_FIELDS
)
_JOB_FIELD_SET: Final = frozenset(_SCHEDULE_JOB_FIELDS)
SCHEDULE_FIELDS: Final = (
    *(f.name for f in dataclasses.fields(ScheduleDefinition) if f.name != "job"),
    *_SCHEDULE_JOB_FIELDS,
)
"""A schedule's definition, flat: its own fields, then its jobs' options."""
FORMER_NAMES: Final[Mapping[str, str]] = {
    info.formerly: name
    for owner in (ScheduleDefinition, JobOptions)
    for name, field_ in _fields_of(owner).items()
    if "option" in field_.metadata and (info := field_.metadata["option"]).formerly
}
"""Each renamed option's former name -> its name now."""
SCHEDULE_KEYWORDS: Final = (*SCHEDULE_FIELDS, "timeout_s")
"""The names a schedule's Python keywords take (`ScheduleArgs`, `spec`, `kind`)."""
SCHEDULE_DEFAULTS: Final[Mapping[str, Any]] = {
    **{
        f.name: f.default
        for f in dataclasses.fields(ScheduleDefinition)
        if f.name != "job" and f.default is not dataclasses.MISSING
    },
    **{name: getattr(_DEFAULT_SCHEDULE_JOB, name) for name in _SCHEDULE_JOB_FIELDS},
}
"""The flat fields a definition may leave out, with what they then are."""
