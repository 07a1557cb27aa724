"""Cron macros, and the pure rules of bounds and jitter (`_domain/tick_timing`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headgate import parse_spec
from headgate._domain.events import MissedRunPolicy
from headgate._domain.spec import MACROS
from headgate._domain.tick_timing import MAX_JITTER_MS, TickTiming, jitter_delay_ms

START_MS = 1_704_067_200_000  # 2024-01-01T00:00Z
FIVE_FIELD = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def test_the_macros_are_vixie_cron_s_and_kubernetes_s() -> None:
    assert dict(MACROS) == FIVE_FIELD


@pytest.mark.parametrize("zone", [None, "America/New_York", "Australia/Lord_Howe"])
@pytest.mark.parametrize(("macro", "fields"), FIVE_FIELD.items())
def test_a_macro_is_its_five_field_form(macro: str, fields: str, zone: str | None) -> None:
    prefix = "" if zone is None else f"CRON_TZ={zone} "
    spec, expected = parse_spec(prefix + macro), parse_spec(prefix + fields)
    assert spec == expected and spec.text == expected.text
    assert spec.fires_like(expected)
    after = START_MS
    for _ in range(5):
        assert spec.next_tick_ms(after) == expected.next_tick_ms(after)
        after = spec.next_tick_ms(after)


def test_jitter_is_a_stable_hash_of_schedule_and_tick() -> None:
    """Pinned: a change here moves every jittered tick of every store."""
    assert jitter_delay_ms("nightly", START_MS, MAX_JITTER_MS) == 2_335_208
    assert jitter_delay_ms("a", 0, 1000) == 453
    assert jitter_delay_ms("a", 0, 0) == 0


@given(
    schedule_id=st.text(min_size=1, max_size=20),
    tick=st.integers(0, 2**45),
    jitter=st.integers(1, MAX_JITTER_MS),
)
def test_a_delay_is_within_its_jitter(schedule_id: str, tick: int, jitter: int) -> None:
    assert 0 <= jitter_delay_ms(schedule_id, tick, jitter) < jitter


@given(
    interval=st.integers(1, 120_000),
    jitter=st.integers(1, MAX_JITTER_MS),
    first=st.integers(0, 10_000),
)
def test_instants_keep_the_order_of_their_ticks(interval: int, jitter: int, first: int) -> None:
    """A delay is cut short before the following tick, however large the jitter."""
    timing = TickTiming("s", parse_spec(f"@every:{interval}"), jitter_ms=jitter)
    ticks = [(first + n) * interval for n in range(20)]
    instants = [timing.instant_ms(tick) for tick in ticks]
    assert all(
        tick <= instant < tick + interval for tick, instant in zip(ticks, instants, strict=True)
    )
    assert instants == sorted(set(instants))


def test_only_ticks_whose_instant_has_come_fire() -> None:
    spec = parse_spec("@every:60000")
    timing = TickTiming("s", spec, jitter_ms=59_999)
    tick = START_MS
    instant = timing.instant_ms(tick)
    assert instant > tick
    skip = MissedRunPolicy.SKIP
    assert timing.ticks_to_fire(skip, 1, tick, instant - 1) == []
    assert timing.ticks_to_fire(skip, 1, tick, instant) == [tick]
    # Later: the newest tick at or before now may still wait; the one before it fires.
    following = tick + 60_000
    if timing.instant_ms(following) > following:
        assert timing.ticks_to_fire(skip, 1, tick, following) == [tick]
    backfill = MissedRunPolicy.BACKFILL
    late = tick + 10 * 60_000
    fired = timing.ticks_to_fire(backfill, 3, tick, late)
    assert len(fired) == 3 and all(timing.instant_ms(t) <= late for t in fired)


def test_bounds_cut_the_ticks() -> None:
    spec = parse_spec("* * * * *")
    timing = TickTiming("s", spec, start_at_ms=START_MS + 90_000, end_at_ms=START_MS + 300_000)
    assert timing.first_tick_ms(START_MS) == START_MS + 120_000
    assert timing.not_before_start(START_MS + 60_000) == START_MS + 120_000
    assert timing.not_before_start(START_MS + 180_000) == START_MS + 180_000
    run_once = MissedRunPolicy.RUN_ONCE
    assert timing.ticks_to_fire(run_once, 1, START_MS + 120_000, START_MS + 10**7) == [
        START_MS + 300_000
    ]
    assert not timing.finished(START_MS + 300_000) and timing.finished(START_MS + 360_000)
    assert timing.due_at_ms(START_MS + 360_000) is None
    assert [t for t, _ in timing.upcoming(START_MS + 120_000, START_MS + 120_000, 10)] == [
        START_MS + n * 60_000 for n in (2, 3, 4, 5)
    ]
