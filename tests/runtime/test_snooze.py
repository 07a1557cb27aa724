"""Snoozing from a handler, with a fake clock, on every store: the job runs again
later, its attempt not counted, and a bounded number of times."""

from __future__ import annotations

import pytest

from headgate import Headgate, JobContext, Snooze, ValidationError
from headgate._runtime.snooze import DEFAULT_MAX_SNOOZES
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS

pytestmark = AND_MEMORY


def test_a_snoozed_job_runs_again_later_without_using_an_attempt(
    hg: Headgate, clock: FakeClock
) -> None:
    seen: list[tuple[int, int]] = []

    @hg.handler("mail.send", max_attempts=1)
    def send(job: JobContext) -> str:
        seen.append((job.attempt, job.snoozes))
        if job.snoozes < 2:
            raise Snooze(30)
        return "sent"

    job = hg.enqueue("mail.send")
    assert hg.drain().snoozed == 1
    snoozed = hg.jobs.get(job.id)
    assert (snoozed.state, snoozed.attempts, snoozed.snoozes) == ("pending", 0, 1)
    assert snoozed.run_at_ms == START_MS + 30_000
    assert hg.drain().ran == 0, "not due before its snooze is over"
    clock.advance(30_000)
    assert hg.drain().snoozed == 1
    clock.advance(30_000)
    assert hg.drain().succeeded == 1
    done = hg.jobs.get(job.id)
    assert (done.state, done.attempts, done.snoozes) == ("completed", 1, 2)
    assert seen == [(1, 0), (1, 1), (1, 2)], "a snooze never used up the only attempt"
    assert [a.outcome for a in done.attempt_history] == ["succeeded", "snoozed", "snoozed"]


def test_snoozes_past_the_limit_fail_the_attempt(hg: Headgate, clock: FakeClock) -> None:
    hg.handler("poll", max_attempts=1)(lambda job: (_ for _ in ()).throw(Snooze(1)))
    job = hg.enqueue("poll")
    for _ in range(DEFAULT_MAX_SNOOZES):
        assert hg.drain().snoozed == 1
        clock.advance(1_000)
    summary = hg.drain()
    assert (summary.snoozed, summary.failed) == (0, 1)
    failed = hg.jobs.get(job.id)
    assert failed.state == "failed" and failed.snoozes == DEFAULT_MAX_SNOOZES
    assert failed.error_type == "headgate.SnoozeLimitExceeded"
    assert "the limit is 100" in (failed.error_message or "")


def test_a_snooze_of_no_time_fails_the_attempt_naming_the_rule(hg: Headgate) -> None:
    hg.handler("poll", max_attempts=1)(lambda job: (_ for _ in ()).throw(Snooze(0)))
    job = hg.enqueue("poll")
    assert hg.drain().failed == 1
    failed = hg.jobs.get(job.id)
    assert failed.error_type == "headgate.ValidationError"
    assert "seconds" in (failed.error_message or "")
    with pytest.raises(ValidationError, match="a week"):
        Snooze(8 * 24 * 3600)
