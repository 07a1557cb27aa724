"""The retention rules compaction applies on every store, as the domain states them."""

from __future__ import annotations

import pytest

from headgate._domain.events import (
    EnqueueAttempted,
    FingerprintQuarantined,
    FingerprintReleased,
    NextRunAdvanced,
    ScheduleDefined,
)
from headgate._domain.retention import (
    DAY_MS,
    CompactionPolicy,
    finished_job_expired,
    manual_key_expired,
    newest_kept,
    trimmed_versions,
)

POLICY = CompactionPolicy()


def test_a_trimmed_stream_keeps_the_newest_event_of_each_type() -> None:
    events = [
        (1, ScheduleDefined),
        (2, NextRunAdvanced),
        (3, ScheduleDefined),
        (4, NextRunAdvanced),
        (5, ScheduleDefined),
    ]
    one_definition = CompactionPolicy(definitions_per_schedule=1)
    assert trimmed_versions(one_definition, "schedule-a", events) == [1, 2, 3]
    assert trimmed_versions(one_definition, "schedule-a", reversed(events)) == [1, 2, 3]
    assert trimmed_versions(one_definition, "schedule-a", []) == []


def test_a_schedule_keeps_its_newest_definitions_for_its_history() -> None:
    """Each definition is a snapshot: keeping the newest 100 lets a schedule be
    read as of an instant that far back in its changes."""
    events = [(version, ScheduleDefined) for version in range(1, 103)]
    assert trimmed_versions(POLICY, "schedule-a", events) == [1, 2]
    assert newest_kept(POLICY, "schedule-a", ScheduleDefined) == 100
    assert newest_kept(POLICY, "quarantine-fp", ScheduleDefined) == 1
    with pytest.raises(ValueError, match="definitions_per_schedule"):
        CompactionPolicy(definitions_per_schedule=0)


def test_a_schedule_keeps_its_newest_attempts_and_other_streams_one() -> None:
    attempts = [(version, EnqueueAttempted) for version in range(2, 106)]
    assert trimmed_versions(POLICY, "schedule-a", [(1, ScheduleDefined), *attempts]) == [2, 3, 4, 5]
    assert newest_kept(POLICY, "schedule-a", EnqueueAttempted) == 100
    assert (
        newest_kept(CompactionPolicy(attempts_per_schedule=150), "schedule-a", EnqueueAttempted)
        == 150
    )
    assert newest_kept(POLICY, "quarantine-fp", EnqueueAttempted) == 1
    quarantine = [
        (1, FingerprintQuarantined),
        (2, FingerprintReleased),
        (3, FingerprintQuarantined),
    ]
    assert trimmed_versions(POLICY, "quarantine-fp", quarantine) == [1]


@pytest.mark.parametrize(
    ("state", "age_ms", "expired"),
    [
        ("completed", DAY_MS + 1, True),
        ("failed", DAY_MS + 1, True),
        ("cancelled", DAY_MS + 1, True),
        ("completed", DAY_MS, False),
        ("quarantined", 10 * DAY_MS, False),
        ("pending", 10 * DAY_MS, False),
        ("running", 10 * DAY_MS, False),
    ],
)
def test_only_jobs_done_for_good_expire_and_only_after_retention(
    state: str, age_ms: int, expired: bool
) -> None:
    assert finished_job_expired(POLICY, state, 1_000, 1_000 + age_ms) is expired


def test_manual_run_keys_are_kept_seven_days_by_default() -> None:
    assert not manual_key_expired(POLICY, 0, 7 * DAY_MS)
    assert manual_key_expired(POLICY, 0, 7 * DAY_MS + 1)


def test_a_policy_never_keeps_less_than_the_history_shows_or_keys_a_day() -> None:
    with pytest.raises(ValueError, match="newest 100 attempts"):
        CompactionPolicy(attempts_per_schedule=99)
    with pytest.raises(ValueError, match="at least 24 hours"):
        CompactionPolicy(manual_key_retention_ms=DAY_MS - 1)
