"""Rejected specs: each gets an InvalidSpec naming the field and the rule."""

import pytest

from headgate import InvalidSpec, parse_spec

EVERY_FORMS = (
    "interval must be a whole number of milliseconds >= 1, "
    "or a number and a unit: ms, s, m, h, d (30s, 5m, 1.5h)"
)
REJECTED = [
    ("61 * * * *", "bad cron '61 * * * *': minute 61 out of range 0-59"),
    ("* 24 * * *", "bad cron '* 24 * * *': hour 24 out of range 0-23"),
    ("0 0 0 * *", "bad cron '0 0 0 * *': day-of-month 0 out of range 1-31"),
    ("0 0 32 * *", "bad cron '0 0 32 * *': day-of-month 32 out of range 1-31"),
    ("0 0 * 13 *", "bad cron '0 0 * 13 *': month 13 out of range 1-12"),
    ("0 0 * * 8", "bad cron '0 0 * * 8': day-of-week 8 out of range 0-7"),
    ("60 * * * * *", "bad cron '60 * * * * *': second 60 out of range 0-59"),
    ("5-3 * * * *", "bad cron '5-3 * * * *': minute range 5-3 is descending"),
    ("* * * * FRI-MON", "bad cron '* * * * FRI-MON': day-of-week range FRI-MON is descending"),
    ("*/0 * * * *", "bad cron '*/0 * * * *': minute step 0 must be at least 1"),
    ("*/61 * * * *", "bad cron '*/61 * * * *': minute step 61 exceeds the field's 60 values"),
    ("*/x * * * *", "bad cron '*/x * * * *': minute step 'x' is not a whole number"),
    ("1,,2 * * * *", "bad cron '1,,2 * * * *': minute has an empty list element"),
    ("1, * * * *", "bad cron '1, * * * *': minute has an empty list element"),
    ("* * * FOO *", "bad cron '* * * FOO *': month 'FOO' is not a number or a month name"),
    (
        "* * * * FUNDAY",
        "bad cron '* * * * FUNDAY': day-of-week 'FUNDAY' is not a number or a day-of-week name",
    ),
    ("* * * JAN MON", None),  # valid: names in their own fields
    ("* * MON * *", "bad cron '* * MON * *': day-of-month 'MON' is not a number"),
    (
        "? * * * *",
        "bad cron '? * * * *': minute '?' is only allowed in day-of-month and day-of-week",
    ),
    ("0 0 L * *", "bad cron '0 0 L * *': day-of-month 'L' is not a number"),
    (
        "0 0 * * 1#2",
        "bad cron '0 0 * * 1#2': day-of-week '1#2' is not a value, range a-b, list or step */n",
    ),
    ("H * * * *", "bad cron 'H * * * *': minute 'H' is not a number"),
    (
        "-1 * * * *",
        "bad cron '-1 * * * *': minute '-1' is not a value, range a-b, list or step */n",
    ),
    (
        "1-2-3 * * * *",
        "bad cron '1-2-3 * * * *': minute '1-2-3' is not a value, range a-b, list or step */n",
    ),
    (
        "1/2/3 * * * *",
        "bad cron '1/2/3 * * * *': minute '1/2/3' is not a value, range a-b, list or step */n",
    ),
    (
        "* * * *",
        "bad cron '* * * *': expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 4",
    ),
    (
        "0 0 0 * * * *",
        "bad cron '0 0 0 * * * *': expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 7",
    ),
    (
        "0 0 31 2 *",
        "bad cron '0 0 31 2 *': no future occurrence: day-of-month 31 never falls in month 2",
    ),
    (
        "0 0 30,31 2 *",
        "bad cron '0 0 30,31 2 *': no future occurrence: day-of-month 30,31 never falls in month 2",
    ),
    (
        "0 0 31 4,6,9,11 *",
        "bad cron '0 0 31 4,6,9,11 *': no future occurrence: day-of-month 31 never falls in month 4,6,9,11",
    ),
    ("", "empty spec: expected '@every:<ms>' or a cron expression"),
    ("   ", "empty spec: expected '@every:<ms>' or a cron expression"),
    ("@every:0", "bad @every '@every:0': interval 0 out of range 1-1000000000000 milliseconds"),
    ("@every:-5", f"bad @every '@every:-5': {EVERY_FORMS}"),
    ("@every:1.5", f"bad @every '@every:1.5': {EVERY_FORMS}"),
    ("@every:", f"bad @every '@every:': {EVERY_FORMS}"),
    ("@every:30S", f"bad @every '@every:30S': {EVERY_FORMS}"),
    ("@every:5min", f"bad @every '@every:5min': {EVERY_FORMS}"),
    ("@every:1h30m", f"bad @every '@every:1h30m': {EVERY_FORMS}"),
    ("@every:s", f"bad @every '@every:s': {EVERY_FORMS}"),
    ("@every:.5s", f"bad @every '@every:.5s': {EVERY_FORMS}"),
    ("@every:1e3", f"bad @every '@every:1e3': {EVERY_FORMS}"),
    ("@every:30 s", f"bad @every '@every:30 s': {EVERY_FORMS}"),
    ("@every:\uff13\uff10s", f"bad @every '@every:\uff13\uff10s': {EVERY_FORMS}"),  # full width
    ("@every:0.5ms", "bad @every '@every:0.5ms': 0.5ms is not a whole number of milliseconds"),
    (
        "@every:1.0005s",
        "bad @every '@every:1.0005s': 1.0005s is not a whole number of milliseconds",
    ),
    ("@every:0s", "bad @every '@every:0s': interval 0 out of range 1-1000000000000 milliseconds"),
    ("@every:12d", None),
    (
        "@every:11575d",
        "bad @every '@every:11575d': interval 1000080000000 out of range 1-1000000000000 milliseconds",
    ),
    (
        "@every 1000",
        "bad spec '@every 1000': the @ forms are '@every:<milliseconds>' and the macros @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
    ),
    (
        "@reboot",
        "bad spec '@reboot': the @ forms are '@every:<milliseconds>' and the macros @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
    ),
    (
        "CRON_TZ=Europe/Paris @Daily",
        "bad spec 'CRON_TZ=Europe/Paris @Daily': the @ forms are '@every:<milliseconds>' and the macros @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
    ),
    (
        "CRON_TZ=America/New_York @every:30000",
        "bad spec 'CRON_TZ=America/New_York @every:30000': @every is always aligned to UTC and rejects a CRON_TZ prefix",
    ),
    (
        "CRON_TZ=UTC @every:30000",
        "bad spec 'CRON_TZ=UTC @every:30000': @every is always aligned to UTC and rejects a CRON_TZ prefix",
    ),
    (
        "CRON_TZ=Mars/Olympus 0 9 * * *",
        "bad time zone 'Mars/Olympus' in 'CRON_TZ=Mars/Olympus 0 9 * * *': not a known IANA zone name",
    ),
    (
        "CRON_TZ=../../etc/passwd 0 9 * * *",
        "bad time zone '../../etc/passwd' in 'CRON_TZ=../../etc/passwd 0 9 * * *': not a known IANA zone name",
    ),
    (
        "CRON_TZ=/etc/localtime 0 9 * * *",
        "bad time zone '/etc/localtime' in 'CRON_TZ=/etc/localtime 0 9 * * *': not a known IANA zone name",
    ),
    (
        "CRON_TZ= 0 9 * * *",
        "bad time zone in 'CRON_TZ= 0 9 * * *': CRON_TZ= needs an IANA zone name",
    ),
    (
        "CRON_TZ=Europe/Paris",
        "bad spec 'CRON_TZ=Europe/Paris': CRON_TZ=Europe/Paris must be followed by a cron expression",
    ),
]


@pytest.mark.parametrize(("spec", "message"), REJECTED, ids=[s or "<empty>" for s, _ in REJECTED])
def test_rejected_spec_message(spec: str, message: str | None) -> None:
    if message is None:
        parse_spec(spec)
        return
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(spec)
    assert str(caught.value) == message


def test_invalid_spec_is_a_value_error() -> None:
    assert issubclass(InvalidSpec, ValueError)


@pytest.mark.parametrize("value", [None, 42, b"0 * * * *"])
def test_non_string_spec_is_rejected(value: object) -> None:
    with pytest.raises(InvalidSpec, match="spec must be a string"):
        parse_spec(value)  # type: ignore[arg-type]


def test_overlong_spec_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="the limit is 512"):
        parse_spec("0," * 300 + "1 * * * *")
