"""The overview's charts, drawn on the server as SVG from the activity roll-up:
no script and no CDN, so the console works offline and under its CSP."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from headgate._domain import activity as series
from headgate._domain.activity import MINUTE_MS, ActivityPoint

WIDTH: Final = 600
HEIGHT: Final = 160
PAD: Final = 4


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
    """The value at the top of the chart."""

    @property
    def empty(self) -> bool:
        return not self.lines


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
    top = max((v for values in shown.values() for _, v in values), default=0.0)
    top = max(top, 1.0)
    span = max(end_ms - MINUTE_MS - start_ms, MINUTE_MS)
    dashes = set(dashed)

    def xy(minute: int, value: float) -> str:
        x = PAD + (minute - start_ms) / span * (WIDTH - 2 * PAD)
        y = HEIGHT - PAD - value / top * (HEIGHT - 2 * PAD)
        return f"{x:.1f},{y:.1f}"

    drawn = tuple(
        Line(
            key,
            " ".join(xy(m, v) for m, v in sorted(values)),
            sorted(values)[-1][1],
            index % 6,
            key in dashes,
        )
        for index, (key, values) in enumerate(shown.items())
    )
    return Chart(chart_id, title, unit, drawn, top)
