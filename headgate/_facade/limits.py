"""`hg.limits`: concurrency limits, each over a scope of queue, kind and
partition key, across every process on the store."""

from __future__ import annotations

import builtins

from headgate._deprecated import warn_moved
from headgate._domain.limits import concurrency_limit
from headgate._facade.twins import Namespace, twin
from headgate._model import ConcurrencyLimitStatus, limit_status, limit_statuses
from headgate._projections import ConcurrencyLimitRow


class Limits(Namespace):
    """A Headgate's concurrency limits: `hg.limits.set(kind="report", limit=2)`."""

    name = "limits"

    def set(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        partition_key: str | None = None,
        limit: int,
    ) -> ConcurrencyLimitStatus:
        """Hold the jobs of a scope to `limit` running at once across every process
        on the store (Oban's global_limit, River's global concurrency). Each of
        `queue`, `kind` and `partition_key` is None for any; `partition_key="*"`
        (headgate.EACH_PARTITION) gives every partition key its own limit ("at
        most 2 per tenant"). Setting a scope's limit again replaces it; 0 stops
        its jobs from starting. A job held back waits, pending, and spends no
        attempt; a rescued job's slot is free once it is taken back."""
        checked = concurrency_limit(queue, kind, partition_key, limit)
        self._core.commands.set_limit(checked)
        self._core.poke_workers(due_now=True)
        now_ms = self._core.clock.now_ms()
        state = self._core.reads.limits_state(now_ms)
        set_at_ms = next(
            (row.set_at_ms for row in state.limits if row.scope == checked.scope), now_ms
        )
        row = ConcurrencyLimitRow(
            checked.scope,
            checked.queue,
            checked.kind,
            checked.partition_key,
            checked.limit,
            set_at_ms,
        )
        return limit_status(row, state.running)

    def clear(
        self, *, queue: str | None = None, kind: str | None = None, partition_key: str | None = None
    ) -> bool:
        """Remove the limit on exactly this scope; whether there was one."""
        checked = concurrency_limit(queue, kind, partition_key, 0)
        commands = self._core.commands
        cleared = commands.clear_limit(checked.queue, checked.kind, checked.partition_key)
        self._core.poke_workers(due_now=True)
        return cleared

    def list(self) -> builtins.list[ConcurrencyLimitStatus]:
        """Every concurrency limit, by scope, with its jobs running now."""
        return limit_statuses(self._core.reads.limits_state(self._core.clock.now_ms()))

    def __call__(self) -> builtins.list[ConcurrencyLimitStatus]:
        """`hg.limits()`, deprecated: `hg.limits.list()`."""
        warn_moved("limits()", "hg.limits.list()")
        return self.list()

    aset = twin(set)
    aclear = twin(clear)
    alist = twin(list, reads=True)
