"""Fair share between the partitions of a queue: start-time fair queueing.

Claims take a queue's jobs by (priority, turn, run_at), so the claim stays one
range of one index however many partitions wait. Each priority of a queue is
a lane with its own round of turns. A job of partition P takes the turn after
P's latest live job in its lane, but never one before the lane's current turn:
the highest turn a claim has taken in the lane (kept by the claim, so it only
ever moves on). So a partition with a 10,000-job backlog holds turns far
ahead, and another partition's new job takes the current turn and is claimed
next; a partition whose jobs have all been claimed starts again at the
current turn, never behind a backlog that arrived meanwhile. Nothing is
withheld while anything waits (the order changes, not what may run), so idle
capacity is never wasted.

A job without a partition key takes the current turn: it joins the round
under way, neither held behind a backlog nor holding one back. With no
partitioned jobs in a queue every turn is 0, and the claim order is priority,
then run_at, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Lane = tuple[str, int]
"""(queue, priority): jobs that share a round of turns."""


@dataclass
class Turns:
    """What the gate knows of a batch's lanes: each lane's current turn, and the
    latest turn of each (queue, priority, partition key) with live jobs, kept up
    to date as the batch admits jobs."""

    current: Mapping[Lane, int] = field(default_factory=dict)
    latest: dict[tuple[str, int, str], int] = field(default_factory=dict)

    def take(self, queue: str, priority: int, partition_key: str | None) -> int:
        """The turn of a job admitted now (and counted for the rest of the batch)."""
        now = self.current.get((queue, priority), 0)
        if partition_key is None:
            return now
        latest = self.latest.get((queue, priority, partition_key))
        turn = now if latest is None else max(latest + 1, now)
        self.latest[(queue, priority, partition_key)] = turn
        return turn


def lanes_claimed(claimed: list[tuple[str, int, int]]) -> dict[Lane, int]:
    """Each lane's highest turn among claimed (queue, priority, turn), where it is
    above 0 (a lane whose turns are all 0 has no partitions to share among)."""
    highest: dict[Lane, int] = {}
    for queue, priority, turn in claimed:
        if turn > highest.get((queue, priority), 0):
            highest[(queue, priority)] = turn
    return highest
