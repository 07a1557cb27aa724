"""The overview's charts, drawn on the server as SVG from the activity roll-up:
no script and no CDN, so the console works offline and under its CSP."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from headgate._domain import activity as series
from headgate._domain.activity import MINUTE_MS, ActivityPoint

WIDTH: Final = 600
HEIGHT: Final = 180
LEFT: Final = 46
"""Room for the value scale's labels, left of the plot."""
BOTTOM: Final = 20
"""Room for the time axis's labels, under the plot."""
TOP: Final = 8
RIGHT: Final = 10
PLOT_WIDTH: Final = WIDTH - LEFT - RIGHT
PLOT_HEIGHT: Final = HEIGHT - TOP - BOTTOM
PLOT: Final = {"left": LEFT, "top": TOP, "right": WIDTH - RIGHT, "bottom": TOP + PLOT_HEIGHT}
"""The plot's edges, for the template's axes."""
FEWEST_MINUTES: Final = 10
"""The narrowest window shown: a store that has rolled up one minute still gets
a line one can read against its neighbours-to-be."""
VALUE_TICKS: Final = 4
TIME_STEPS_MIN: Final = (1, 2, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720)
TIME_LABELS: Final = 6
"""About this many labels on the time axis, at a round step of minutes."""


@dataclass(frozen=True)
class Tick:
    at: float
    """Where on its axis, in the SVG's units."""
    label: str


@dataclass(frozen=True)
class Line:
    key: str
    points: str
    """The SVG polyline's points, "x,y x,y ..."."""
    last: float
    """Its newest value, shown in the legend."""
    style: int
    """Which of the console's line styles it is drawn in."""
    dashed: bool = False


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    unit: str
    lines: tuple[Line, ...]
    top: float
    """The value at the top of the chart: a round number at or above the largest."""
    values: tuple[Tick, ...] = ()
    """The value scale's gridlines, bottom (0) to top."""
    times: tuple[Tick, ...] = ()
    """The time axis's gridlines, at round minutes (UTC)."""

    @property
    def empty(self) -> bool:
        return not self.lines


def fitted_start(points: Sequence[ActivityPoint], start_ms: int, end_ms: int) -> int:
    """The window's start fitted to the data that exists: from the earliest point
    rolled up (not a day of nothing before a store's first minute), at least
    FEWEST_MINUTES wide, never before `start_ms`."""
    earliest = min((point.minute_ms for point in points), default=end_ms)
    fitted = min(earliest, end_ms - FEWEST_MINUTES * MINUTE_MS)
    return max(start_ms, fitted)


def nice_top(largest: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above `largest`
    (at least 1), so that the scale's VALUE_TICKS steps are round numbers."""
    if largest <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(largest))
    for factor in (1, 2, 2.5, 5, 10):
        if largest <= factor * power:
            return float(factor * power)
    return float(10 * power)


def value_label(value: float) -> str:
    """A scale's number as one reads it at a glance: 750, 1.5k, 2M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _time_ticks(start_ms: int, end_ms: int, x: Callable[[int], float]) -> tuple[Tick, ...]:
    minutes = max((end_ms - start_ms) // MINUTE_MS, 1)
    step = next((m for m in TIME_STEPS_MIN if minutes / m <= TIME_LABELS), TIME_STEPS_MIN[-1])
    step_ms = step * MINUTE_MS
    first = -(-start_ms // step_ms) * step_ms
    return tuple(
        Tick(x(at), datetime.fromtimestamp(at // 1000, UTC).strftime("%H:%M"))
        for at in range(first, end_ms, step_ms)
    )


@dataclass(frozen=True)
class _Spec:
    id: str
    title: str
    unit: str
    series: str
    keys: tuple[str, ...] = ()
    """The keys drawn, in this order (empty: every key found)."""


_SPECS: Final = (
    _Spec(
        "ticks",
        "Ticks per minute, by outcome",
        "ticks",
        series.TICKS,
        ("enqueued", "deduplicated", "skipped", "failed"),
    ),
    _Spec("jobs", "Jobs per minute", "jobs", series.JOBS, series.JOB_OUTCOMES),
    _Spec("tick-lateness", "Tick lateness", "ms", series.TICK_LATENESS, ("p50", "p99")),
    _Spec("pickup", "Job pickup after due", "ms", series.PICKUP, ("p50", "p99")),
    _Spec("queue-depth", "Queue depth (pending jobs)", "jobs", series.QUEUE_DEPTH),
    _Spec("oldest-pending", "Oldest pending job's wait", "s", series.OLDEST_PENDING),
)


def charts(points: Sequence[ActivityPoint], start_ms: int, end_ms: int) -> list[Chart]:
    """The overview's charts over [start_ms, end_ms), from the roll-up's points."""
    by_series: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for point in points:
        by_series[point.series][point.key].append((point.minute_ms, point.value))
    made = [
        _chart(
            spec.id,
            spec.title,
            spec.unit,
            _chosen(by_series[spec.series], spec.keys),
            start_ms,
            end_ms,
        )
        for spec in _SPECS
    ]
    limits = {
        f"{scope} running": values for scope, values in by_series[series.LIMIT_RUNNING].items()
    }
    ceilings = {f"{scope} limit": values for scope, values in by_series[series.LIMIT].items()}
    made.append(
        _chart(
            "limits",
            "Running under each limit, against it",
            "jobs",
            {**limits, **ceilings},
            start_ms,
            end_ms,
            dashed=set(ceilings),
        )
    )
    return made


def _chosen(
    found: dict[str, list[tuple[int, float]]], keys: tuple[str, ...]
) -> dict[str, list[tuple[int, float]]]:
    if not keys:
        return dict(sorted(found.items()))
    return {key: found[key] for key in keys if key in found}


def _chart(  # noqa: PLR0917 (a chart's parts)
    chart_id: str,
    title: str,
    unit: str,
    lines: dict[str, list[tuple[int, float]]],
    start_ms: int,
    end_ms: int,
    dashed: Iterable[str] = (),
) -> Chart:
    shown = {
        key: [(m, v) for m, v in values if start_ms <= m < end_ms] for key, values in lines.items()
    }
    shown = {key: values for key, values in shown.items() if values}
    top = nice_top(max((v for values in shown.values() for _, v in values), default=0.0))
    span = max(end_ms - MINUTE_MS - start_ms, MINUTE_MS)
    dashes = set(dashed)

    def x(minute: int) -> float:
        return LEFT + (minute - start_ms) / span * PLOT_WIDTH

    def y(value: float) -> float:
        return TOP + PLOT_HEIGHT - value / top * PLOT_HEIGHT

    drawn = tuple(
        Line(
            key,
            " ".join(f"{x(m):.1f},{y(v):.1f}" for m, v in sorted(values)),
            sorted(values)[-1][1],
            index % 6,
            key in dashes,
        )
        for index, (key, values) in enumerate(shown.items())
    )
    steps = [top * n / VALUE_TICKS for n in range(VALUE_TICKS + 1)]
    values = tuple(Tick(y(value), value_label(value)) for value in steps)
    return Chart(chart_id, title, unit, drawn, top, values, _time_ticks(start_ms, end_ms, x))
