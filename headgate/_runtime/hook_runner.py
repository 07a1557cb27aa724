"""Runs the host's enqueue hooks around each automatic attempt, each within a budget.

Hooks are host code: whatever one raises (even SystemExit) only fails that
attempt (before) or is logged and ignored (after); it never reaches the
actors. Nor does its time: every call runs on a helper thread
(`hook_threads.BudgetedCalls`) and is waited for at most the budget
(`RuntimeConfig.hook_timeout_ms`). A before-hook over budget fails its attempt
(`hook_error`) and is abandoned; after-hooks run off the tick path, in order,
on one thread of their own (`hook_threads.HookQueue`), so a slow one delays
only the after-hooks behind it. A hook slower than half its budget is logged.
See `hooks.py` for what hosts are promised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Final

from headgate._logs import get_logger
from headgate._runtime.hook_threads import BudgetedCalls, HookQueue
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from headgate._runtime.planner import SchedulePlan, TickRecord, with_hook_failure

log = get_logger("headgate.scheduler")

DEFAULT_HOOK_TIMEOUT_MS: Final = 1_000
AFTER_QUEUE_CAPACITY: Final = 10_000
"""Recorded attempts waiting for their after-hooks, at most; beyond it they are
dropped (and counted in a warning), never waited for."""


class HooksInterrupted(Exception):
    """The runtime stopped while a before-hook ran: the batch is abandoned, unwritten
    (the hook is not blamed: nothing is recorded, the ticks stay due)."""


class HookRunner:
    def __init__(
        self,
        hooks: Sequence[EnqueueHook],
        budget_ms: int = DEFAULT_HOOK_TIMEOUT_MS,
        cancel: threading.Event | None = None,
    ) -> None:
        """`cancel` is set when the runtime stops: no wait for a hook outlasts it."""
        self._cancel = cancel or threading.Event()
        self._before_hooks = _overriding(hooks, "before_enqueue")
        self._after_hooks = _overriding(hooks, "after_enqueue")
        self._budget_ms = budget_ms
        self._before_calls = BudgetedCalls("headgate-before-hook")
        self._after_calls = BudgetedCalls("headgate-after-hook")
        self._after: HookQueue[tuple[TickRecord, int | None]] = HookQueue(
            self._run_after, AFTER_QUEUE_CAPACITY, "headgate-after-hooks"
        )

    def before(self, plan: SchedulePlan) -> None:
        """Run the before-enqueue hooks on each planned tick, in order; a tick
        whose hook raises or overruns its budget fails (`hook_error`) and ends
        the plan there. Raises HooksInterrupted if the runtime stops meanwhile."""
        if not self._before_hooks:
            return
        for index, planned in enumerate(plan.ticks):
            if planned.failure is not None:
                return
            context = planned.context
            for hook in self._before_hooks:
                if not self._call(hook, "before_enqueue", context, _before(hook, context)):
                    plan.ticks[index:] = [with_hook_failure(planned)]
                    return

    def after(self, record: TickRecord, committed_at_ms: int | None) -> None:
        """Queue the after-enqueue hooks of one recorded attempt; never waits."""
        if self._after_hooks:
            self._after.submit((record, committed_at_ms))

    def settle(self, timeout_s: float) -> bool:
        """Wait until the after-hooks queued so far have run (each within its budget)."""
        return self._after.wait_idle(timeout_s)

    def close(self) -> None:
        """Stop running after-hooks (those still queued are dropped, counted in a
        warning); no hung hook is waited for."""
        self._after.stop()
        self._before_calls.close()
        self._after_calls.close()

    def _run_after(self, item: tuple[TickRecord, int | None]) -> None:
        record, committed_at_ms = item
        context, decision = record.context, record.decision
        result = AttemptResult(
            decision.outcome.value, decision.reason.value, decision.job_id, committed_at_ms
        )
        for hook in self._after_hooks:
            self._call(hook, "after_enqueue", context, _after(hook, context, result))

    def _call(
        self, hook: EnqueueHook, method: str, context: TickContext, fn: Callable[[], None]
    ) -> bool:
        """Call one hook within the budget; True if it returned in time."""
        calls = self._before_calls if method == "before_enqueue" else self._after_calls
        about = {
            "hook": type(hook).__name__,
            "method": method,
            "schedule_id": context.schedule_id,
            "tick_ms": context.tick_ms,
        }
        outcome = calls.call(fn, self._budget_ms / 1000, about, self._cancel, context.schedule_id)
        if not outcome.finished and self._cancel.is_set():
            if method == "before_enqueue":
                raise HooksInterrupted
            return False
        fields = {**about, "elapsed_ms": outcome.elapsed_ms, "budget_ms": self._budget_ms}
        if outcome.refused:
            log.warning(
                "hook not called: an earlier call (for this schedule, or too many in all) "
                "is still hung",
                stuck=calls.stuck,
                **fields,
            )
            return False
        if not outcome.finished:
            log.warning("hook over its budget; abandoned", stuck=calls.stuck, **fields)
            return False
        if outcome.elapsed_ms * 2 > self._budget_ms:
            log.warning("hook slow", **fields)
        if outcome.error is not None:
            failed = (
                "enqueue hook failed"
                if method == "before_enqueue"
                else "after-enqueue hook failed; ignored"
            )
            log.warning(failed, exc_info=outcome.error, **fields)
            return False
        return True


def _overriding(hooks: Sequence[EnqueueHook], method: str) -> tuple[EnqueueHook, ...]:
    """The hooks that override `method` (the base class's do nothing: not worth a thread)."""
    default = getattr(EnqueueHook, method)
    return tuple(
        hook for hook in hooks if getattr(getattr(hook, method), "__func__", None) is not default
    )


def _before(hook: EnqueueHook, context: TickContext) -> Callable[[], None]:
    return lambda: hook.before_enqueue(context)


def _after(hook: EnqueueHook, context: TickContext, result: AttemptResult) -> Callable[[], None]:
    return lambda: hook.after_enqueue(context, result)
