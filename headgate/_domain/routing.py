"""Where a job goes when the process enqueuing it has no handler of its kind.

Its handler's declaration decides, as the store keeps it (each runtime with
handlers records them at start, `HandlerDeclarations`), never which workers
happen to be alive at that moment: a job of a `queue="pdf"` handler goes to
`pdf` while every pdf worker is stopped, and waits there for the next one.

The rule, one kind at a time:

* no declaration of the kind: Headgate's defaults (the queue "default");
* the job names its queue: it keeps it, and takes the rest of its defaults
  from the declaration on that queue, else from any (the newest, if several),
  as it would from its handler were the handler registered in its process;
* otherwise every declaration must name one queue (each declarations group
  keeps one declaration of a kind, its newest start's); groups that name
  different queues are refused, naming the kind, the queues and the groups:
  the job must name its queue, or the groups' code must agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from headgate._domain.options import DEFAULT_PRIORITY, DEFAULT_QUEUE, JobOptions
from headgate._errors import ValidationError

UNDECLARED: JobOptions = JobOptions.restored(queue=DEFAULT_QUEUE, priority=DEFAULT_PRIORITY)
"""What a kind no handler declares gets (the queue unless the job names one)."""


@dataclass(frozen=True)
class Declared:
    """One group's declaration of a kind's handler: the defaults it gives a job."""

    declared_by: str
    defaults: JobOptions
    """Its `CHOSEN_AT_ENQUEUE` options, queue and priority always set."""
    declared_at_ms: int


def declared_defaults(kind: str, declared: Sequence[Declared], queue: str | None) -> JobOptions:
    """The defaults a job of `kind` that names `queue` (None: none) takes from the
    declarations of its handler (see the module's rule); ValidationError on
    `queue` when the groups declaring it disagree on its queue and it names none."""
    if not declared:
        return UNDECLARED if queue is None else _on(queue, UNDECLARED)
    if queue is not None:
        on_queue = [d for d in declared if d.defaults.queue == queue]
        newest = max(on_queue or declared, key=lambda d: d.declared_at_ms)
        return _on(queue, newest.defaults)
    queues = sorted({str(d.defaults.queue) for d in declared})
    if len(queues) > 1:
        groups = ", ".join(
            f"{d.defaults.queue} (group {d.declared_by})"
            for d in sorted(declared, key=lambda d: (str(d.defaults.queue), d.declared_by))
        )
        raise ValidationError(
            "queue",
            f"kind {kind!r} has handlers declared on different queues: {groups}; no handler "
            "of it is registered in this process to choose: name the queue for this job, "
            "or declare the handler on one queue in every declarations group",
        )
    return max(declared, key=lambda d: d.declared_at_ms).defaults


def _on(queue: str, defaults: JobOptions) -> JobOptions:
    """`defaults` on `queue` (a name its job's options already checked)."""
    return JobOptions.restored(**{**defaults.__dict__, "queue": queue})
