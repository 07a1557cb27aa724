"""`Snooze`: a handler's way to say "not now, again in a while".

A snoozed job goes back to pending, due again after the delay, and its attempt
is not counted: snoozing is waiting for something (a rate limit upstream, a
file not there yet), not failing, so it neither uses up `max_attempts` nor
stretches the retry backoff. A job snoozes at most `WorkerConfig.max_snoozes`
times; the snooze after that fails its attempt (`SnoozeLimitExceeded`), so a
handler that snoozes forever is noticed.
"""

from __future__ import annotations

from typing import Final

from headgate._errors import KeptWhole, ValidationError

MAX_SNOOZE_S: Final = 7 * 24 * 3600.0
DEFAULT_MAX_SNOOZES: Final = 100


class Snooze(KeptWhole):
    """Raise from a handler to run its job again `seconds` from now, its attempt
    not counted."""

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValidationError("seconds", f"must be a number, got {type(seconds).__name__}")
        if not 0 < seconds <= MAX_SNOOZE_S:
            raise ValidationError(
                "seconds", f"must be more than 0 and at most {MAX_SNOOZE_S:.0f} (a week)"
            )
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = seconds

    @property
    def delay_ms(self) -> int:
        return max(int(self.seconds * 1000), 1)


class SnoozeLimitExceeded(KeptWhole):
    """A job snoozed more often than `WorkerConfig.max_snoozes` allows: its attempt
    fails instead."""
