"""The admission gate and the tick rules, as pure functions: no database."""

from __future__ import annotations

import pytest

from headgate._domain.admission import AdmissionLimits
from headgate._domain.decisions import (
    BACKOFF_CAP_MS,
    Candidate,
    GateFacts,
    Outcome,
    Reason,
    backoff_ms,
    decide,
    is_admissible,
    ticks_to_fire,
)
from headgate._domain.events import JobEnqueued, MissedRunPolicy
from headgate._domain.spec import parse_spec
from tests.store.builders import enqueued

JOB = enqueued("j1", "report.build", "default", {"team": 7}, "periodic:s:60000", "s", 60_000)
CANDIDATE = Candidate(JOB, "fp", payload_bytes=10)
LIMITS = AdmissionLimits()


def _facts(
    existing: dict[str, JobEnqueued] | None = None,
    holders: dict[str, str] | None = None,
    quarantined: set[str] | None = None,
    pending: dict[str, int] | None = None,
) -> GateFacts:
    return GateFacts(existing or {}, holders or {}, frozenset(quarantined or ()), pending or {})


def test_a_new_job_is_admitted_and_appended() -> None:
    decision = decide(CANDIDATE, _facts(), LIMITS)
    assert (decision.outcome, decision.reason, decision.job_id) == (
        Outcome.ENQUEUED,
        Reason.ACCEPTED,
        "j1",
    )
    assert decision.append_job and decision.advances


def test_the_same_job_already_stored_is_a_replay_with_nothing_appended() -> None:
    decision = decide(CANDIDATE, _facts(existing={"j1": JOB}), LIMITS)
    assert (decision.outcome, decision.reason, decision.append_job) == (
        Outcome.ENQUEUED,
        Reason.ACCEPTED,
        False,
    )


def test_another_job_under_the_same_id_is_an_id_conflict() -> None:
    other = enqueued("j1", "report.build", "default", {"team": 8}, None, "s", 60_000)
    decision = decide(CANDIDATE, _facts(existing={"j1": other}), LIMITS)
    assert (decision.outcome, decision.reason, decision.append_job) == (
        Outcome.DEDUPLICATED,
        Reason.ID_CONFLICT,
        False,
    )


def test_a_held_unique_key_resolves_to_its_holder() -> None:
    decision = decide(CANDIDATE, _facts(holders={"periodic:s:60000": "winner"}), LIMITS)
    assert (decision.outcome, decision.reason, decision.job_id, decision.append_job) == (
        Outcome.DEDUPLICATED,
        Reason.UNIQUE_KEY,
        "winner",
        False,
    )
    assert decision.advances


def test_a_job_without_a_unique_key_ignores_holders() -> None:
    plain = Candidate(enqueued("j2", "k", "default", None), "fp", 4)
    assert decide(plain, _facts(holders={"periodic:s:60000": "winner"}), LIMITS).append_job


def test_a_quarantined_fingerprint_is_skipped_and_the_tick_advances() -> None:
    decision = decide(CANDIDATE, _facts(quarantined={"fp"}), LIMITS)
    assert (decision.outcome, decision.reason, decision.append_job) == (
        Outcome.SKIPPED,
        Reason.QUARANTINED,
        False,
    )
    assert decision.advances


def test_a_full_queue_fails_the_attempt_which_does_not_advance() -> None:
    limits = AdmissionLimits(queue_limits={"default": 2})
    decision = decide(CANDIDATE, _facts(pending={"default": 2}), limits)
    assert (decision.outcome, decision.reason) == (Outcome.FAILED, Reason.BACKPRESSURE)
    assert not decision.advances and not decision.append_job


def test_admitted_jobs_count_against_the_queue_for_the_rest_of_the_batch() -> None:
    limits = AdmissionLimits(default_queue_limit=2)
    facts = _facts(pending={"default": 1})
    first = decide(CANDIDATE, facts, limits)
    second = decide(Candidate(enqueued("j2", "k", "default", None), "fp2", 4), facts, limits)
    assert (first.outcome, second.outcome) == (Outcome.ENQUEUED, Outcome.FAILED)
    assert facts.pending == {"default": 2}


def test_a_queue_without_a_limit_is_never_full() -> None:
    limits = AdmissionLimits(queue_limits={"other": 1})
    assert decide(CANDIDATE, _facts(pending={"default": 10**6}), limits).append_job


@pytest.mark.parametrize(
    ("candidate", "limits"),
    [
        (Candidate(JOB, "fp", payload_bytes=101), AdmissionLimits(max_payload_bytes=100)),
        (Candidate(enqueued("j1", "bad\nkind", "default", None), "fp", 4), LIMITS),
        (Candidate(enqueued("j1", "", "default", None), "fp", 4), LIMITS),
    ],
)
def test_what_todays_limits_reject_fails_before_any_other_rule(
    candidate: Candidate, limits: AdmissionLimits
) -> None:
    assert not is_admissible(candidate, limits)
    # Even a stored replay of it, a held key or a quarantine does not get in first.
    facts = _facts(existing={"j1": candidate.job}, quarantined={"fp"})
    decision = decide(candidate, facts, limits)
    assert (decision.outcome, decision.reason) == (Outcome.FAILED, Reason.INVALID_REQUEST)


def test_rules_apply_in_order_replay_key_quarantine_backpressure() -> None:
    everything = _facts(
        existing={"j1": JOB},
        holders={"periodic:s:60000": "winner"},
        quarantined={"fp"},
        pending={"default": 5},
    )
    limits = AdmissionLimits(default_queue_limit=1)
    assert decide(CANDIDATE, everything, limits).reason is Reason.ACCEPTED
    without_replay = _facts(
        holders={"periodic:s:60000": "winner"}, quarantined={"fp"}, pending={"default": 5}
    )
    assert decide(CANDIDATE, without_replay, limits).reason is Reason.UNIQUE_KEY
    only_quarantine_and_full = _facts(quarantined={"fp"}, pending={"default": 5})
    assert decide(CANDIDATE, only_quarantine_and_full, limits).reason is Reason.QUARANTINED


def test_backoff_doubles_from_a_second_and_caps_at_five_minutes() -> None:
    assert [backoff_ms(n) for n in (1, 2, 3, 4)] == [1_000, 2_000, 4_000, 8_000]
    assert backoff_ms(9) == 256_000
    assert backoff_ms(10) == backoff_ms(1_000) == BACKOFF_CAP_MS


@pytest.mark.parametrize(
    ("policy", "limit", "expected"),
    [
        (MissedRunPolicy.SKIP, 5, [300_000]),
        (MissedRunPolicy.RUN_ONCE, 5, [300_000]),
        (MissedRunPolicy.BACKFILL, 3, [180_000, 240_000, 300_000]),
        (MissedRunPolicy.BACKFILL, 10, [60_000, 120_000, 180_000, 240_000, 300_000]),
    ],
)
def test_missed_ticks_follow_the_policy(
    policy: MissedRunPolicy, limit: int, expected: list[int]
) -> None:
    spec = parse_spec("@every:60000")
    assert ticks_to_fire(spec, policy, limit, next_run_ms=60_000, now_ms=330_000) == expected


def test_nothing_fires_before_the_next_run() -> None:
    spec = parse_spec("@every:60000")
    assert ticks_to_fire(spec, MissedRunPolicy.BACKFILL, 5, 60_000, 59_999) == []
