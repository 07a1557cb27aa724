"""Runs the host's enqueue hooks around each automatic attempt.

Hooks are host code: whatever one raises (even SystemExit) only fails that
attempt (before) or is logged and ignored (after); it never reaches the
actors. See `hooks.py` for what hosts are promised.
"""

from __future__ import annotations

from collections.abc import Sequence

from headgate._logs import get_logger
from headgate._runtime.hooks import AttemptResult, EnqueueHook
from headgate._runtime.planner import SchedulePlan, TickRecord, with_hook_failure

log = get_logger("headgate.scheduler")


class HookRunner:
    def __init__(self, hooks: Sequence[EnqueueHook]) -> None:
        self._hooks = tuple(hooks)

    def before(self, plan: SchedulePlan) -> None:
        """Run the before-enqueue hooks on each planned tick, in order; a tick
        whose hook raises fails (`hook_error`) and ends the plan there."""
        if not self._hooks:
            return
        for index, planned in enumerate(plan.ticks):
            if planned.failure is not None:
                return
            for hook in self._hooks:
                try:
                    hook.before_enqueue(planned.context)
                except BaseException:  # the host's code: even SystemExit only fails this attempt
                    log.warning(
                        "enqueue hook failed",
                        schedule_id=planned.context.schedule_id,
                        tick_ms=planned.context.tick_ms,
                        hook=type(hook).__name__,
                        exc_info=True,
                    )
                    plan.ticks[index:] = [with_hook_failure(planned)]
                    return

    def after(self, record: TickRecord, committed_at_ms: int | None) -> None:
        """Tell the after-enqueue hooks about one recorded attempt."""
        if not self._hooks:
            return
        context, decision = record.context, record.decision
        result = AttemptResult(
            decision.outcome.value, decision.reason.value, decision.job_id, committed_at_ms
        )
        for hook in self._hooks:
            try:
                hook.after_enqueue(context, result)
            except BaseException:  # the host's code: even SystemExit must not stop the actors
                log.warning(
                    "after-enqueue hook failed; ignored",
                    schedule_id=context.schedule_id,
                    tick_ms=context.tick_ms,
                    hook=type(hook).__name__,
                    exc_info=True,
                )
