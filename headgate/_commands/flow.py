"""The flow's commands: what an operator sets on the fleet's flow of jobs (a
fingerprint quarantined, a queue paused, a concurrency limit, a rate limit),
each a setting on a stream of its own."""

from __future__ import annotations

from collections.abc import Collection

from headgate._commands.base import CommandBase, append_one
from headgate._domain.admission import (
    MAX_NOTE_LENGTH,
    MAX_QUEUE_LENGTH,
    could_be_stored,
    require_fingerprint,
    require_name,
    require_note,
)
from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    DomainEvent,
    FingerprintQuarantined,
    FingerprintReleased,
    QueuePaused,
    QueueResumed,
    RateLimitCleared,
    RateLimitSet,
)
from headgate._domain.limits import ConcurrencyLimit, RateLimit, scope_of
from headgate._domain.names import fingerprint_problem, require
from headgate._domain.streams import limit_stream, quarantine_stream, queue_stream, rate_stream
from headgate._errors import NotFound
from headgate._store.port import StreamAppend


class FlowCommands(CommandBase):
    """Quarantine, queue pauses, concurrency limits and rate limits."""

    def quarantine(self, fingerprint_value: str, note: str = "") -> None:
        stream = quarantine_stream(require_fingerprint(fingerprint_value))
        checked_note = require_note(note, MAX_NOTE_LENGTH)
        with self._log.write() as transaction:
            version = transaction.stream_versions([stream])[stream]
            event = FingerprintQuarantined(fingerprint_value, checked_note)
            append_one(transaction, [StreamAppend(stream, version, (event,))])

    def release(self, fingerprint_value: str) -> None:
        """Make a fingerprint admissible again: NotFound unless it is quarantined,
        and a ValidationError naming the format for one that could never be (a
        malformed one an earlier build let an operator quarantine is released)."""
        if not could_be_stored(fingerprint_value):
            require("fingerprint", fingerprint_problem(fingerprint_value))
        stream = quarantine_stream(fingerprint_value)
        with self._log.write() as transaction:
            if not transaction.quarantined([fingerprint_value]):
                require("fingerprint", fingerprint_problem(fingerprint_value))
                raise NotFound(f"fingerprint {fingerprint_value} is not quarantined")
            version = transaction.stream_versions([stream])[stream]
            append_one(
                transaction,
                [StreamAppend(stream, version, (FingerprintReleased(fingerprint_value),))],
            )

    def pause_queue(self, queue: object, note: str = "") -> None:
        """Stop claims from `queue` until it is resumed (running jobs finish). A
        queue need not exist to be paused: jobs enqueued to it wait."""
        name = require_name("queue", queue, MAX_QUEUE_LENGTH)
        checked_note = require_note(note, MAX_NOTE_LENGTH)
        self._set(queue_stream(name), QueuePaused(name, checked_note))

    def resume_queue(self, queue: object) -> None:
        """Let workers claim from `queue` again, and wake those that serve it."""
        name = require_name("queue", queue, MAX_QUEUE_LENGTH)
        self._set(queue_stream(name), QueueResumed(name), wake=[name])

    def set_limit(self, limit: ConcurrencyLimit) -> None:
        """Hold the jobs of `limit`'s scope to `limit.limit` running, fleet-wide
        (replacing that scope's limit), and wake the workers: a raised limit
        lets waiting jobs start."""
        event = ConcurrencyLimitSet(limit.queue, limit.kind, limit.partition_key, limit.limit)
        self._set(limit_stream(limit.scope), event, wake=[limit.queue] if limit.queue else [])

    def clear_limit(self, queue: str | None, kind: str | None, partition_key: str | None) -> bool:
        """Remove the limit on this scope; whether there was one."""
        return self._set(
            limit_stream(scope_of(queue, kind, partition_key)),
            ConcurrencyLimitCleared(queue, kind, partition_key),
            wake=[queue] if queue else [],
            clearing=True,
        )

    def set_rate_limit(self, rate: RateLimit) -> None:
        self._set(
            rate_stream(rate.rate_class), RateLimitSet(rate.rate_class, rate.limit, rate.per_ms)
        )

    def clear_rate_limit(self, rate_class: str) -> bool:
        return self._set(rate_stream(rate_class), RateLimitCleared(rate_class), clearing=True)

    def _set(
        self,
        stream: str,
        event: DomainEvent,
        *,
        wake: Collection[str] = (),
        clearing: bool = False,
    ) -> bool:
        """Append an operator's setting (a queue's pause, a limit, a rate class) to
        its own stream, waking the workers of the queues in `wake`. A clear
        (`clearing`) of a stream that holds no setting (empty, or cleared last)
        appends nothing. Whether it appended."""
        with self._log.write() as transaction:
            version = transaction.stream_versions([stream])[stream]
            if clearing and (version == 0 or type(self._last_event(stream)) is type(event)):
                return False
            append_one(transaction, [StreamAppend(stream, version, (event,))])
            transaction.notify_enqueued(wake)
        return True

    def _last_event(self, stream: str) -> DomainEvent | None:
        events = self._log.read_stream(stream)
        return events[-1].event if events else None
