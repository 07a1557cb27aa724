"""A spec in words: what the console shows beside it, never the cron again."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headgate._domain.describe import describe, describe_in_words
from headgate._domain.spec import parse_spec

IN_WORDS = {
    "@every:60000": "Every minute",
    "@every:90s": "Every 90 seconds",
    "@every:1500": "Every 1500 ms",
    "0 9 * * *": "At 09:00, UTC",
    "CRON_TZ=America/New_York 0 9 * * 1-5": "At 09:00 on Mon\N{EN DASH}Fri, America/New_York",
    "30 9,17 * * *": "At 09:30 and 17:30, UTC",
    "30 0 9 * * *": "At 09:00:30, UTC",
    "*/5 * * * *": "Every 5 minutes, UTC",
    "* * * * *": "Every minute, UTC",
    "*/10 * * * * *": "Every 10 seconds, UTC",
    "30 * * * * *": "Every minute, at second 30, UTC",
    "0 * * * *": "At minute 0 of every hour, UTC",
    "15,45 * * * *": "At minutes 15 and 45 of every hour, UTC",
    "0 */2 * * *": "At minute 0 of every 2nd hour, UTC",
    "0 9-17 * * 1-5": "At minute 0 of hours 9\N{EN DASH}17 on Mon\N{EN DASH}Fri, UTC",
    "*/15 9-17 * * 1-5": "Every 15 minutes during hours 9\N{EN DASH}17 on Mon\N{EN DASH}Fri, UTC",
    "0 0 1,15 * *": "At 00:00 on days 1 and 15 of the month, UTC",
    "0 0 13 * 5": "At 00:00 on day 13 of the month or on Fri, UTC",
    "0 0 1 */3 *": "At 00:00 on day 1 of the month in Jan, Apr, Jul and Oct, UTC",
    "0 0 1 */2 *": "At 00:00 on day 1 of the month in every 2nd month, UTC",
    "0 0 * * 0,6": "At 00:00 on Sun and Sat, UTC",
}


@pytest.mark.parametrize(("spec", "words"), IN_WORDS.items(), ids=list(IN_WORDS))
def test_a_spec_in_words(spec: str, words: str) -> None:
    assert describe_in_words(parse_spec(spec)) == words


@pytest.mark.parametrize(
    "spec",
    [
        "*/7 * * * *",  # 0, 7, … 56, then 0 four minutes later: not "every 7 minutes"
        "23 0-20/2 * * *",
        "0 1,3,5,7,9 * * *",
        "0 0 1-5,10,20,25,28 * *",
        "*/7 * * * * *",
        "*/10 0 * * * *",
    ],
)
def test_a_cron_whose_words_would_repeat_its_fields_has_none(spec: str) -> None:
    parsed = parse_spec(spec)
    assert describe_in_words(parsed) is None
    assert describe(parsed) == "UTC time"  # the preview's answer: the zone it is read in


minutes = st.sampled_from(["*", "0", "5", "*/5", "*/7", "1-3", "1,4,9", "0-10/2"])
hours = st.sampled_from(["*", "9", "*/2", "9-17", "0,12", "1,3,5,7,9"])
weekdays = st.sampled_from(["*", "0", "1-5", "*/2", "1,3,5"])


@given(minute=minutes, hour=hours, weekday=weekdays)
def test_words_never_spell_the_fields_out_again(minute: str, hour: str, weekday: str) -> None:
    words = describe_in_words(parse_spec(f"{minute} {hour} * * {weekday}"))
    assert words is None or (words.endswith(", UTC") and "*" not in words and "/" not in words)
