"""Fair share between the partitions of a queue: start-time fair queueing.

Every job gets a turn when it is admitted, and claims take a queue's jobs by
(priority, turn, run_at): so the claim stays one range of one index, however
many partitions wait. A job of partition P takes the turn after P's latest
live job, but never one before the queue's current turn (the lowest turn of
its due pending partitioned jobs): so a partition with a 10,000-job backlog
holds turns far ahead, and another partition's new job takes the current
turn and is claimed next. Nothing is withheld while anything waits (the
order changes, not what may run), so idle capacity is never wasted.

A job without a partition key takes the current turn: it joins the round
under way, neither held behind a backlog nor holding one back. With no
partitioned jobs in a queue every turn is 0, and the claim order is priority,
then run_at, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Turns:
    """What the gate knows of a batch's queues: each queue's current turn, and the
    latest turn of each (queue, partition key) with live jobs, kept up to date as
    the batch admits jobs."""

    current: Mapping[str, int] = field(default_factory=dict)
    latest: dict[tuple[str, str], int] = field(default_factory=dict)

    def take(self, queue: str, partition_key: str | None) -> int:
        """The turn of a job admitted now (and counted for the rest of the batch)."""
        now = self.current.get(queue, 0)
        if partition_key is None:
            return now
        latest = self.latest.get((queue, partition_key))
        turn = now if latest is None else max(latest + 1, now)
        self.latest[(queue, partition_key)] = turn
        return turn
