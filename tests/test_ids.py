"""Job ids are stored forever: the fast derivation must match the UUIDv5 it replaced."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from headgate.domain.ids import _NAMESPACE, manual_job_id, tick_job_id


@given(st.text(), st.integers(min_value=-(2**63), max_value=2**63))
def test_tick_job_id_is_the_uuid5_of_schedule_and_tick(schedule_id: str, tick_ms: int) -> None:
    expected = uuid.uuid5(_NAMESPACE, f"tick\x00{schedule_id}\x00{tick_ms}")
    assert tick_job_id(schedule_id, tick_ms) == str(expected)


@given(st.text(), st.text())
def test_manual_job_id_is_the_uuid5_of_schedule_and_key(schedule_id: str, key: str) -> None:
    expected = uuid.uuid5(_NAMESPACE, f"manual\x00{schedule_id}\x00{key}")
    assert manual_job_id(schedule_id, key) == str(expected)
