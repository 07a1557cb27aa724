"""Spec semantics a user relies on, one rule per test."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from headgate import EverySpec, due_ticks, next_tick_ms, parse_spec


def ms(text: str, zone: str = "UTC") -> int:
    """'2024-03-10 02:30' in `zone` (first occurrence) as epoch milliseconds."""
    naive = datetime.fromisoformat(text)
    return int(naive.replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def utc(ms_value: int) -> str:
    return datetime.fromtimestamp(ms_value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


class TestEvery:
    def test_ticks_are_utc_epoch_multiples(self) -> None:
        assert next_tick_ms("@every:30000", 0) == 30000
        assert next_tick_ms("@every:30000", 29999) == 30000
        assert next_tick_ms("@every:30000", 30000) == 60000
        assert next_tick_ms("@every:7", 1_700_000_000_001) % 7 == 0

    def test_one_millisecond_interval(self) -> None:
        assert next_tick_ms("@every:1", 41) == 42

    def test_parsed_form(self) -> None:
        assert parse_spec(" @every:30000 ") == EverySpec(30000)
        assert parse_spec("@every:030000").text == "@every:30000"

    @pytest.mark.parametrize(
        ("spelled", "interval_ms"),
        [
            ("@every:250ms", 250),
            ("@every:30s", 30_000),
            ("@every:5m", 300_000),
            ("@every:1h", 3_600_000),
            ("@every:1d", 86_400_000),
            ("@every:1.5s", 1_500),
            ("@every:0.25m", 15_000),
            ("@every:2.5h", 9_000_000),
            ("@every:1.000s", 1_000),
        ],
    )
    def test_a_unit_is_stored_as_milliseconds(self, spelled: str, interval_ms: int) -> None:
        """One spelling per schedule: the phase and the tick identity are those of
        the milliseconds form."""
        parsed = parse_spec(spelled)
        assert parsed == EverySpec(interval_ms) == parse_spec(f"@every:{interval_ms}")
        assert parsed.text == f"@every:{interval_ms}"
        assert next_tick_ms(spelled, 1_700_000_000_001) == next_tick_ms(
            parsed.text, 1_700_000_000_001
        )

    def test_the_shortest_gap_of_every_and_of_cron(self) -> None:
        assert parse_spec("@every:1500").shortest_gap_ms == 1_500
        assert parse_spec("* * * * * *").shortest_gap_ms == 1_000
        assert parse_spec("0,30 * * * * *").shortest_gap_ms == 30_000
        assert parse_spec("10,50 * * * * *").shortest_gap_ms == 20_000  # 00:50 to 01:10
        assert parse_spec("10,50 0 * * * *").shortest_gap_ms == 40_000  # one minute an hour
        assert parse_spec("* * * * *").shortest_gap_ms == 60_000
        assert parse_spec("0 59,0 * * * *").shortest_gap_ms == 60_000  # 00:59 to 01:00
        assert parse_spec("0 9 * * *").shortest_gap_ms > 60_000


class TestCronFields:
    def test_five_fields_have_minute_precision(self) -> None:
        assert next_tick_ms("* * * * *", ms("2024-01-01 00:00:30")) == ms("2024-01-01 00:01")

    def test_six_fields_put_seconds_first(self) -> None:
        assert next_tick_ms("15 * * * * *", ms("2024-01-01 00:00:30")) == ms("2024-01-01 00:01:15")
        assert next_tick_ms("15 30 9 * * *", ms("2024-01-01 00:00")) == ms("2024-01-01 09:30:15")

    def test_sunday_is_zero_and_seven(self) -> None:
        sunday = ms("2024-01-07 00:00")
        start = ms("2024-01-01 12:00")
        assert next_tick_ms("0 0 * * 0", start) == sunday
        assert next_tick_ms("0 0 * * 7", start) == sunday
        assert next_tick_ms("0 0 * * sun", start) == sunday
        assert next_tick_ms("0 0 * * 6-7", ms("2024-01-06 12:00")) == sunday

    def test_names_in_any_case(self) -> None:
        start = ms("2024-01-01 12:00")
        assert next_tick_ms("0 0 1 feb *", start) == ms("2024-02-01 00:00")
        assert next_tick_ms("0 0 * * Tue-thu", start) == ms("2024-01-02 00:00")
        assert parse_spec("0 0 1 feb tue").text == "0 0 1 FEB TUE"

    def test_ranges_lists_and_steps(self) -> None:
        spec = parse_spec("1-10/3,30 * * * *")
        minutes = []
        tick = ms("2024-01-01 00:00") - 1
        for _ in range(6):
            tick = spec.next_tick_ms(tick)
            minutes.append(datetime.fromtimestamp(tick / 1000, UTC).minute)
        assert minutes == [1, 4, 7, 10, 30, 1]

    def test_value_with_step_runs_to_the_end_of_the_field(self) -> None:
        hours = set()
        tick = ms("2024-01-01 00:00") - 1
        for _ in range(10):
            tick = next_tick_ms("0 20/2 * * *", tick)
            hours.add(datetime.fromtimestamp(tick / 1000, UTC).hour)
        assert hours == {20, 22}

    def test_question_mark_means_any_day(self) -> None:
        assert next_tick_ms("0 0 ? * 1", ms("2024-01-02 00:00")) == ms("2024-01-08 00:00")

    def test_restricted_day_of_month_and_weekday_fire_on_either(self) -> None:
        # 15th of the month OR a Monday
        start = ms("2024-01-09 00:00")
        assert next_tick_ms("0 0 15 * 1", start) == ms("2024-01-15 00:00")
        assert next_tick_ms("0 0 15 * 1", ms("2024-01-15 00:00")) == ms("2024-01-22 00:00")
        assert next_tick_ms("0 0 13 * 1", start) == ms("2024-01-13 00:00")

    def test_a_stepped_day_field_counts_as_restricted(self) -> None:
        # "*/10" is written as a restriction, so days 1,11,21,31 OR Fridays fire.
        assert next_tick_ms("0 0 */10 * 5", ms("2024-01-02 00:00")) == ms("2024-01-05 00:00")
        assert next_tick_ms("0 0 */10 * 5", ms("2024-01-05 00:00")) == ms("2024-01-11 00:00")

    def test_an_unrestricted_day_field_needs_both(self) -> None:
        assert next_tick_ms("0 0 * 2 1", ms("2024-01-01 00:00")) == ms("2024-02-05 00:00")

    def test_full_range_restriction_or_weekday_fires_every_day(self) -> None:
        assert next_tick_ms("0 0 1-31 * 1", ms("2024-01-02 00:00")) == ms("2024-01-03 00:00")

    def test_leap_day(self) -> None:
        assert next_tick_ms("0 0 29 2 *", ms("2024-03-01 00:00")) == ms("2028-02-29 00:00")

    def test_leap_day_on_a_weekday_with_restricted_month_only(self) -> None:
        assert next_tick_ms("0 0 29 2 *", ms("2096-03-01 00:00")) == ms("2104-02-29 00:00")


class TestZones:
    def test_cron_tz_utc_equals_no_prefix(self) -> None:
        assert parse_spec("CRON_TZ=UTC 0 9 * * *") == parse_spec("0 9 * * *")
        start = ms("2024-05-05 10:00")
        assert next_tick_ms("CRON_TZ=UTC 0 9 * * *", start) == next_tick_ms("0 9 * * *", start)

    def test_fields_are_read_on_the_zone_calendar(self) -> None:
        tick = next_tick_ms("CRON_TZ=Asia/Tokyo 0 9 * * *", ms("2023-12-31 12:00"))
        assert utc(tick) == "2024-01-01 00:00:00"  # 09:00 JST is midnight UTC

    def test_spring_forward_gap_is_skipped(self) -> None:
        spec = "CRON_TZ=America/New_York 30 2 * * *"
        first = next_tick_ms(spec, ms("2024-03-09 03:00", "America/New_York"))
        assert first == ms("2024-03-11 02:30", "America/New_York")

    def test_fall_back_repeated_time_fires_once_at_first_occurrence(self) -> None:
        spec = "CRON_TZ=America/New_York 30 1 * * *"
        first = next_tick_ms(spec, ms("2024-11-03 00:00", "America/New_York"))
        assert utc(first) == "2024-11-03 05:30:00"  # 01:30 EDT
        assert utc(next_tick_ms(spec, first)) == "2024-11-04 06:30:00"  # skips 01:30 EST

    def test_asked_during_the_second_occurrence_skips_the_repeat(self) -> None:
        spec = "CRON_TZ=America/New_York */10 * * * *"
        second_occurrence = 1730614200000  # 2024-11-03 01:10 EST = 06:10 UTC
        assert utc(next_tick_ms(spec, second_occurrence)) == "2024-11-03 07:00:00"  # 02:00 EST

    def test_every_minute_through_fall_back_never_repeats_a_wall_time(self) -> None:
        spec = parse_spec("CRON_TZ=Europe/London * * * * *")
        zone = ZoneInfo("Europe/London")
        tick = ms("2024-10-27 00:30", "Europe/London")
        walls = []
        for _ in range(150):
            tick = spec.next_tick_ms(tick)
            walls.append(datetime.fromtimestamp(tick / 1000, zone).replace(tzinfo=None, fold=0))
        assert len(walls) == len(set(walls))
        assert utc(tick) == "2024-10-27 03:00:00"  # 150 minutes of wall clock, 210 real ones

    def test_half_hour_dst_lord_howe(self) -> None:
        spec = "CRON_TZ=Australia/Lord_Howe 15 2 * * *"
        # 2024-10-06 02:00 -> 02:30: 02:15 does not exist that night.
        tick = next_tick_ms(spec, ms("2024-10-05 03:00", "Australia/Lord_Howe"))
        assert tick == ms("2024-10-07 02:15", "Australia/Lord_Howe")


class TestDueTicks:
    def test_empty_when_not_yet_due(self) -> None:
        assert due_ticks("@every:1000", 5000, 4999, 10) == []
        assert due_ticks("* * * * *", ms("2024-01-01 00:05"), ms("2024-01-01 00:04"), 10) == []

    def test_bounds_are_inclusive(self) -> None:
        start, end = ms("2024-01-01 00:00"), ms("2024-01-01 00:03")
        assert due_ticks("* * * * *", start, end, 10) == [start + i * 60_000 for i in range(4)]
        assert due_ticks("@every:60000", start, end, 10) == [start + i * 60_000 for i in range(4)]

    def test_keeps_the_newest_limit_oldest_first(self) -> None:
        start, end = ms("2024-01-01 00:00"), ms("2024-01-01 01:00")
        assert due_ticks("*/5 * * * *", start, end, 3) == [
            ms("2024-01-01 00:50"),
            ms("2024-01-01 00:55"),
            ms("2024-01-01 01:00"),
        ]

    def test_latest_tick_is_exact_after_ten_years(self) -> None:
        now = ms("2034-06-15 13:47:12")
        assert due_ticks("* * * * *", ms("2024-06-15 00:00"), now, 1) == [ms("2034-06-15 13:47")]
        assert due_ticks("@every:60000", 1, now, 1) == [ms("2034-06-15 13:47")]
        assert due_ticks("CRON_TZ=America/New_York 0 9 * * *", 0, now, 2) == [
            ms("2034-06-14 09:00", "America/New_York"),
            ms("2034-06-15 09:00", "America/New_York"),
        ]

    def test_now_inside_the_second_occurrence_counts_the_first(self) -> None:
        spec = "CRON_TZ=America/New_York 45 1 * * *"
        now = 1730614800000  # 2024-11-03 01:20 EST; 01:45 EDT was 35 minutes ago
        assert due_ticks(spec, 0, now, 1) == [1730612700000]

    def test_skips_the_spring_forward_gap_backwards(self) -> None:
        spec = "CRON_TZ=America/New_York 30 2 * * *"
        now = ms("2024-03-11 12:00", "America/New_York")
        assert due_ticks(spec, 0, now, 2) == [
            ms("2024-03-09 02:30", "America/New_York"),
            ms("2024-03-11 02:30", "America/New_York"),
        ]

    @pytest.mark.parametrize("limit", [0, -1, True])
    def test_limit_must_be_positive(self, limit: int) -> None:
        with pytest.raises(ValueError, match="limit must be an int >= 1"):
            due_ticks("@every:1000", 0, 10_000, limit)

    def test_instants_must_be_integers(self) -> None:
        with pytest.raises(TypeError, match="after_ms must be an int"):
            next_tick_ms("@every:1000", 1.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="outside"):
            next_tick_ms("@every:1000", -1)
