"""What the runtime tells the metrics as it works: one small interface.

The runtime's parts call a `Recorder` where things happen: the tick
processor for every attempt it recorded, the workers when a handler starts
and when an attempt's end is recorded, the rescuer for every job it takes
back. `headgate._metrics` implements it with prometheus_client; the default
does nothing, so the runtime never imports a metrics library and a runtime
built without metrics (tests, benchmarks) pays one no-op call per event.

Only low-cardinality values are passed (queue, kind, outcome, reason), never a
job or schedule id, a payload or an error's text: whatever a recorder makes
of them stays bounded. Every method must be cheap and must not raise (they
are called on the dispatcher's and the shards' threads).
"""

from __future__ import annotations

from typing import Final


class Recorder:
    """The runtime's events, as figures. This base records nothing."""

    def tick_recorded(self, outcome: str, reason: str, lateness_ms: int | None) -> None:
        """A tick's automatic attempt was committed with this outcome and reason;
        `lateness_ms` (for an enqueued tick) is how long after its tick it was
        committed."""

    def handler_started(self, queue: str, kind: str, pickup_ms: int) -> None:
        """A handler started on a claimed job, `pickup_ms` after the job's run_at."""

    def attempt_ended(self, queue: str, kind: str, outcome: str, duration_ms: int | None) -> None:
        """An attempt of this process's workers ended: `outcome` is succeeded,
        failed, timed_out or released when its end was recorded, refused when
        it was not (the job was no longer this worker's). `duration_ms` is
        how long its handler ran (None when it was given back)."""

    def job_expired(self, queue: str, kind: str) -> None:
        """A claimed job was past its start deadline: recorded expired, not run."""

    def job_rescued(self, queue: str, kind: str, *, quarantined: bool) -> None:
        """The rescuer took a job back from a dead worker: claimable again, or
        `quarantined` with its fingerprint."""


NO_METRICS: Final = Recorder()
