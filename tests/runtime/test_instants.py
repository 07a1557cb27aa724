"""Ticks are prepared ahead of their instant and committed at it, never before.

The scheduler sends the schedules due at the next instant `prepare_ahead_ms`
early; the batch is planned and written in advance and its transaction
commits once the clock reaches the instant. These tests drive a fake clock by
hand around that window.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from headgate import AttemptResult, EnqueueHook, Headgate, RuntimeConfig, TickContext
from headgate._runtime.actors import SchedulerActor
from headgate._runtime.instants import LEAD_MARGIN_MS, MAX_LEAD_MS, next_lead_ms
from headgate._runtime.tick_batch import TickProcessor
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, fire, jobs_for

MINUTE = 60_000
INSTANT = START_MS + MINUTE


class Commits(EnqueueHook):
    def __init__(self) -> None:
        self.results: list[tuple[int, AttemptResult]] = []

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        self.results.append((context.tick_ms, result))


def _eventually(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _runtime(make_headgate: Callable[..., Headgate], hook: EnqueueHook | None = None) -> Headgate:
    config = RuntimeConfig(lease_ttl_ms=60_000, prepare_ahead_ms=500)
    hg = make_headgate(config, hooks=[hook] if hook else [])
    hg.schedules.put("s", spec="@every:60000", kind="k")
    hg.schedules.put("t", spec="@every:60000", kind="k")
    return hg


@AND_MEMORY
def test_a_prepared_batch_commits_at_its_instant_not_before(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    commits = Commits()
    hg = _runtime(make_headgate, commits)
    clock.set(INSTANT - 300)
    hg.start()
    time.sleep(0.1)
    assert jobs_for(hg, "s") == [] and hg.schedules.get("s").next_run_ms == INSTANT
    clock.set(INSTANT)
    _eventually(lambda: len(commits.results) == 2)
    assert jobs_for(hg, "s") == [INSTANT] and jobs_for(hg, "t") == [INSTANT]
    assert (
        hg.jobs.get(hg.schedules.enqueue_events("s", limit=1).events[0].job_id).created_at_ms
        == INSTANT
    )
    assert all(result.committed_at_ms is not None for _, result in commits.results)
    assert all(result.committed_at_ms >= tick for tick, result in commits.results)  # type: ignore[operator]


@AND_MEMORY
def test_stopping_abandons_a_held_batch_and_writes_nothing(
    make_headgate: Callable[..., Headgate],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    hg = _runtime(make_headgate)
    clock.set(INSTANT - 300)
    hg.start()
    time.sleep(0.05)
    began = time.monotonic()
    hg.stop()
    assert time.monotonic() - began < 2
    assert jobs_for(hg, "s") == [] and hg.schedules.get("s").next_run_ms == INSTANT
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "Error" not in capfd.readouterr().err  # a clean stop, no traceback
    clock.set(INSTANT)
    fire(hg)
    assert jobs_for(hg, "s") == [INSTANT] and jobs_for(hg, "t") == [INSTANT]


@AND_MEMORY
def test_run_pending_answers_while_the_next_instant_is_still_to_come(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = _runtime(make_headgate)
    clock.set(INSTANT - 300)
    hg.start()
    began = time.monotonic()
    assert hg.fire_due_ticks(timeout=5)
    assert time.monotonic() - began < 2
    assert jobs_for(hg, "s") == []


@AND_MEMORY
def test_a_clock_that_stalls_short_of_the_instant_delays_the_ticks_only(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = _runtime(make_headgate)
    clock.set(INSTANT - 300)
    hg.start()
    time.sleep(0.8)  # longer than a hold may wait for a clock that does not move
    assert jobs_for(hg, "s") == []
    clock.set(INSTANT)
    _eventually(lambda: jobs_for(hg, "t") == [INSTANT])
    assert jobs_for(hg, "s") == [INSTANT]
    assert hg.schedules.get("s").next_run_ms == INSTANT + MINUTE


class SlowHook(EnqueueHook):
    def before_enqueue(self, context: TickContext) -> None:
        time.sleep(0.5)


@AND_MEMORY
def test_the_scheduler_sleeps_while_a_batch_is_in_flight(
    make_headgate: Callable[..., Headgate], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted in the scheduler's own turns, not in the process's CPU time, which
    other threads of a busy test process share."""
    turns: list[float] = []
    cycle = SchedulerActor._cycle

    def counted(actor: SchedulerActor, *, after_batch: bool = False) -> None:
        turns.append(time.monotonic())
        cycle(actor, after_batch=after_batch)

    monkeypatch.setattr(SchedulerActor, "_cycle", counted)
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=60_000), hooks=[SlowHook()])
    hg.schedules.put("s", spec="@every:60000", kind="k")
    hg.start()
    assert hg.fire_due_ticks()
    clock.set(INSTANT)
    before = len(turns)
    fire(hg)  # half a second of batch, nearly all of it asleep in the hook
    assert len(turns) - before < 10, "the scheduler spun while its batch was in flight"
    assert jobs_for(hg, "s") == [INSTANT]


