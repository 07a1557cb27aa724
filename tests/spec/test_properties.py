"""Property tests: the engine against the brute-force reference, across zones and DST."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from headgate import InvalidSpec, parse_spec
from tests.spec.reference import CronSets, has_any_date, reference_next_ms, wall_exists

pytestmark = pytest.mark.slow

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Dublin",  # negative DST in tzdata
    "Australia/Sydney",
    "Australia/Lord_Howe",  # half-hour DST
    "Pacific/Auckland",
    "Pacific/Chatham",  # +12:45 with DST
    "America/Santiago",  # southern, transitions at midnight
    "America/St_Johns",  # half-hour offset with DST
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Africa/Casablanca",
]
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@dataclass(frozen=True)
class Field:
    low: int
    high: int
    star_high: int
    names: tuple[str, ...] = ()
    name_base: int = 0
    question: bool = False


SECOND = Field(0, 59, 59)
MINUTE = Field(0, 59, 59)
HOUR = Field(0, 23, 23)
DOM = Field(1, 31, 31, question=True)
MONTH = Field(1, 12, 12, tuple(MONTHS), 1)
DOW = Field(0, 7, 6, tuple(DAYS), 0, question=True)


def _render(value: int, field: Field, draw: st.DrawFn) -> str:
    name_index = value - field.name_base
    if field.names and 0 <= name_index < len(field.names) and draw(st.booleans()):
        name = field.names[name_index]
        return draw(st.sampled_from([name, name.lower(), name.title()]))
    return str(value)


@st.composite
def element(draw: st.DrawFn, field: Field) -> tuple[str, set[int]]:
    value = st.integers(field.low, field.high)
    step = st.integers(1, field.star_high - field.low + 1)
    kind = draw(st.sampled_from(["value", "range", "star_step", "range_step", "from_step"]))
    if kind == "value":
        v = draw(value)
        return _render(v, field, draw), {v}
    if kind == "star_step":
        n = draw(step)
        return f"*/{n}", set(range(field.low, field.star_high + 1, n))
    a, b = sorted((draw(value), draw(value)))
    if kind == "range":
        return f"{_render(a, field, draw)}-{_render(b, field, draw)}", set(range(a, b + 1))
    n = draw(step)
    if kind == "range_step":
        return f"{a}-{b}/{n}", set(range(a, b + 1, n))
    return f"{a}/{n}", set(range(a, max(a, field.star_high) + 1, n))


@st.composite
def field_text(draw: st.DrawFn, field: Field) -> tuple[str, frozenset[int], bool]:
    """Field text, its values, and whether it is written as a restriction."""
    if draw(st.integers(0, 3)) == 0:
        text = draw(st.sampled_from(["*", "?"] if field.question else ["*"]))
        return text, frozenset(range(field.low, field.star_high + 1)), False
    parts = draw(st.lists(element(field), min_size=1, max_size=3))
    values = set().union(*(v for _, v in parts))
    if field is DOW:
        values = {0 if v == 7 else v for v in values}
    return ",".join(t for t, _ in parts), frozenset(values), True


@st.composite
def cron_case(draw: st.DrawFn) -> tuple[str, CronSets, str]:
    six = draw(st.booleans())
    seconds = draw(field_text(SECOND)) if six else ("0", frozenset({0}), True)
    fields = [draw(field_text(f)) for f in (MINUTE, HOUR, DOM, MONTH, DOW)]
    zone = draw(st.sampled_from(ZONES))
    body = " ".join(t for t, _, _ in ([seconds] if six else []) + fields)
    spec = body if zone == "UTC" and draw(st.booleans()) else f"CRON_TZ={zone} {body}"
    minutes, hours, dom, months, dow = fields
    sets = CronSets(seconds[1], minutes[1], hours[1], dom[1], months[1], dow[1], dom[2], dow[2])
    return spec, sets, zone


@cache
def transitions(zone_name: str) -> tuple[int, ...]:
    """Instants (epoch s) near which the zone's offset changes, 2015-2035."""
    zone = ZoneInfo(zone_name)
    found = []
    start = int(datetime(2015, 1, 1, tzinfo=UTC).timestamp())
    previous = datetime.fromtimestamp(start, zone).utcoffset()
    for hours in range(12, 20 * 366 * 24, 12):
        instant = start + hours * 3600
        offset = datetime.fromtimestamp(instant, zone).utcoffset()
        if offset != previous:
            found.append(instant)
            previous = offset
    return tuple(found)


