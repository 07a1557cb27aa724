"""Job ids: deterministic, so a repeated attempt finds the same job; tick ids sort by tick."""

from __future__ import annotations

import time
import uuid

from hypothesis import given
from hypothesis import strategies as st

from headgate._domain.ids import _NAMESPACE, manual_job_id, new_job_id, new_job_ids, tick_job_id
from headgate._domain.spec import MAX_INSTANT_MS

instants = st.integers(min_value=0, max_value=MAX_INSTANT_MS)


@given(st.text(), instants)
def test_a_tick_id_is_a_version_8_uuid_led_by_the_tick(schedule_id: str, tick_ms: int) -> None:
    job_id = tick_job_id(schedule_id, tick_ms)
    parsed = uuid.UUID(job_id)
    assert str(parsed) == job_id
    assert (parsed.version, parsed.variant) == (8, uuid.RFC_4122)
    assert parsed.int >> 80 == tick_ms
    assert tick_job_id(schedule_id, tick_ms) == job_id


@given(st.text(), st.text(), instants, instants)
def test_tick_ids_sort_by_tick_and_differ_by_schedule(
    first: str, second: str, tick: int, other_tick: int
) -> None:
    if tick < other_tick:
        assert tick_job_id(first, tick) < tick_job_id(second, other_tick)
    if first != second:
        assert tick_job_id(first, tick) != tick_job_id(second, tick)


@given(st.text(), st.text())
def test_manual_job_id_is_the_uuid5_of_schedule_and_key(schedule_id: str, key: str) -> None:
    """Idempotency keys are kept across upgrades: this derivation must never change."""
    expected = uuid.uuid5(_NAMESPACE, f"manual\x00{schedule_id}\x00{key}")
    assert manual_job_id(schedule_id, key) == str(expected)


def test_new_job_ids_are_version_7_uuids_in_the_order_they_were_made() -> None:
    before_ms = time.time_ns() // 1_000_000
    ids = [new_job_id() for _ in range(10_000)]  # far more than one millisecond's counter
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    first = uuid.UUID(ids[0])
    assert (first.version, first.variant) == (7, uuid.RFC_4122)
    assert first.int >> 80 >= before_ms


def test_ids_made_at_once_sort_after_those_made_before() -> None:
    before = new_job_id()
    batch = new_job_ids(5_000)
    after = new_job_id()
    assert [before, *batch, after] == sorted([before, *batch, after])
    assert len({before, *batch, after}) == 5_002
