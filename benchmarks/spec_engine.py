"""Spec engine speed: ticks per second with a parsed spec, and due_ticks on a
ten-year backlog. Prints a table; run with `python benchmarks/spec_engine.py`.

Figures are machine-dependent; the `croniter raw` column is croniter alone
(no DST rules, no validation) on the same spec in the same run, so the ratio
is what our wrapping costs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from croniter import croniter

from headgate import parse_spec

START_MS = 1_704_067_200_000  # 2024-01-01T00:00Z
TEN_YEARS_MS = 10 * 365 * 86_400_000
SPECS = [
    ("minutely", "* * * * *", "* * * * *"),
    ("zoned daily", "CRON_TZ=America/New_York 0 9 * * *", "0 9 * * *"),
    ("six-field", "*/15 30 9 * * 1-5", "30 9 * * 1-5 */15"),
    ("@every", "@every:30000", None),
]


def rate(step: Callable[[int], int], seconds: float = 0.5) -> float:
    count, value = 0, START_MS
    deadline = time.perf_counter() + seconds
    began = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(200):
            value = step(value)
        count += 200
    return count / (time.perf_counter() - began)


def croniter_rate(expression: str) -> float:
    iterator = croniter(expression, START_MS / 1000)

    def step(_: int) -> int:
        return int(iterator.get_next(float) * 1000)

    return rate(step)


def main() -> None:
    header = (
        f"{'spec':<14}{'ticks/s':>12}{'croniter raw':>14}{'ratio':>8}{'due_ticks 10y (ms)':>20}"
    )
    print(header)
    print("-" * len(header))
    for label, text, raw in SPECS:
        spec = parse_spec(text)
        ours = rate(spec.next_tick_ms)
        theirs = croniter_rate(raw) if raw else float("nan")
        now = START_MS + TEN_YEARS_MS
        began = time.perf_counter()
        repeats = 20
        for _ in range(repeats):
            spec.due_ticks(START_MS, now, 1)
        due_ms = (time.perf_counter() - began) * 1000 / repeats
        print(f"{label:<14}{ours:>12,.0f}{theirs:>14,.0f}{ours / theirs:>8.2f}{due_ms:>20.3f}")


if __name__ == "__main__":
    main()