@st.composite
def instant_for(draw: st.DrawFn, zone: str) -> int:
    """Epoch ms: mostly within a day and a half of a DST transition."""
    near = transitions(zone)
    if near and draw(st.integers(0, 3)) > 0:
        base = draw(st.sampled_from(near)) * 1000
        return base + draw(st.integers(-36 * 3_600_000, 36 * 3_600_000))
    return draw(st.integers(946_684_800_000, 2_208_988_800_000))  # 2000-2040


def _wall(ms: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(ms / 1000, zone).replace(tzinfo=None, fold=0)


PROPERTY = settings(
    max_examples=int(os.environ.get("HEADGATE_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(data=st.data())
def test_engine_matches_reference_and_invariants(data: st.DataObject) -> None:
    spec_text, sets, zone_name = data.draw(cron_case())
    zone = ZoneInfo(zone_name)
    if not has_any_date(sets):
        try:
            parse_spec(spec_text)
        except InvalidSpec as error:
            assert "no future occurrence" in str(error)
            return
        raise AssertionError(f"{spec_text!r} has no date but was accepted")
    spec = parse_spec(spec_text)
    after = data.draw(instant_for(zone_name))
    ticks = [after]
    for _ in range(4):
        expected = reference_next_ms(sets, zone, ticks[-1])
        assume(expected is not None)
        tick = spec.next_tick_ms(ticks[-1])
        assert tick == expected, (spec_text, ticks[-1])
        ticks.append(tick)
    fired = ticks[1:]
    assert all(b > a for a, b in itertools.pairwise(ticks)), "ticks strictly increase"
    walls = [_wall(t, zone) for t in fired]
    assert all(wall_exists(w, zone) for w in walls), "no tick falls in a DST gap"
    assert len(set(walls)) == len(walls), "no local time fires twice"
    for tick, wall in zip(fired, walls, strict=True):
        assert int(wall.replace(tzinfo=zone, fold=0).timestamp() * 1000) == tick, "first occurrence"


@PROPERTY
@given(data=st.data())
def test_due_ticks_agree_with_repeated_next_tick(data: st.DataObject) -> None:
    spec_text, sets, zone_name = data.draw(cron_case())
    assume(has_any_date(sets))
    spec = parse_spec(spec_text)
    start = data.draw(instant_for(zone_name))
    series = [spec.next_tick_ms(start)]
    for _ in range(data.draw(st.integers(0, 6))):
        series.append(spec.next_tick_ms(series[-1]))
    next_run = series[0] - data.draw(st.sampled_from([0, 1, 999]))
    now = series[-1] + data.draw(
        st.integers(0, max(0, spec.next_tick_ms(series[-1]) - series[-1] - 1))
    )
    limit = data.draw(st.integers(1, 9))
    assert spec.due_ticks(next_run, now, limit) == series[-limit:]


@PROPERTY
@given(
    interval=st.integers(1, 10**10),
    next_run=st.integers(0, 2 * 10**12),
    span=st.integers(-(10**6), 10**12),
    limit=st.integers(1, 50),
)
def test_every_due_ticks_agree_with_repeated_next_tick(
    interval: int, next_run: int, span: int, limit: int
) -> None:
    spec = parse_spec(f"@every:{interval}")
    now = max(0, next_run + span)
    due = spec.due_ticks(next_run, now, limit)
    latest = now // interval * interval
    if latest < next_run:
        assert due == []
        return
    assert due[-1] == latest
    assert all(t % interval == 0 and next_run <= t <= now for t in due)
    assert all(spec.next_tick_ms(a) == b for a, b in itertools.pairwise(due))
    assert len(due) == limit or due[0] - interval < next_run


def test_transition_catalogue_covers_every_dst_zone() -> None:
    for zone in ZONES:
        if zone not in ("UTC", "Asia/Kolkata", "Asia/Kathmandu"):
            assert transitions(zone), zone
