"""Retry policies as values: what they accept, which errors they retry, how long they wait."""

from __future__ import annotations

import pytest

from headgate import Retry, ValidationError
from headgate._domain.job_rules import retry_delay_ms


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"on": "ValueError"}, "on"),
        ({"fail_on": [ValueError, 3]}, "fail_on"),
        ({"intervals_s": [1, -2]}, "intervals_s"),
        ({"backoff_s": 0}, "backoff_s"),
        ({"backoff_s": 10, "max_backoff_s": 5}, "max_backoff_s"),
    ],
)
def test_a_bad_retry_policy_names_its_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Retry(**kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_the_default_policy_is_the_default_backoff() -> None:
    policy = Retry()
    assert [policy.wait_ms("j", n) for n in range(1, 20)] == [
        retry_delay_ms("j", n) for n in range(1, 20)
    ]
    assert policy.retries(ValueError()) and not policy.retries(KeyboardInterrupt())


def test_intervals_repeat_their_last_wait_and_jitter_stays_within_half() -> None:
    exact = Retry(intervals_s=[1, 2.5], jitter=False)
    assert [exact.wait_ms("j", n) for n in (1, 2, 3, 9)] == [1_000, 2_500, 2_500, 2_500]
    jittered = Retry(intervals_s=[10])
    waits = {jittered.wait_ms(f"j{n}", 1) for n in range(40)}
    assert all(5_000 <= wait < 10_000 for wait in waits) and len(waits) > 30
    assert "retry on Exception except ValueError" in Retry(fail_on=ValueError).describe()
