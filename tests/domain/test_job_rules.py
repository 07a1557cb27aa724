"""How attempts end, and how crashes are counted: pure rules, no database."""

from __future__ import annotations

import pytest

from headgate._domain.events import (
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    JobAbandoned,
    JobQuarantined,
)
from headgate._domain.job_rules import (
    MAX_ERROR_MESSAGE,
    CrashedJob,
    InvalidResult,
    checked_result,
    error_record,
    next_run_after_failure,
    rescue,
    retry_delay_ms,
    timed_out_record,
)

RETRY_CAP_MS = 3_600_000
"""The default retry policy's longest wait: an hour."""


def test_retry_delays_double_with_jitter_below_the_full_delay() -> None:
    for attempt in range(1, 12):
        full = 1_000 * 2 ** (attempt - 1)
        delay = retry_delay_ms("job-1", attempt)
        assert full / 2 <= delay < full
    assert retry_delay_ms("job-1", 3) == retry_delay_ms("job-1", 3), "the same job, the same delay"
    spread = {retry_delay_ms(f"job-{n}", 5) for n in range(50)}
    assert len(spread) > 40, "jobs that failed together retry apart"


def test_retry_delays_stop_growing_at_an_hour() -> None:
    assert all(retry_delay_ms("j", attempt) < RETRY_CAP_MS for attempt in (13, 20, 100, 10_000))
    assert retry_delay_ms("j", 40) >= RETRY_CAP_MS / 2


def test_the_last_attempt_has_no_retry() -> None:
    assert next_run_after_failure("j", 2, 3, now_ms=10_000) == 10_000 + retry_delay_ms("j", 2)
    assert next_run_after_failure("j", 3, 3, now_ms=10_000) is None
    assert next_run_after_failure("j", 1, 1, now_ms=10_000) is None


class Secret(Exception):
    pass


def test_an_error_keeps_its_type_and_a_cut_message_or_only_its_type() -> None:
    assert error_record(ValueError("bad")).error_type == "ValueError"
    record = error_record(Secret("x" * 5_000))
    assert record.error_type == "tests.domain.test_job_rules.Secret"
    assert record.message is not None and len(record.message) == MAX_ERROR_MESSAGE
    assert record.message.endswith("…")
    assert error_record(Secret("password=hunter2"), keep_messages=False).message is None


@pytest.mark.parametrize(
    ("timeout_ms", "said"),
    [(2_000, "2 s"), (200, "0.2 s"), (1_500, "1.5 s"), (1, "0.001 s"), (1_800_000, "1800 s")],
)
def test_a_timeout_is_recorded_as_the_timeout_configured(timeout_ms: int, said: str) -> None:
    record = timed_out_record(timeout_ms)
    assert (record.error_type, record.message) == (
        "TimeoutError",
        f"the handler ran past its timeout of {said}",
    )


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ({1, 2}, "not plain JSON"),
        (object(), "not plain JSON"),
        (float("nan"), "not plain JSON"),
        ("x" * 70_000, "the limit is 65536"),
    ],
)
def test_a_result_must_be_plain_json_within_its_limit(value: object, rule: str) -> None:
    with pytest.raises(InvalidResult, match=rule):
        checked_result(value)


def test_a_plain_result_passes_as_it_is() -> None:
    result = {"rows": [1, 2.5, None, True], "name": "é"}
    assert checked_result(result) is result


def _crashed(job_id: str, fingerprint: str = "fp", crashes: int = 0) -> CrashedJob:
    return CrashedJob(job_id, "w1", fingerprint, crashes, version=2)


def test_a_first_crash_makes_the_job_claimable_again() -> None:
    ((_, job_events, fingerprint_events),) = rescue([_crashed("a")], {}, 3, frozenset())
    assert job_events == (JobAbandoned("a", "w1", 1),)
    assert fingerprint_events == (FingerprintCrashBlamed("fp", "a", 1_000),)


def test_a_crash_records_the_attempt_it_ended_and_when_that_was_claimed() -> None:
    """What the attempt history shows for a crash: the claim's number and time."""
    for crashes, expected in ((0, JobAbandoned("a", "w1", 1, 4, 900)), (2, None)):
        job = CrashedJob("a", "w1", "fp", crashes, version=9, attempt=4, claimed_at_ms=900)
        ((_, job_events, _),) = rescue([job], {}, 3, frozenset())
        assert job_events == (expected or JobQuarantined("a", "fp", 3, 4, 900),)


def test_a_job_that_crashes_its_worker_three_times_is_quarantined_with_its_fingerprint() -> None:
    ((_, job_events, fingerprint_events),) = rescue([_crashed("a", crashes=2)], {}, 3, frozenset())
    assert job_events == (JobQuarantined("a", "fp", 3),)
    assert isinstance(fingerprint_events[-1], FingerprintQuarantined)
    assert "job a crashed its worker 3 times" in fingerprint_events[-1].note


def test_a_poison_payload_is_caught_after_about_three_crashes_in_all_not_three_per_tick() -> None:
    """Each tick's job crashes once; their shared fingerprint takes the blame."""
    blame: dict[str, int] = {}
    outcomes = []
    for tick in range(3):
        ((_, job_events, _),) = rescue([_crashed(f"tick-{tick}")], blame, 3, frozenset())
        outcomes.append(type(job_events[0]).__name__)
    assert outcomes == ["JobAbandoned", "JobAbandoned", "JobQuarantined"]
    assert blame == {"fp": 3_000}


def test_one_crash_shared_by_many_jobs_quarantines_none_of_them() -> None:
    """An innocent job killed beside its neighbour's OOM takes a share, not a crash."""
    jobs = [_crashed("culprit", "bad"), *(_crashed(f"innocent-{n}", f"ok-{n}") for n in range(3))]
    blame: dict[str, int] = {}
    decided = rescue(jobs, blame, 2, frozenset())
    assert [type(events[0]).__name__ for _, events, _ in decided] == ["JobAbandoned"] * 4
    assert blame == {"bad": 250, "ok-0": 250, "ok-1": 250, "ok-2": 250}


def test_a_fingerprint_already_quarantined_is_not_quarantined_twice() -> None:
    jobs = [_crashed("a", crashes=2), _crashed("b", crashes=2)]
    decided = rescue(jobs, {}, 3, frozenset())
    notes = [e for _, _, events in decided for e in events if isinstance(e, FingerprintQuarantined)]
    assert len(notes) == 1
    decided = rescue([_crashed("c", crashes=2)], {}, 3, frozenset({"fp"}))
    assert not [
        e for _, _, events in decided for e in events if isinstance(e, FingerprintQuarantined)
    ]
