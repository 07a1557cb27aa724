"""A property of the "as of" fold: for any history of a schedule (definitions,
ticks, failed ticks, advances, undeclarations, deletions and redefinitions), the
schedule as of the instant of each of its events is the row the live projection
held right after that event, and as of a millisecond before the next one too."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from headgate._domain.definition_history import payload_outline
from headgate._domain.events import NextRunAdvanced, ScheduleDeleted, ScheduleUndeclared
from headgate._domain.streams import schedule_stream
from headgate._history import DEFINED, DELETED, History
from headgate._model import Schedule
from headgate._store.memory import MemoryState, MemoryStore
from headgate.testing import FakeClock
from tests.store.builders import defined, fire_tick

STEPS = st.lists(
    st.sampled_from(["define", "tick", "advance", "undeclare", "delete"]), min_size=1, max_size=25
)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, gaps=st.lists(st.integers(0, 3), min_size=25, max_size=25))
def test_as_of_each_event_is_the_live_row_then(steps: list[str], gaps: list[int]) -> None:
    clock = FakeClock(1_704_067_200_000)
    store = MemoryStore(clock, MemoryState())
    stream = schedule_stream("s")
    seen: list[tuple[int, Schedule, bool]] = []
    tick = 60_000
    for n, step in enumerate(["define", *steps]):
        clock.advance(gaps[n % len(gaps)])
        row = store.reads.schedule("s")
        version = store.log.stream_version(stream)
        if step == "define" or row is None or row.deleted:
            store.log.append(stream, version, [defined("s", tick, payload={"n": n})])
        elif step == "tick":
            fire_tick(store, "s", tick)
            tick += 60_000
        elif step == "advance":
            tick += 60_000
            store.log.append(stream, version, [NextRunAdvanced("s", tick, None)])
        elif step == "undeclare":
            store.log.append(stream, version, [ScheduleUndeclared("s", "app")])
        else:
            store.log.append(stream, version, [ScheduleDeleted("s")])
        live = store.reads.schedule("s")
        assert live is not None
        seen.append((clock.now_ms(), Schedule.from_row(live), live.deleted))
    history = History(store.log)
    for index, (instant, live, deleted) in enumerate(seen):
        following = seen[index + 1][0] if index + 1 < len(seen) else instant + 1_000
        if following == instant:
            continue  # the next event shares the instant: as of it, that one is the answer
        for at in (instant, following - 1):
            as_of = history.schedule_as_of("s", at)
            assert as_of.state == (DELETED if deleted else DEFINED)
            assert as_of.exact
            shown = dataclasses.replace(live, payload=payload_outline(live.payload))
            assert as_of.schedule == shown, (steps, index)
    store.close()
