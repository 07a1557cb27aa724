"""The operator commands (`headgate schedules|jobs|quarantine|queues`) as an operator
runs them: each one's effect in the store, its table and its --json, and its
exit status (0 done, 1 not found or refused, 2 bad input)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect

from headgate import Headgate, JobContext, NotFound
from headgate._domain.streams import schedule_stream
from headgate._store.sql.store import SqlStore
from headgate._wire.jobs import JobOut
from headgate._wire.queues import QuarantineOut
from headgate._wire.schedules import EventOut, ScheduleOut
from headgate.cli import main
from headgate.ops import read_events
from headgate.testing import FakeClock, finish_job
from tests.store.builders import create_schedule, fire_tick

Capture = pytest.CaptureFixture[str]
SCHEDULE_FIELDS = {*ScheduleOut.model_fields, *ScheduleOut.model_computed_fields}
"""A schedule's fields in lists and after a change, as the API sends them."""


@pytest.fixture
def hg(store_url: str) -> Iterator[Headgate]:
    with Headgate(store_url) as client:
        yield client


def _run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _json(capsys: Capture, *argv: str) -> Any:
    status, out, err = _run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def _event_count(url: str) -> int:
    return len(read_events(url, limit=10_000))


def _ticked(url: str) -> None:
    """Schedule s0 with two automatic ticks (two jobs, two history records)."""
    store = SqlStore(url, FakeClock())
    create_schedule(store, "s0")
    fire_tick(store, "s0", 60_000)
    fire_tick(store, "s0", 120_000)
    store.close()


# schedules -------------------------------------------------------------------


def test_schedules_put_list_and_show(store_url: str, hg: Headgate, capsys: Capture) -> None:
    status, out, _ = _run(
        capsys,
        *("schedules", "put", "nightly", "--db", store_url),
        *("--spec", "0 9 * * *", "--kind", "report.build", "--payload", '{"team": 7}'),
        *("--queue", "reports", "--on-missed", "backfill", "--backfill-max", "3"),
    )
    assert status == 0
    assert "saved schedule nightly" in out and "At 09:00, UTC" in out
    stored = hg.schedules.get("nightly")
    assert (stored.spec, stored.kind, stored.queue, stored.payload) == (
        "0 9 * * *",
        "report.build",
        "reports",
        {"team": 7},
    )
    assert (stored.on_missed, stored.backfill_max, stored.paused) == ("backfill", 3, False)

    _ticked(store_url)
    status, out, _ = _run(capsys, "schedules", "list", "--db", store_url)
    assert status == 0
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "SPEC", "KIND", "HEALTH", "LAST", "RUN", "NEXT", "RUN"]
    assert rows[0].split()[:5] == ["nightly", "0", "9", "*", "*"]
    assert "2" in rows[0] and "T09:00:00Z" in rows[0]
    assert rows[1].split() == [  # its ticks were due in 1970, and none has fired since
        "s0",
        "@every:60000",
        "report.build",
        "missing",
        "enqueued",
        "(1970-01-01T00:02:00Z)",
        "1970-01-01T00:03:00Z",
    ]

    listed = _json(capsys, "schedules", "list", "--db", store_url)
    assert set(listed) == {"schedules", "next_cursor"}
    assert [set(s) for s in listed["schedules"]] == [SCHEDULE_FIELDS] * 2
    assert listed["schedules"][0]["next_run_ms"] == stored.next_run_ms

    shown = _json(capsys, "schedules", "show", "s0", "--db", store_url)
    assert set(shown) == {*SCHEDULE_FIELDS, "deleted", "runs", "enqueue_events"}
    assert shown["health"]["state"] == "missing"
    assert [run["tick_ms"] for run in shown["runs"]] == [120_000, 60_000]
    assert shown["payload"] == {"team": 7} and shown["last_enqueued_ms"] == 120_000
    assert [e["tick_ms"] for e in shown["enqueue_events"]] == [120_000, 60_000]
    assert set(shown["enqueue_events"][0]) == set(EventOut.model_fields)

    status, out, _ = _run(capsys, "schedules", "show", "nightly", "--db", store_url)
    assert 'payload:        {"team": 7}' in out
    assert "on missed:      Backfill up to 3" in out
    status, out, _ = _run(capsys, "schedules", "show", "s0", "--db", store_url)
    assert "1970-01-01T00:02:00Z  enqueued  accepted  job-for-s0-120000" in out


