"""What a schedule does with a tick that comes due while an earlier job of its
own is still pending or running (Temporal's ScheduleOverlapPolicy, Kubernetes'
concurrencyPolicy).

Only the schedule's tick jobs count, both ways: a manual run (Enqueue now) is
neither held back by a running tick job nor holds one back.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    """Enqueue every tick, whatever runs (the default)."""
    SKIP = "skip"
    """While a tick job is pending or running, record the tick skipped (overlap)."""
    BUFFER_ONE = "buffer_one"
    """Keep at most one tick job waiting behind the running one, which it does not
    start beside; further ticks are skipped (overlap) while one waits."""
    CANCEL_PREVIOUS = "cancel_previous"
    """Cancel the pending or running tick job (a running handler is told through
    `job.cancelled`) and enqueue the new tick's."""


LABELS: Final = {
    OverlapPolicy.ALLOW: "Allow overlapping runs",
    OverlapPolicy.SKIP: "Skip while one runs",
    OverlapPolicy.BUFFER_ONE: "Buffer one behind the running one",
    OverlapPolicy.CANCEL_PREVIOUS: "Cancel the previous run",
}
"""The console's label of each policy."""


def label(overlap: str) -> str:
    """A schedule's overlap policy as operators see it."""
    return LABELS[OverlapPolicy(overlap)] if overlap in LABELS else overlap


def is_serial(policy: OverlapPolicy) -> bool:
    """Whether the schedule's tick jobs run one at a time: each is claimed only
    once no earlier tick job of the schedule is pending or running. skip and
    buffer_one admit a tick job beside at most one other, and this keeps the two
    from running together (a retried one included); cancel_previous has
    cancelled the other before its job is admitted."""
    return policy in (OverlapPolicy.SKIP, OverlapPolicy.BUFFER_ONE)
