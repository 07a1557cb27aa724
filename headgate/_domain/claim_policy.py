"""What a claim takes, and the rate-window and start-deadline arithmetic around it,
as pure functions over a job's facts: the rules every store keeps.

The memory store calls these; the SQL store states them in SQL (its claim
index is this order, its serial rule a NOT EXISTS), and
`tests/store/sql/test_claim_policy_agreement.py` holds the SQL to these on generated
rows.

- The claim order: priority (higher first), then the fair-share turn
  (`fair_share`), then run_at, then the job id.
- The serial rule: a serial tick job waits while an earlier tick job of its
  schedule is pending or running (`overlap.is_serial`).
- A claim in a queue takes its due jobs of the worker's kinds in claim order,
  none while the queue is paused, each only if it fits the limits (`Slots`).
- A rate class counts its starts within its window; a used-up class frees a
  start when its `limit`-th newest start leaves the window; a start no window
  can count any more is forgotten (`starts_kept`).
- A job with a start deadline not started by it is late (it expires instead of
  running).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from headgate._domain.events import UNFINISHED_STATES, JobState
from headgate._domain.fair_share import Lane, Turns
from headgate._domain.limits import MAX_RATE_WINDOW_MS, RateLimit, Slots


class ClaimFacts(Protocol):
    """What the claim's rules read of a job (a stored job row has them all)."""

    @property
    def job_id(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def fair_turn(self) -> int: ...
    @property
    def run_at_ms(self) -> int: ...
    @property
    def partition_key(self) -> str | None: ...
    @property
    def rate_class(self) -> str | None: ...
    @property
    def serial(self) -> bool: ...
    @property
    def periodic_schedule_id(self) -> str | None: ...
    @property
    def periodic_tick_ms(self) -> int | None: ...


Job = TypeVar("Job", bound=ClaimFacts)

ClaimKey = tuple[int, int, int, str]


def claim_order(job: ClaimFacts) -> ClaimKey:
    """The sort key of the claim order (the SQL store's claim index)."""
    return -job.priority, job.fair_turn, job.run_at_ms, job.job_id


def is_live(state: str) -> bool:
    """Pending or running: a job whose tick still holds back a serial successor."""
    return state in UNFINISHED_STATES


def waits_its_turn(job: ClaimFacts, live_ticks: Iterable[int]) -> bool:
    """The serial rule: a serial tick job waits while an earlier tick of its
    schedule is live (`live_ticks`: the ticks of its schedule's live jobs)."""
    if not job.serial or job.periodic_tick_ms is None:
        return False
    return any(tick < job.periodic_tick_ms for tick in live_ticks)


def live_ticks_by_schedule(jobs: Iterable[ClaimFacts]) -> dict[str, list[int]]:
    """schedule id -> the ticks of its live tick jobs, oldest first."""
    found: dict[str, list[int]] = {}
    for job in jobs:
        schedule_id, tick = job.periodic_schedule_id, job.periodic_tick_ms
        if schedule_id is not None and tick is not None and is_live(job.state):
            found.setdefault(schedule_id, []).append(tick)
    return {schedule_id: sorted(ticks) for schedule_id, ticks in found.items()}


def is_candidate(
    job: ClaimFacts,
    kinds: Collection[str],
    live_ticks: Callable[[str], Iterable[int]],
    *,
    now_ms: int | None = None,
    after_ms: int | None = None,
) -> bool:
    """A pending job of these kinds whose serial turn has come, due at `now_ms`
    (when given) and due after `after_ms` (when given); its queue's pause is
    the caller's to check."""
    if job.state != JobState.PENDING or job.kind not in kinds:
        return False
    if now_ms is not None and job.run_at_ms > now_ms:
        return False
    if after_ms is not None and job.run_at_ms <= after_ms:
        return False
    return not waits_its_turn(job, live_ticks(job.periodic_schedule_id or ""))


def take_in_order(candidates: Iterable[Job], count: int, slots: Slots | None) -> list[Job]:
    """The first `count` candidates in claim order that fit `slots` (which counts
    each one taken); every candidate when there are no limits."""
    taken: list[Job] = []
    for job in sorted(candidates, key=claim_order):
        if len(taken) == count:
            break
        if slots is None or slots.take(job.queue, job.kind, job.partition_key, job.rate_class):
            taken.append(job)
    return taken


def choose_claims(  # noqa: PLR0917 (the claim's inputs, each its own fact)
    pending: Callable[[str], Iterable[Job]],
    capacity: Mapping[str, int],
    kinds: Collection[str],
    now_ms: int,
    paused: Collection[str],
    live_ticks: Callable[[str], Iterable[int]],
    slots: Slots | None = None,
) -> list[Job]:
    """What a claim takes, queue by queue in `capacity`'s order: `pending(queue)`
    gives a queue's pending jobs, `live_ticks(schedule_id)` a schedule's live
    ticks; `slots` (None: no limits) is counted as jobs are taken."""
    if not kinds:
        return []
    wanted = set(kinds)
    chosen: list[Job] = []
    for queue, count in capacity.items():
        if count <= 0 or queue in paused:
            continue
        due = [
            job for job in pending(queue) if is_candidate(job, wanted, live_ticks, now_ms=now_ms)
        ]
        chosen.extend(take_in_order(due, count, slots))
    return chosen


def earliest_claimable(
    pending: Iterable[ClaimFacts],
    kinds: Collection[str],
    paused: Collection[str],
    live_ticks: Callable[[str], Iterable[int]],
    after_ms: int | None = None,
) -> int | None:
    """The earliest run_at of a job a claim could take once due (after `after_ms`
    when given), limits aside."""
    wanted = set(kinds)
    return min(
        (
            job.run_at_ms
            for job in pending
            if job.queue not in paused and is_candidate(job, wanted, live_ticks, after_ms=after_ms)
        ),
        default=None,
    )


# Fair turns


def latest_live_turns(
    jobs: Iterable[ClaimFacts], asked: Collection[tuple[str, int, str]]
) -> dict[tuple[str, int, str], int]:
    """The latest turn of each asked (queue, priority, partition key) among live jobs."""
    wanted = set(asked)
    latest: dict[tuple[str, int, str], int] = {}
    for job in jobs:
        if job.partition_key is None or not is_live(job.state):
            continue
        key = (job.queue, job.priority, job.partition_key)
        if key in wanted:
            latest[key] = max(latest.get(key, job.fair_turn), job.fair_turn)
    return latest


def turns(
    jobs: Iterable[ClaimFacts],
    current: Mapping[Lane, int],
    lanes: Collection[Lane],
    partitions: Collection[tuple[str, int, str]],
) -> Turns:
    """The gate's fair-share facts: the asked lanes' current turns and the latest
    live turn of each asked partition."""
    return Turns(
        {lane: current[lane] for lane in lanes if lane in current},
        latest_live_turns(jobs, partitions),
    )


# Rate windows


def within_window(starts: Iterable[int], per_ms: int, now_ms: int) -> list[int]:
    """The starts a window of `per_ms` ending at `now_ms` counts, newest first."""
    return sorted((at for at in starts if at > now_ms - per_ms), reverse=True)


def recent_starts(
    rates: Iterable[RateLimit], starts: Mapping[str, Sequence[int]], now_ms: int
) -> dict[str, int]:
    """Per rate class, its starts within its window."""
    return {
        rate.rate_class: len(within_window(starts.get(rate.rate_class, ()), rate.per_ms, now_ms))
        for rate in rates
    }


def slot_frees_at(starts: Iterable[int], rate: RateLimit, now_ms: int) -> int | None:
    """When a used-up class frees a start: its `limit`-th newest start within its
    window leaves it (None: it is not used up)."""
    within = within_window(starts, rate.per_ms, now_ms)
    if len(within) < rate.limit:
        return None
    return within[rate.limit - 1] + rate.per_ms


def rate_slot_frees_at(
    rates: Iterable[RateLimit], starts: Mapping[str, Sequence[int]], now_ms: int
) -> int | None:
    """When the first used-up rate class frees a start (None: none is used up)."""
    frees = (slot_frees_at(starts.get(rate.rate_class, ()), rate, now_ms) for rate in rates)
    return min((at for at in frees if at is not None), default=None)


def starts_kept(starts: Iterable[int], limit: int, per_ms: int, now_ms: int) -> list[int]:
    """A rate class's starts that a window can still count, oldest first: within
    the widest window (`MAX_RATE_WINDOW_MS`), and either inside its own window
    or no older than its `limit`-th newest (with ties). Every start inside the
    window is kept, so a limit lowered and raised again still counts them;
    outside it the newest `limit` are, so a widened window counts what started
    before it widened."""
    recent = sorted(at for at in starts if at > now_ms - MAX_RATE_WINDOW_MS)
    if len(recent) <= limit:
        return recent
    oldest_kept = recent[-limit]
    return [at for at in recent if at >= oldest_kept or at > now_ms - per_ms]


# Start deadlines


def start_deadline(
    start_within_ms: int | None, tick_ms: int | None, run_at_ms: int | None, enqueued_at_ms: int
) -> int | None:
    """When a job must have started: `start_within_ms` after it was due (a tick
    job: its tick; else its run_at, or its enqueue). None: no deadline."""
    if start_within_ms is None:
        return None
    due = tick_ms if tick_ms is not None else run_at_ms
    return (enqueued_at_ms if due is None else due) + start_within_ms


def is_late(start_by_ms: int | None, now_ms: int) -> bool:
    """Not started by its start deadline: it expires instead of running."""
    return start_by_ms is not None and start_by_ms < now_ms
