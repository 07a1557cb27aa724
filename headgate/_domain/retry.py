"""A handler's retry policy: which failures are retried, and after how long.

`Retry` is given to `Headgate.handler(..., retry=...)`, as Celery's
`autoretry_for` / `dont_autoretry_for` / `retry_backoff` and RQ's
`Retry(interval=[...])` are. A failed attempt whose exception is one of `on`
and none of `fail_on` is retried, up to the job's `max_attempts`; any other
fails the job at once. An attempt that runs past its timeout counts as a
TimeoutError. The wait is `intervals_s[n-1]` after failed attempt n (the
last interval repeating) when intervals are given, else `backoff_s` doubling
per attempt up to `max_backoff_s`; with `jitter`, each wait is drawn from
[50%, 100%) of that, stable per (job, attempt), so jobs that failed together
do not retry together.

A worker dying under a job is not a failed attempt: crashes are counted and
quarantined apart (`job_rules`), whatever the policy says.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from headgate._errors import ValidationError

MAX_WAIT_S: Final = 7 * 24 * 3600
"""A week: the longest wait between attempts."""
MAX_INTERVALS: Final = 100


def _exception_types(name: str, value: object) -> tuple[type[BaseException], ...]:
    given: Iterable[object] = value if isinstance(value, tuple | list) else (value,)
    types = tuple(given)
    for each in types:
        if not (isinstance(each, type) and issubclass(each, BaseException)):
            raise ValidationError(name, f"must be exception types, got {each!r}")
    return types  # type: ignore[return-value]


def _seconds(name: str, value: object, *, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValidationError(name, f"must be a number of seconds, got {value!r}")
    if not low < value <= MAX_WAIT_S:
        raise ValidationError(
            name, f"must be more than {low:g} and at most {MAX_WAIT_S} (a week), got {value}"
        )
    return float(value)


@dataclass(frozen=True, init=False)
class Retry:
    """Which failed attempts of a handler's jobs are retried, and after how long."""

    on: tuple[type[BaseException], ...]
    fail_on: tuple[type[BaseException], ...]
    intervals_s: tuple[float, ...]
    backoff_s: float
    max_backoff_s: float
    jitter: bool

    def __init__(
        self,
        *,
        on: type[BaseException] | Iterable[type[BaseException]] = Exception,
        fail_on: type[BaseException] | Iterable[type[BaseException]] = (),
        intervals_s: Iterable[float] = (),
        backoff_s: float = 1.0,
        max_backoff_s: float = 3600.0,
        jitter: bool = True,
    ) -> None:
        intervals = tuple(intervals_s) if not isinstance(intervals_s, str) else (intervals_s,)
        if len(intervals) > MAX_INTERVALS:
            raise ValidationError("intervals_s", f"may hold at most {MAX_INTERVALS} waits")
        checked = tuple(_seconds("intervals_s", each, low=-1e-9) for each in intervals)
        backoff = _seconds("backoff_s", backoff_s)
        most = _seconds("max_backoff_s", max_backoff_s)
        if most < backoff:
            raise ValidationError(
                "max_backoff_s", f"must be at least backoff_s ({backoff:g}), got {most:g}"
            )
        if not isinstance(jitter, bool):
            raise ValidationError("jitter", f"must be true or false, got {jitter!r}")
        object.__setattr__(self, "on", _exception_types("on", on))
        object.__setattr__(self, "fail_on", _exception_types("fail_on", fail_on))
        object.__setattr__(self, "intervals_s", checked)
        object.__setattr__(self, "backoff_s", backoff)
        object.__setattr__(self, "max_backoff_s", most)
        object.__setattr__(self, "jitter", jitter)

    def retries(self, error: BaseException) -> bool:
        """Whether an attempt that failed with `error` is tried again."""
        return isinstance(error, self.on) and not isinstance(error, self.fail_on)

    def wait_ms(self, job_id: str, attempt: int) -> int:
        """How long after failed attempt number `attempt` the job runs again."""
        if self.intervals_s:
            full = self.intervals_s[min(attempt, len(self.intervals_s)) - 1] * 1000
        else:
            doubling = self.backoff_s * 1000 * 2 ** min(max(attempt - 1, 0), 40)
            full = min(doubling, self.max_backoff_s * 1000)
        if not self.jitter:
            return int(full)
        digest = hashlib.sha1(f"{job_id}\x00{attempt}".encode(), usedforsecurity=False).digest()
        fraction = int.from_bytes(digest[:4], "big") / 2**32
        return int(full * (0.5 + fraction / 2))

    def describe(self) -> str:
        """The policy in a line, as the console and the CLI show a handler's."""
        waits = (
            "after " + ", ".join(f"{each:g}" for each in self.intervals_s) + " s"
            if self.intervals_s
            else f"backoff from {self.backoff_s:g} s, at most {self.max_backoff_s:g} s"
        )
        names = ", ".join(kind.__name__ for kind in self.on)
        fail = ", ".join(kind.__name__ for kind in self.fail_on)
        return f"retry on {names}" + (f" except {fail}" if fail else "") + f"; {waits}"


DEFAULT_RETRY: Final = Retry()
"""Every exception retried, doubling from 1 s to at most an hour, with jitter."""