@AND_MEMORY
def test_a_batch_opened_inside_its_write_estimate_still_waits_for_the_instant(
    hg: Headgate, clock: FakeClock
) -> None:
    """The write opens a little ahead of the instant (its estimated write time);
    its commit must still wait for the clock. A clock that never gets there
    leaves nothing written: the batch is postponed and stays due."""
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.set(INSTANT - 5)  # past the time the batch opens, short of its instant
    rows = hg._core.store.reads.due_schedules(INSTANT, 10)
    report = TickProcessor(hg._core.store.log, clock).fire(rows, fence=None, at_ms=INSTANT)
    assert (report.postponed, report.recorded) == (1, [])
    assert jobs_for(hg, "s") == [] and hg.schedules.enqueue_events("s").events == []
    assert hg.schedules.get("s").next_run_ms == INSTANT


@AND_MEMORY
def test_a_held_batch_commits_once_the_clock_reaches_its_instant(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k")
    clock.set(INSTANT - 5)
    rows = hg._core.store.reads.due_schedules(INSTANT, 10)
    mover = threading.Timer(0.05, clock.set, args=(INSTANT,))
    mover.start()
    report = TickProcessor(hg._core.store.log, clock).fire(rows, fence=None, at_ms=INSTANT)
    mover.join()
    assert len(report.recorded) == 1 and report.committed_at_ms == INSTANT
    assert jobs_for(hg, "s") == [INSTANT]


class Planned(EnqueueHook):
    """Counts the ticks planned (before_enqueue runs as a tick is planned) and
    records the attempts as they commit."""

    def __init__(self) -> None:
        self.planned: list[str] = []
        self.committed: list[tuple[str, int | None]] = []
        self._lock = threading.Lock()

    def before_enqueue(self, context: TickContext) -> None:
        with self._lock:
            self.planned.append(context.schedule_id)

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        with self._lock:
            self.committed.append((context.schedule_id, result.committed_at_ms))


@AND_MEMORY
def test_every_schedule_due_at_an_instant_is_planned_ahead_of_it_not_one_sweep_alone(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    # Three and a half sweeps' worth due at one instant, and each shard's tick
    # budget smaller than its share: all are planned before the instant and
    # committed at it, none left for a sweep after it (which would be late).
    hook = Planned()
    config = RuntimeConfig(
        lease_ttl_ms=60_000, prepare_ahead_ms=500, sweep_batch=10, max_ticks_per_batch=10
    )
    hg = make_headgate(config, hooks=[hook])
    ids = [f"s{n:02d}" for n in range(35)]
    for schedule_id in ids:
        hg.schedules.put(schedule_id, spec="@every:60000", kind="k")
    clock.set(INSTANT - 300)
    hg.start()
    _eventually(lambda: len(hook.planned) == len(ids))
    assert sorted(hook.planned) == ids  # each once
    assert all(jobs_for(hg, schedule_id) == [] for schedule_id in ids)  # held for the instant
    clock.set(INSTANT)
    _eventually(lambda: len(hook.committed) == len(ids))
    assert sorted(schedule_id for schedule_id, _ in hook.committed) == ids
    assert {committed_at for _, committed_at in hook.committed} == {INSTANT}
    assert all(jobs_for(hg, schedule_id) == [INSTANT] for schedule_id in ids)
    assert all(hg.schedules.get(schedule_id).next_run_ms == INSTANT + MINUTE for schedule_id in ids)


@AND_MEMORY
def test_an_instant_whose_batch_committed_late_is_prepared_earlier_the_next_time(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hook = Planned()
    hg = _runtime(make_headgate, hook)
    clock.set(INSTANT - 300)
    hg.start()
    _eventually(lambda: len(hook.planned) == 2)
    clock.set(INSTANT + 400)  # the batch commits 400 ms after its instant: it was late
    _eventually(lambda: len(hook.committed) == 2)
    assert {committed_at for _, committed_at in hook.committed} == {INSTANT + 400}
    following = INSTANT + MINUTE
    clock.set(following - 700)  # beyond prepare_ahead_ms (500), within it plus the lateness
    _eventually(lambda: len(hook.planned) == 4)
    assert jobs_for(hg, "s") == [INSTANT]  # planned, held for its instant
    clock.set(following)
    _eventually(lambda: len(hook.committed) == 4)
    assert jobs_for(hg, "s") == [INSTANT, following] and jobs_for(hg, "t") == [INSTANT, following]


def test_the_lead_grows_by_a_late_batchs_lateness_and_returns_to_the_configured_one() -> None:
    lead = next_lead_ms(500, 400, 500)
    assert lead == 500 + 400 + LEAD_MARGIN_MS
    assert next_lead_ms(lead, 10_000, 500) == MAX_LEAD_MS
    on_time = [lead]
    for _ in range(60):
        on_time.append(next_lead_ms(on_time[-1], 0, 500))
    assert on_time == sorted(on_time, reverse=True) and on_time[-1] == 500
    assert next_lead_ms(0, 400, 0) == 0  # fire when due stays so
