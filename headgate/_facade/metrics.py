"""`hg.metrics`: Prometheus's view of a Headgate and the per-minute activity roll-up."""

from __future__ import annotations

import builtins

from headgate._domain.activity import KEEP_MS, SHOWN_MS, ActivityPoint
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._errors import ValidationError
from headgate._facade.twins import Namespace, twin
from headgate._metrics import Collector, CollectorRegistry


class Metrics(Namespace):
    """A Headgate's figures: `generate_latest(hg.metrics.registry)`."""

    name = "metrics"

    @property
    def registry(self) -> CollectorRegistry:
        """This Headgate's own prometheus_client registry: what `GET /metrics` serves
        (`prometheus_client.generate_latest(hg.metrics.registry)`)."""
        return self._core.metrics.registry

    @property
    def collector(self) -> Collector:
        """Headgate's collector, to register in a host's own registry
        (`REGISTRY.register(hg.metrics.collector)`): this process's counters, and
        the store's figures read at each scrape."""
        return self._core.metrics.collector

    def activity(self, since_ms: int | None = None) -> builtins.list[ActivityPoint]:
        """The per-minute activity roll-up from `since_ms` (None: the last three
        hours), oldest minute first: ticks by outcome, jobs started, succeeded,
        failed, snoozed and expired, tick lateness and pickup percentiles, queue
        depth and oldest pending age, what runs under each limit (see
        `headgate._domain.activity` for the series: a bounded number a minute,
        the deepest queues' and busiest limits' and `_other`). The lease holder
        rolls up each minute once it has closed; a day is kept, so a `since_ms`
        older reads from a day ago."""
        if since_ms is not None and (
            isinstance(since_ms, bool)
            or not isinstance(since_ms, int)
            or not 0 <= since_ms <= MAX_INSTANT_MS
        ):
            raise ValidationError(
                "since_ms", f"must be epoch ms, 0 to {MAX_INSTANT_MS}, got {since_ms!r}"
            )
        now = self._core.clock.now_ms()
        since = now - SHOWN_MS if since_ms is None else max(since_ms, now - KEEP_MS)
        return self._core.store.activity.points(since)

    aactivity = twin(activity, reads=True)