def test_a_page_says_where_the_next_one_starts(store_url: str, capsys: Capture) -> None:
    _ticked(store_url)
    with Headgate(store_url) as client:
        client.schedules.put("t1", spec="@every:60000", kind="k")
    status, out, _ = _run(capsys, "schedules", "list", "--db", store_url, "--limit", "1")
    assert status == 0
    cursor = out.splitlines()[-1].removeprefix("next page: --cursor ")
    assert cursor != out.splitlines()[-1]
    status, out, _ = _run(capsys, "schedules", "list", "--db", store_url, "--cursor", cursor)
    assert status == 0
    assert out.splitlines()[1].startswith("t1 ")


def test_a_search_lists_the_schedules_whose_id_starts_with_it(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    for schedule_id in ("bulk-1", "bulk-10", "bulk-2", "other"):
        hg.schedules.put(schedule_id, spec="@every:60000", kind="k")
    listed = _json(capsys, "schedules", "list", "--db", store_url, "--search", "bulk-1")
    assert [s["id"] for s in listed["schedules"]] == ["bulk-1", "bulk-10"]
    status, out, _ = _run(capsys, "schedules", "list", "--db", store_url, "--search", "x" * 10_000)
    assert (status, out.strip()) == (0, "no schedules")


def test_pause_resume_and_delete(store_url: str, hg: Headgate, capsys: Capture) -> None:
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
    paused = _json(capsys, "schedules", "pause", "nightly", "--db", store_url)
    assert set(paused) == SCHEDULE_FIELDS and paused["paused"] is True
    assert hg.schedules.get("nightly").paused
    status, out, _ = _run(capsys, "schedules", "resume", "nightly", "--db", store_url)
    assert status == 0 and "resumed schedule nightly" in out and "paused:         no" in out
    assert not hg.schedules.get("nightly").paused

    assert _json(capsys, "schedules", "delete", "nightly", "--db", store_url) == {
        "id": "nightly",
        "deleted": True,
    }
    with pytest.raises(NotFound):
        hg.schedules.get("nightly")
    for action in (["delete"], ["pause"], ["resume"], ["enqueue-now"], ["update", "--paused"]):
        argv = ["schedules", action[0], "nightly", "--db", store_url, *action[1:]]
        assert _run(capsys, *argv) == (1, "", "error: no schedule 'nightly'\n")


def test_run_now_prints_its_key_and_repeats_safely(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build", payload={"team": 7})
    status, out, _ = _run(capsys, "schedules", "enqueue-now", "nightly", "--db", store_url)
    assert status == 0
    job_id, key = out.split()[2], out.split()[5].rstrip(":")
    assert hg.jobs.get(job_id).state == "pending"
    assert hg.jobs.get(job_id).payload == {"team": 7}
    again = _json(
        capsys, "schedules", "enqueue-now", "nightly", "--db", store_url, "--idempotency-key", key
    )
    assert again == {"id": job_id, "replayed": True, "idempotency_key": key}
    other = _json(capsys, "schedules", "enqueue-now", "nightly", "--db", store_url)
    assert other["id"] != job_id and other["replayed"] is False
    assert len(hg.jobs.list().jobs) == 2
    assert hg.runtime.lease() is None, "no command starts the runtime"


def test_schedules_put_takes_bounds_and_jitter(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    status, out, _ = _run(
        capsys,
        *("schedules", "put", "b", "--db", store_url, "--spec", "@hourly", "--kind", "k"),
        *("--start-at-ms", "7200000", "--end-at-ms", "36000000", "--jitter-ms", "500"),
    )
    assert status == 0
    assert "jitter" in out and "1970-01-01T02:00:00Z" in out and "1970-01-01T10:00:00Z" in out
    stored = hg.schedules.get("b")
    assert (stored.spec, stored.start_at_ms, stored.end_at_ms, stored.jitter_ms) == (
        "0 * * * *",
        7_200_000,
        36_000_000,
        500,
    )
    status, _, err = _run(
        capsys,
        *("schedules", "put", "b", "--db", store_url, "--spec", "@hourly", "--kind", "k"),
        *("--start-at-ms", "7200000", "--end-at-ms", "7200000"),
    )
    assert status == 2 and "end_at_ms: must be after start_at_ms" in err


def test_bad_schedule_input_exits_2_and_changes_nothing(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
    before = _event_count(store_url)
    put = ("schedules", "put", "nightly", "--db", store_url, "--kind", "k")
    for extra, error in (
        (("--spec", "@every:1000", "--payload", "{bad"), "error: --payload: is not valid JSON"),
        (("--spec", "@every:1000", "--payload", "NaN"), "error: --payload: is not valid JSON"),
        (("--spec", "61 * * * *"), "error: spec: bad cron '61 * * * *'"),
        (("--spec", "@every:1000", "--queue", "a b"), "error: queue: may contain only"),
        (("--spec", "@every:1000", "--queue", "a\n"), "error: queue: may contain only"),
        (("--spec", "@every:1000", "--kind", "k\n"), "error: kind: must not contain control"),
        (("--spec", "@every:1000", "--kind", "k "), "error: kind: must not start or end"),
    ):
        status, out, err = _run(capsys, *put, *extra)
        assert (status, out) == (2, ""), err
        assert err.startswith(error) and err.count("\n") == 1, err
    with pytest.raises(SystemExit) as exited:
        main([*put, "--spec", "@every:1000", "--on-missed", "never"])
    assert exited.value.code == 2
    assert _event_count(store_url) == before
    assert hg.schedules.get("nightly").spec == "0 9 * * *"


def test_schedules_put_holds_specs_to_the_minimum_interval(
    store_url: str, hg: Headgate, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    put = ("schedules", "put", "fast", "--db", store_url, "--kind", "k")
    before = _event_count(store_url)
    status, out, err = _run(capsys, *put, "--spec", "@every:500")
    assert (status, out) == (2, "")
    assert err == (
        "error: spec: interval 500 ms is below the minimum of 1000 ms "
        "(RuntimeConfig.min_interval_ms)\n"
    )
    assert _event_count(store_url) == before
    assert _json(capsys, *put, "--spec", "@every:500ms", "--min-interval-ms", "500")["spec"] == (
        "@every:500"
    )
    monkeypatch.setenv("HEADGATE_MIN_INTERVAL_MS", "250")
    assert _json(capsys, *put, "--spec", "@every:0.25s")["spec"] == "@every:250"
    monkeypatch.setenv("HEADGATE_MIN_INTERVAL_MS", "-1")
    status, _, err = _run(capsys, *put, "--spec", "@every:250")
    assert (status, err) == (
        2,
        "error: HEADGATE_MIN_INTERVAL_MS: must be a whole number from 1 to 60000\n",
    )
    assert hg.schedules.get("fast").spec == "@every:250"


def test_names_stored_before_the_rules_are_operated_and_printed_on_one_line(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    from headgate._domain.events import FingerprintQuarantined
    from headgate._domain.streams import quarantine_stream
    from headgate._store.port import NO_STREAM
    from tests.store.builders import defined

    log = hg._core.store.log
    log.append(schedule_stream("abc\n"), NO_STREAM, [defined("abc\n", payload={"s": "a\u2028b"})])
    log.append(quarantine_stream("zzz\n"), NO_STREAM, [FingerprintQuarantined("zzz\n", "old")])
    status, out, _ = _run(capsys, "schedules", "show", "abc\n", "--db", store_url)
    assert status == 0 and "id:             abc\\n\n" in out
    assert 'payload:        {"s": "a\\u2028b"}\n' in out
    status, out, _ = _run(capsys, "schedules", "pause", "abc\n", "--db", store_url)
    assert status == 0 and out.startswith("paused schedule abc\\n\n")
    status, out, _ = _run(capsys, "schedules", "delete", "abc\n", "--db", store_url)
    assert (status, out) == (0, "deleted schedule abc\\n (its enqueue history stays)\n")
    status, out, _ = _run(capsys, "quarantine", "release", "zzz\n", "--db", store_url)
    assert (status, out) == (0, "released zzz\\n: its jobs are admitted again\n")
    assert hg.quarantine.list().entries == [] and hg.schedules.list().schedules == []


# jobs ------------------------------------------------------------------------


def test_jobs_list_filters_and_pages(store_url: str, hg: Headgate, capsys: Capture) -> None:
    _ticked(store_url)
    mine = hg.enqueue("mail.send", {"to": "a@example.com"}, queue="mail")
    status, out, _ = _run(capsys, "jobs", "list", "--db", store_url)
    header, *rows = out.splitlines()
    assert header.split() == [
        *("ID", "KIND", "QUEUE", "STATE", "ATTEMPTS", "CRASHES", "RUN", "AT", "CREATED", "FROM"),
    ]
    ticked = {"job-for-s0-120000", "job-for-s0-60000"}
    assert rows[0].split()[0] == mine.id and {row.split()[0] for row in rows[1:]} == ticked
    assert rows[0].split()[1:6] == ["mail.send", "mail", "pending", "0", "0"]

    only = _json(capsys, "jobs", "list", "--db", store_url, "--schedule", "s0", "--limit", "1")
    assert set(only) == {"jobs", "next_cursor"}
    [first] = only["jobs"]
    assert set(first) == set(JobOut.model_fields)
    assert first["periodic_origin"] == {"schedule_id": "s0", "tick_ms": int(first["id"][11:])}
    status, out, _ = _run(
        capsys, "jobs", "list", "--db", store_url, "--schedule", "s0", "--limit", "1"
    )
    assert out.splitlines()[-1] == f"next page: --cursor {only['next_cursor']}"
    rest = _json(
        capsys, "jobs", "list", "--db", store_url, "--schedule", "s0",
        "--cursor", only["next_cursor"],
    )  # fmt: skip
    assert {first["id"], *(j["id"] for j in rest["jobs"])} == ticked
    assert len(rest["jobs"]) == 1 and rest["next_cursor"] is None

    for flags, ids in (
        (("--queue", "mail"), [mine.id]),
        (("--kind", "report.build"), [r.split()[0] for r in rows[1:]]),
        (("--state", "completed"), []),
    ):
        found = _json(capsys, "jobs", "list", "--db", store_url, *flags)
        assert [j["id"] for j in found["jobs"]] == ids
    status, out, _ = _run(capsys, "jobs", "list", "--db", store_url, "--state", "failed")
    assert (status, out) == (0, "no jobs\n")


def test_jobs_show_and_the_api_say_the_limits_a_job_ran_under_whoever_enqueued_it(
    store_url: str, capsys: Capture
) -> None:
    """Enqueued by a process without its handler (as the CLI or the API is), a job
    runs under its handler's attempt limit and timeout: once an attempt ends,
    every process shows those, not Headgate's defaults or nothing."""
    with Headgate(store_url) as producer:
        job = producer.enqueue("mail.send", {"to": "a@example.com"}, queue="default")
        before = producer.jobs.get(job.id)
        assert (before.max_attempts, before.timeout_ms) == (None, None)
    with Headgate(store_url) as worker:

        @worker.handler("mail.send", max_attempts=3, timeout_s=20)
        def send(job: JobContext) -> None:
            raise ConnectionError("smtp down")

        worker.drain()
    status, out, _ = _run(capsys, "jobs", "show", job.id, "--db", store_url)
    assert status == 0
    assert "max attempts:   3\n" in out
    assert "timeout:        20000 ms\n" in out
    shown = _json(capsys, "jobs", "show", job.id, "--db", store_url)
    assert (shown["max_attempts"], shown["timeout_ms"]) == (3, 20_000)
    with Headgate(store_url) as reader:
        ran = reader.jobs.get(job.id)
        assert (ran.max_attempts, ran.timeout_ms, ran.attempts) == (3, 20_000, 1)


def test_jobs_show_has_the_attempts_and_their_errors(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    @hg.handler("mail.send")
    def send(job: JobContext) -> None:
        raise ConnectionError("smtp down\n\x1b[2Jagain")

    job = hg.enqueue("mail.send", {"to": "a@example.com"}, max_attempts=1)
    hg.drain()
    status, out, _ = _run(capsys, "jobs", "show", job.id, "--db", store_url)
    assert status == 0
    assert "state:          failed" in out
    assert "max attempts:   1\n" in out
    assert "timeout:        1800000 ms\n" in out, "what its attempt ran under"
    assert "running:        -\n" in out
    assert 'payload:        {"to": "a@example.com"}' in out
    assert "error:          ConnectionError: smtp down\\n\\x1b[2Jagain" in out
    fingerprint = hg.quarantine.fingerprint("mail.send", {"to": "a@example.com"})
    assert f"fingerprint:    {fingerprint}\n" in out
    attempts = out[out.index("attempts (newest first):") :].splitlines()
    assert attempts[1].split() == [
        "#",
        "OUTCOME",
        "WORKER",
        "STARTED",
        "ENDED",
        "DURATION",
        "ERROR",
    ]
    assert attempts[2].split()[:2] == ["1", "failed"]
    assert "\x1b" not in out, "stored text cannot drive the terminal"

    shown = _json(capsys, "jobs", "show", job.id, "--db", store_url)
    assert set(shown) == set(JobOut.model_fields)
    assert shown["payload"] == {"to": "a@example.com"} and shown["state"] == "failed"
    assert shown["fingerprint"] == fingerprint
    assert [a["outcome"] for a in shown["attempt_history"]] == ["failed"]
    assert shown["attempt_history"][0]["error_type"] == "ConnectionError"


def test_cancel_and_retry(store_url: str, hg: Headgate, capsys: Capture) -> None:
    job = hg.enqueue("mail.send", {"to": "a@example.com"})
    status, out, _ = _run(capsys, "jobs", "cancel", job.id, "--db", store_url)
    assert status == 0 and out.startswith(f"cancelled job {job.id}\n")
    assert hg.jobs.get(job.id).state == "cancelled"
    before = _event_count(store_url)
    status, out, err = _run(capsys, "jobs", "cancel", job.id, "--db", store_url)
    assert (status, out) == (1, "")
    assert err == (
        f"error: cannot cancel job {job.id}: it is cancelled "
        "(cancel needs a pending or running job)\n"
    )
    assert _event_count(store_url) == before

    retried = _json(capsys, "jobs", "retry", job.id, "--db", store_url)
    assert set(retried) == set(JobOut.model_fields) and retried["state"] == "pending"
    assert hg.jobs.get(job.id).state == "pending"
    status, _, err = _run(capsys, "jobs", "retry", job.id, "--db", store_url)
    assert status == 1 and err.startswith(f"error: cannot retry job {job.id}")
    for action in ("show", "cancel", "retry"):
        status, out, err = _run(capsys, "jobs", action, "nope", "--db", store_url)
        assert (status, out, err) == (1, "", "error: no job 'nope'\n")


# quarantine ------------------------------------------------------------------


def test_quarantine_add_list_and_release(store_url: str, hg: Headgate, capsys: Capture) -> None:
    fingerprint = hg.quarantine.fingerprint("mail.send", {"to": "poison"})
    status, out, _ = _run(capsys, "quarantine", "list", "--db", store_url)
    assert (status, out) == (0, "nothing is quarantined\n")
    added = _json(
        capsys, "quarantine", "add", fingerprint, "--note", "crashes parsers", "--db", store_url
    )
    assert set(added) == set(QuarantineOut.model_fields)
    assert added["note"] == "crashes parsers"
    entry = hg.quarantine.get(fingerprint)
    assert entry is not None and entry.note == "crashes parsers"

    status, out, _ = _run(capsys, "quarantine", "list", "--db", store_url)
    header, row = out.splitlines()
    assert header.split() == ["FINGERPRINT", "KIND", "SAMPLE", "JOB", "SINCE", "WHY"]
    assert row.startswith(fingerprint) and row.endswith("crashes parsers")
    listed = _json(capsys, "quarantine", "list", "--db", store_url)
    assert listed == {"entries": [added], "next_cursor": None}

    assert _json(capsys, "quarantine", "release", fingerprint, "--db", store_url) == {
        "fingerprint": fingerprint,
        "released": True,
    }
    assert hg.quarantine.get(fingerprint) is None
    status, out, err = _run(capsys, "quarantine", "release", fingerprint, "--db", store_url)
    assert (status, out, err) == (1, "", f"error: fingerprint {fingerprint} is not quarantined\n")
    status, _, err = _run(capsys, "quarantine", "add", "a b", "--db", store_url)
    assert status == 2 and err.startswith("error: fingerprint: must be 32 lowercase hexadecimal")


# as a process ----------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["jobs", "show", "nope"], 1, "error: no job 'nope'"),
        (["jobs", "cancel", "{job}"], 1, "error: cannot cancel job"),
        (
            ["quarantine", "release", "0" * 32],
            1,
            f"error: fingerprint {'0' * 32} is not quarantined",
        ),
        (["quarantine", "release", "abc"], 2, "error: fingerprint: must be 32 lowercase hex"),
        (["quarantine", "add", "abc", "--note", "x"], 2, "error: fingerprint: must be 32 lower"),
        (["quarantine", "add", "zzz\n"], 2, "error: fingerprint: must be 32 lowercase hex"),
        (
            ["schedules", "put", "abc\n", "--spec", "@every:60000", "--kind", "k"],
            2,
            "error: id: may contain only letters, digits and . _ : - and must start with a "
            "letter or digit; found U+000A (a control character) at index 3",
        ),
        (
            ["schedules", "enqueue-now", "s", "--idempotency-key", "k\n"],
            2,
            "error: Idempotency-Key: must not contain control or invisible characters",
        ),
        (
            ["schedules", "put", "x", "--spec", "@every:1000", "--kind", "k", "--payload", "{"],
            2,
            "error: --payload: is not valid JSON",
        ),
        (["schedules", "put", "x", "--spec", "@every:1000", "--kind", ""], 2, "error: kind:"),
        (["jobs", "list", "--limit", "0"], 2, "error: headgate jobs list: argument --limit"),
        (["schedules", "pause"], 2, "error: headgate schedules pause: the following arguments"),
    ],
)
def test_exit_status_and_one_line_errors(
    argv: list[str], code: int, message: str, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with Headgate(db) as client:
        job = client.enqueue("k")
        client.jobs.cancel(job.id)
    status = subprocess.run(
        [sys.executable, "-m", "headgate", *[a.replace("{job}", job.id) for a in argv], "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (status.returncode, status.stdout) == (code, ""), status.stderr
    assert status.stderr.startswith(message), status.stderr
    assert len(status.stderr.strip().splitlines()) == 1 and "Traceback" not in status.stderr


@pytest.mark.processes
def test_the_command_line_starts_without_the_web_stack() -> None:
    """Only `serve` (and --json output) imports FastAPI and uvicorn."""
    probe = (
        "import sys; from headgate.cli._main import build_parser; build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'uvicorn', 'starlette'}))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "argv",
    [
        ["schedules", "list"],
        ["schedules", "put", "s", "--spec", "@every:1000", "--kind", "k"],
        ["jobs", "list"],
        ["jobs", "cancel", "j"],
        ["quarantine", "list"],
        ["quarantine", "add", "fp"],
    ],
    ids=" ".join,
)
def test_operator_commands_never_create_a_store(
    argv: list[str], store_url: str, capsys: Capture
) -> None:
    """A mistyped --db is an error naming the URL, not a new empty store."""
    status, out, err = _run(capsys, *argv, "--db", store_url)
    assert (status, out) == (1, "")
    assert err.startswith("error: no Headgate store at ") and len(err.splitlines()) == 1
    if store_url.startswith("sqlite"):
        assert not Path(store_url.removeprefix("sqlite:///")).exists()
    else:
        engine = create_engine(store_url)
        try:
            assert inspect(engine).get_table_names() == []
        finally:
            engine.dispose()


def test_jobs_list_of_a_schedule_includes_its_manual_runs_marked(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    _ticked(store_url)
    manual = hg.schedules.enqueue_now("s0", "k-1")
    hg.enqueue("other", None)
    status, out, _ = _run(capsys, "jobs", "list", "--db", store_url, "--schedule", "s0")
    assert status == 0
    shown = {row.split()[0]: row.split()[-1] for row in out.splitlines()[1:]}
    assert shown == {
        manual.job_id: "manual",
        "job-for-s0-60000": "tick",
        "job-for-s0-120000": "tick",
    }
    paged = _json(capsys, "jobs", "list", "--db", store_url, "--schedule", "s0", "--limit", "2")
    rest = _json(
        capsys, "jobs", "list", "--db", store_url, "--schedule", "s0",
        "--cursor", paged["next_cursor"],
    )  # fmt: skip
    assert len(paged["jobs"]) + len(rest["jobs"]) == 3
    assert [j["run_now_schedule_id"] for j in paged["jobs"] + rest["jobs"]].count("s0") == 1


def test_schedules_show_of_a_deleted_schedule_shows_it_and_its_history(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    _ticked(store_url)
    hg.schedules.delete("s0")
    status, out, _ = _run(capsys, "schedules", "show", "s0", "--db", store_url)
    assert status == 0
    assert out.startswith("deleted: ")
    assert "job-for-s0-120000" in out
    shown = _json(capsys, "schedules", "show", "s0", "--db", store_url)
    assert shown["deleted"] is True
    assert len(shown["enqueue_events"]) == 2


# queues ----------------------------------------------------------------------


def test_queues_pause_list_and_resume(store_url: str, hg: Headgate, capsys: Capture) -> None:
    hg.enqueue("report.build", queue="reports")
    db = ("--db", store_url)
    status, out, _ = _run(capsys, "queues", "pause", "reports", "--note", "db upgrade", *db)
    assert status == 0
    assert out == (
        "queue reports paused: no worker claims its jobs until it is resumed (1 pending)\n"
    )
    status, out, _ = _run(capsys, "queues", "list", *db)
    assert status == 0
    header, row = out.splitlines()
    assert header.split() == ["QUEUE", "PAUSED", "PENDING", "RUNNING", "WHY"]
    assert row.split()[0] == "reports" and row.split()[1] == "since"
    assert row.split()[-3:] == ["0", "db", "upgrade"]
    listed = _json(capsys, "queues", "list", *db)["queues"]
    assert [(q["name"], q["paused"], q["pending"], q["note"]) for q in listed] == [
        ("reports", True, 1, "db upgrade")
    ]
    assert [q.name for q in hg.queues.list() if q.paused] == ["reports"]
    resumed = _json(capsys, "queues", "resume", "reports", *db)
    assert (resumed["name"], resumed["paused"], resumed["note"]) == ("reports", False, "")
    assert not any(q.paused for q in hg.queues.list())


def test_a_bad_queue_name_is_exit_2_naming_it(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    hg.enqueue("report.build")
    head = _event_count(store_url)
    status, _, err = _run(capsys, "queues", "pause", "no spaces", "--db", store_url)
    assert status == 2 and err.startswith("error: queue: may contain only"), err
    assert _event_count(store_url) == head


def test_limits_set_list_and_clear(store_url: str, hg: Headgate, capsys: Capture) -> None:
    db = ("--db", store_url)
    argv = ("limits", "set", "--queue", "reports", "--partition-key", "*", "2", *db)
    status, out, _ = _run(capsys, *argv)
    assert (status, out) == (
        0,
        "limit 2 on queue reports, kind any, partition each key (0 running)\n",
    )
    status, out, _ = _run(capsys, "limits", "list", *db)
    header, row = out.splitlines()
    assert header.split() == ["QUEUE", "KIND", "PARTITION", "RUNNING", "LIMIT", "BUSIEST", "SET"]
    assert row.split()[:7] == ["reports", "any", "each", "key", "0", "2", "per"]
    [listed] = _json(capsys, "limits", "list", *db)["limits"]
    assert (listed["queue"], listed["partition_key"], listed["limit"]) == ("reports", "*", 2)
    assert (
        _run(capsys, "limits", "clear", "--queue", "reports", "--partition-key", "*", *db)[0] == 0
    )
    assert hg.limits.list() == []
    assert _run(capsys, "limits", "clear", "--queue", "reports", *db) == (
        1,
        "",
        "error: no limit on that scope\n",
    )
    status, _, err = _run(capsys, "limits", "set", "--queue", "reports", "-3", *db)
    assert status == 2 and err.startswith("error: limit"), err


def test_rate_limits_set_list_and_clear(store_url: str, hg: Headgate, capsys: Capture) -> None:
    db = ("--db", store_url)
    argv = ("rates", "set", "mail-api", "--limit", "30", "--per-ms", "60000", *db)
    status, out, _ = _run(capsys, *argv)
    assert (status, out) == (
        0,
        "rate class mail-api: at most 30 starts per 60000 ms (0 in the window now)\n",
    )
    [listed] = _json(capsys, "rates", "list", *db)["rate_limits"]
    assert (listed["rate_class"], listed["limit"], listed["per_ms"]) == ("mail-api", 30, 60_000)
    assert _run(capsys, "rate-limits", "clear", "mail-api", *db)[0] == 0
    assert hg.rates.list() == []
    status, _, err = _run(capsys, "rates", "set", "mail-api", "--limit", "0", "--per-ms", "1", *db)
    assert status == 2 and err.startswith("error: limit"), err


def test_jobs_show_says_what_a_held_job_waits_for(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    hg.limits.set(partition_key="tenant-7", limit=0)
    job = hg.enqueue("report.build", partition_key="tenant-7", rate_class="pdf")
    status, out, _ = _run(capsys, "jobs", "show", job.id, "--db", store_url)
    assert status == 0
    assert "partition key:  tenant-7" in out and "rate class:     pdf" in out
    assert "waiting for:    concurrency limit 0 on queue=* kind=* partition=tenant-7" in out


def test_jobs_unserved_lists_pending_work_no_worker_runs(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    db = ("--db", store_url)
    status, out, _ = _run(capsys, "jobs", "unserved", *db)
    assert (status, out) == (0, "every pending job has a live worker to run it\n")
    hg.enqueue("report.build", queue="reports")
    status, out, _ = _run(capsys, "jobs", "unserved", *db)
    header, row = out.splitlines()
    assert header.split() == ["QUEUE", "KIND", "PENDING", "WHY"]
    assert row.split() == ["reports", "report.build", "1", "no", "worker", "is", "running"]
    listed = _json(capsys, "jobs", "unserved", *db)["unserved"]
    assert listed == [
        {"queue": "reports", "kind": "report.build", "pending": 1, "reason": "no worker is running"}
    ]


def test_jobs_retry_all_takes_the_filtered_jobs_after_asking(
    store_url: str, hg: Headgate, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`jobs retry --all`: the count asked about on a terminal, nothing done
    without a yes (or, in a script, without --yes); then each job retried."""
    mails = [hg.enqueue("mail.send", {"n": n}).id for n in range(3)]
    report = hg.enqueue("report.build").id
    for job_id in [*mails, report]:
        finish_job(hg, job_id, "failed")
    status, _, err = _run(capsys, "jobs", "retry", "--all", "--state", "failed", "--db", store_url)
    assert status == 1 and "add --yes" in err, "no terminal: not asked, not done"

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda question: asked.append(question) or "n")
    args = ("jobs", "retry", "--all", "--state", "failed", "--kind", "mail.send", "--db", store_url)
    status, _, err = _run(capsys, *args)
    assert status == 1 and "nothing changed" in err
    assert asked == ["retry 3 of the 3 failed jobs matching, newest first? [y/N] "]
    assert {hg.jobs.get(job_id).state for job_id in mails} == {"failed"}

    monkeypatch.setattr("builtins.input", lambda _: "y")
    status, out, _ = _run(capsys, *args)
    assert (status, out) == (0, "retried 3 jobs; skipped 0 that changed state meanwhile\n")
    assert {hg.jobs.get(job_id).state for job_id in mails} == {"pending"}
    assert hg.jobs.get(report).state == "failed"

    cancelled = _json(
        capsys,
        "jobs",
        "cancel",
        "--all",
        "--state",
        "pending",
        "--yes",
        "--limit",
        "2",
        "--db",
        store_url,
    )
    assert (cancelled["action"], cancelled["changed"], cancelled["more"]) == ("cancel", 2, True)
    status, out, _ = _run(capsys, "jobs", "count", "--kind", "mail.send", "--db", store_url)
    counts = dict(line.split() for line in out.splitlines()[1:])
    assert (counts["cancelled"], counts["pending"], counts["failed"]) == ("2", "1", "0")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("jobs", "retry"), "ID: give one job ID, or --all"),
        (("jobs", "retry", "j1", "--all"), "ID: give one job ID or --all with filters, not both"),
        (("jobs", "retry", "j1", "--kind", "k"), "--kind: filters choose the jobs of --all"),
        (("jobs", "cancel", "--all", "--yes"), "--state: --all needs the state"),
        (("jobs", "cancel", "--all", "--state", "failed", "--yes"), "state: a bulk cancel names"),
    ],
)
def test_jobs_retry_and_cancel_say_what_they_need(
    store_url: str, hg: Headgate, capsys: Capture, argv: tuple[str, ...], said: str
) -> None:
    status, _, err = _run(capsys, *argv, "--db", store_url)
    assert status != 0 and said in err, err
