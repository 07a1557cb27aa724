"""Who owns a schedule's definition: the host's code, or its operators.

A schedule declared in code (`Headgate.periodic`) is owned by the code for
its definition: each start upserts what the code declares. Operators may
still change it (the API, the console, the CLI, `hg.schedules.put`,
`update`, pause and resume); every field where the schedule then
differs from the code's declaration is an *override*, and overrides survive
restarts and deploys until an operator clears them (`hg.schedules.clear_overrides`) or
sets the field back to what the code says. So a pause made during an
incident is never undone by the next deploy, and a code change to a field an
operator has overridden waits, visibly, until the override is cleared.

A schedule only operators define has no declaration and no overrides.

A declaration that disappears from the code (its `periodic` removed) is
noticed by the next runtime that starts with declarations of the same group
(`RuntimeConfig.declarations_group`): the schedule is marked undeclared and
reported (a warning, a metric, a badge in the console), and paused too when
the setting says so (`RuntimeConfig.on_undeclared`). It is never deleted:
an operator decides.
"""

from __future__ import annotations

from headgate._domain.options import SCHEDULE_FIELDS, ScheduleDefinition
from headgate._json import canonical_json


def overrides(current: ScheduleDefinition, declared: ScheduleDefinition | None) -> list[str]:
    """The flat fields where `current` differs from the code's declaration, in
    `SCHEDULE_FIELDS` order (none when nothing is declared)."""
    if declared is None:
        return []
    now, code = current.fields(), declared.fields()
    return [name for name in SCHEDULE_FIELDS if _differs(name, now[name], code[name])]


def _differs(name: str, one: object, other: object) -> bool:
    if name == "payload":
        return canonical_json(one) != canonical_json(other)
    return one != other


def declared_definition(
    code: ScheduleDefinition,
    current: ScheduleDefinition | None,
    previous: ScheduleDefinition | None,
) -> ScheduleDefinition:
    """The definition a schedule gets when the code (re)declares it as `code`:
    the code's, with the operator's overrides of the `previous` declaration
    kept. A schedule an operator defined before the code declared it keeps
    only its pause: the code takes its definition over."""
    if current is None:
        return code
    if previous is None:
        kept = ["paused"] if current.paused and not code.paused else []
    else:
        kept = overrides(current, previous)
    if not kept:
        return code
    values = current.fields()
    return code.restored_with({name: values[name] for name in kept})
