"""`hg.rates`: rate limits, each over a rate class of jobs: how many may start
in a sliding window, across every process on the store."""

from __future__ import annotations

import builtins

from headgate._domain.limits import rate_class_problem, rate_limit
from headgate._domain.names import require
from headgate._facade.twins import Namespace, twin
from headgate._model import RateStatus, rate_status, rate_statuses
from headgate._projections import RateLimitRow


class Rates(Namespace):
    """A Headgate's rate limits: `hg.rates.set("smtp", limit=30, per_ms=60_000)`."""

    name = "rates"

    def set(self, rate_class: str, *, limit: int, per_ms: int) -> RateStatus:
        """At most `limit` jobs of `rate_class` start in any window of `per_ms`,
        across every process (a sliding window: "30 a minute" is limit=30,
        per_ms=60_000). A job whose class is used up waits, pending, spending no
        attempt. Setting a class again replaces its limit."""
        checked = rate_limit(rate_class, limit, per_ms)
        self._core.commands.set_rate_limit(checked)
        self._core.poke_workers(due_now=True)
        now_ms = self._core.clock.now_ms()
        state = self._core.reads.limits_state(now_ms)
        set_at_ms = next(
            (row.set_at_ms for row in state.rates if row.rate_class == checked.rate_class), now_ms
        )
        row = RateLimitRow(checked.rate_class, checked.limit, checked.per_ms, set_at_ms)
        return rate_status(row, state.started.get(checked.rate_class, 0))

    def clear(self, rate_class: str) -> bool:
        """Remove a rate class's limit (its jobs start freely); whether it had one."""
        require("rate_class", rate_class_problem(rate_class))
        cleared = self._core.commands.clear_rate_limit(rate_class)
        self._core.poke_workers(due_now=True)
        return cleared

    def list(self) -> builtins.list[RateStatus]:
        """Every rate limit, by class, with its starts within the window ending now."""
        return rate_statuses(self._core.reads.limits_state(self._core.clock.now_ms()))

    aset = twin(set)
    aclear = twin(clear)
    alist = twin(list, reads=True)
