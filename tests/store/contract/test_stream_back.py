"""Reading a stream backwards from an instant (what an "as of" fold reads):
bounded, filtered by instant, version and type, and the oldest event kept."""

from __future__ import annotations

from headgate._domain.events import NextRunAdvanced, ScheduleDefined, ScheduleDeleted
from headgate._store.port import NO_STREAM, Store
from headgate._store.port.compaction import CompactionPolicy
from headgate.testing import FakeClock
from tests.store.builders import defined


def _history(store: Store, clock: FakeClock) -> list[int]:
    """A schedule defined at 1 s, advanced at 2 s and 3 s, redefined at 4 s;
    returns the instants, one per version."""
    instants = []
    for version, event in enumerate(
        [
            defined("a", spec="@every:60000"),
            NextRunAdvanced("a", 120_000, 60_000),
            NextRunAdvanced("a", 180_000, 120_000),
            defined("a", spec="@every:30000"),
        ]
    ):
        clock.advance(1_000)
        instants.append(clock.now_ms())
        store.log.append("schedule-a", version or NO_STREAM, [event])
    return instants


def test_newest_first_up_to_an_instant(store: Store, clock: FakeClock) -> None:
    instants = _history(store, clock)
    read = store.log.read_stream_back("schedule-a", until_ms=instants[2])
    assert [e.version for e in read] == [3, 2, 1]
    assert [e.recorded_at_ms for e in read] == [instants[2], instants[1], instants[0]]
    assert [e.version for e in store.log.read_stream_back("schedule-a")] == [4, 3, 2, 1]
    assert store.log.read_stream_back("schedule-a", until_ms=instants[0] - 1) == []


def test_bounded_and_paged_by_version(store: Store, clock: FakeClock) -> None:
    _history(store, clock)
    first = store.log.read_stream_back("schedule-a", limit=2)
    assert [e.version for e in first] == [4, 3]
    rest = store.log.read_stream_back("schedule-a", before_version=first[-1].version, limit=2)
    assert [e.version for e in rest] == [2, 1]
    assert store.log.read_stream_back("schedule-a", before_version=1) == []
    assert store.log.read_stream_back("schedule-a", limit=0) == []


def test_only_the_types_asked_for(store: Store, clock: FakeClock) -> None:
    instants = _history(store, clock)
    definitions = store.log.read_stream_back("schedule-a", types=(ScheduleDefined, ScheduleDeleted))
    assert [e.version for e in definitions] == [4, 1]
    assert definitions[0].event == defined("a", spec="@every:30000")
    before_redefinition = store.log.read_stream_back(
        "schedule-a", until_ms=instants[3] - 1, types=(ScheduleDefined,), limit=1
    )
    assert [e.event for e in before_redefinition] == [defined("a", spec="@every:60000")]
    assert store.log.read_stream_back("schedule-missing") == []


def test_the_oldest_kept_event_says_what_compaction_removed(store: Store, clock: FakeClock) -> None:
    assert store.log.oldest_kept("schedule-a") is None
    instants = _history(store, clock)
    oldest = store.log.oldest_kept("schedule-a")
    assert oldest is not None
    assert (oldest.version, oldest.recorded_at_ms) == (1, instants[0])
    store.compact(CompactionPolicy(definitions_per_schedule=1))
    oldest = store.log.oldest_kept("schedule-a")
    assert oldest is not None and oldest.version == 3  # the newest advance stays
    assert [e.version for e in store.log.read_stream_back("schedule-a")] == [4, 3]
