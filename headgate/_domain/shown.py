"""How much of a list every surface shows: the busiest part, and how many more.

A list whose length a client decides (queues are made by naming them, kinds by
enqueuing them) must not make every page, scrape and answer as long: 5,000
jobs on 5,000 new queues made each console page 0.9 MB and /metrics 35,000
series. Each surface shows at most a fixed number of items, the busiest ones,
and says how many it left out (a page: "and 4,990 more"; the API: `more`;
metrics and the activity roll-up: one series `OTHER` that sums the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

T = TypeVar("T")

OTHER: Final = "_other"
"""The label of what was left out: no queue or rate class can be named so (an
identifier starts with a letter or digit), nor a limit's scope."""
BANNER_SHOWN: Final = 10
"""Lines of the console's banner of unserved work."""
PAGE_SHOWN: Final = 200
"""Rows of a console page's list of queues; an API list's default."""
MAX_SHOWN: Final = 1_000
"""The most an API list gives (`limit`)."""
SERIES_SHOWN: Final = 50
"""Label values of one metric family before the rest is summed under OTHER."""
CHART_SHOWN: Final = 10
"""Queues and limits of the activity roll-up (lines of an overview chart)
before the rest is summed under OTHER."""


@dataclass(frozen=True)
class Shown(Generic[T]):
    items: list[T]
    """What is shown, in the order given."""
    more: int
    """How many were left out."""


def busiest(items: Sequence[T], limit: int, weight: Callable[[T], float]) -> Shown[T]:
    """The `limit` items of most weight (on a tie, the earlier), kept in the
    order given, and how many were left out."""
    if len(items) <= limit:
        return Shown(list(items), 0)
    ranked = sorted(range(len(items)), key=lambda index: (-weight(items[index]), index))
    kept = sorted(ranked[:limit])
    return Shown([items[index] for index in kept], len(items) - limit)


class QueueLoad(Protocol):
    """What a queue's weight is read from (`QueueStatus`)."""

    @property
    def paused(self) -> bool: ...
    @property
    def pending(self) -> int: ...
    @property
    def running(self) -> int: ...


def queue_weight(status: QueueLoad) -> float:
    """Which queues a bounded list keeps: the paused ones, then the busiest."""
    return (float("inf") if status.paused else 0.0) + status.pending + status.running
