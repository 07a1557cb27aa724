"""Budgeted hook calls: a hook hung for one schedule costs that schedule its
attempts and one thread, never the other schedules' hooks."""

from __future__ import annotations

import threading
import time

from headgate._runtime.hook_threads import BudgetedCalls


def _eventually(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_hung_call_refuses_only_its_own_schedules_later_calls() -> None:
    calls = BudgetedCalls()
    hung, started = threading.Event(), []

    def hang() -> None:
        started.append(1)
        hung.wait(10)

    first = calls.call(hang, 0.05, key="tenant-a")
    assert (first.finished, first.refused) == (False, False)
    for _ in range(20):  # the tick's retries: refused at once, no thread started
        retry = calls.call(hang, 0.05, key="tenant-a")
        assert retry.refused and retry.elapsed_ms == 0
    assert started == [1] and calls.stuck == 1
    other = calls.call(lambda: None, 0.5, key="tenant-b")
    assert other.finished and not other.refused

    hung.set()
    _eventually(lambda: calls.stuck == 0)
    assert calls.call(lambda: None, 0.5, key="tenant-a").finished
    calls.close()


def test_past_the_limit_of_stuck_threads_every_call_is_refused() -> None:
    calls = BudgetedCalls(max_stuck=2)
    hung = threading.Event()
    for key in ("a", "b"):
        assert not calls.call(lambda: hung.wait(10), 0.02, key=key).finished
    assert calls.call(lambda: None, 0.5, key="c").refused
    hung.set()
    _eventually(lambda: calls.stuck == 0)
    assert calls.call(lambda: None, 0.5, key="c").finished
    calls.close()
