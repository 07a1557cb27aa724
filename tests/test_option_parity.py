"""Every option exists once, in the domain, and every surface carries all of it.

A schedule's definition (`ScheduleDefinition`, flat: `SCHEDULE_FIELDS`) and a
job's options (`JobOptions`) are each set to a value other than their default
through Python, the HTTP API, the command line and the console's form, and
read back through each. A field added to the domain fails here until it has a
sample value below, and then fails on any surface that drops it.
"""

from __future__ import annotations

import dataclasses
import html
import inspect
import json
import re
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate._domain.option_keywords import EnqueueArgs, JobOptionArgs, ScheduleArgs
from headgate._domain.options import (
    JOB_OPTION_FIELDS,
    PER_JOB_FIELDS,
    SCHEDULE_DEFAULTS,
    SCHEDULE_FIELDS,
    JobOptions,
    ScheduleDefinition,
    option_info,
)
from headgate._domain.read_fields import JOB_READ, SCHEDULE_READ, ReadField, read_field
from headgate._facade.schedules import Schedules
from headgate._model import Job, Schedule
from headgate._operator import operator_of
from headgate._wire.jobs import JobIn, JobOut
from headgate._wire.schedules import ScheduleChangesIn, ScheduleIn, ScheduleItemIn, ScheduleOut
from headgate.cli import main
from headgate.testing import FakeClock
from headgate.web import create_app

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SCHEDULE_SAMPLE: dict[str, Any] = {
    "spec": "@every:60000",
    "kind": "report.build",
    "summary": "Builds each tenant's nightly report",
    "payload": {"tenant": 7},
    "on_missed": "backfill",
    "backfill_max": 3,
    "paused": True,
    "start_at_ms": START_MS + 3_600_000,
    "end_at_ms": START_MS + 86_400_000,
    "jitter_ms": 500,
    "queue": "reports",
    "max_attempts": 5,
    "timeout_ms": 60_000,
    "priority": 5,
    "overlap": "buffer_one",
    "start_within_ms": 90_000,
    "partition_key": "tenant-7",
    "rate_class": "mail-api",
}
"""A value other than its default for every field of a schedule's definition."""
JOB_SAMPLE: dict[str, Any] = {
    "queue": "reports",
    "max_attempts": 3,
    "timeout_ms": 2_000,
    "priority": -3,
    "start_within_ms": 45_000,
    "partition_key": "tenant-7",
    "rate_class": "mail-api",
    "run_at_ms": START_MS + 60_000,
    "unique_key": "order-7",
    "tags": ["billing", "tenant-7"],
}
"""A value for every job option."""


def test_every_field_has_a_sample_that_is_not_its_default() -> None:
    assert set(SCHEDULE_SAMPLE) == set(SCHEDULE_FIELDS)
    assert set(JOB_SAMPLE) == set(JOB_OPTION_FIELDS)
    for name, value in SCHEDULE_SAMPLE.items():
        assert SCHEDULE_DEFAULTS.get(name, object()) != value, name


# Python ------------------------------------------------------------------------


def _keywords(function: Any, typed: type[Any]) -> set[str]:
    named = {
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    return named | set(typing.get_type_hints(typed))


@pytest.mark.parametrize(
    ("function", "typed"),
    [
        (Schedules.put, ScheduleArgs),
        (Schedules.update, ScheduleArgs),
        (Headgate.periodic, ScheduleArgs),
    ],
)
def test_python_schedule_methods_take_every_field(function: Any, typed: type[Any]) -> None:
    assert set(SCHEDULE_FIELDS) <= _keywords(function, typed)


def test_python_job_methods_take_every_option() -> None:
    assert set(JOB_OPTION_FIELDS) <= _keywords(Headgate.enqueue, EnqueueArgs)
    shared = set(JOB_OPTION_FIELDS) - set(PER_JOB_FIELDS)
    assert shared <= _keywords(Headgate.handler, JobOptionArgs)


def test_public_models_hold_every_field_the_domain_describes() -> None:
    """The read types hold what the domain describes of a read, no more, no less,
    and an option is typed on them as the domain types it (a job's never None
    where every job has one)."""
    assert [f.name for f in SCHEDULE_READ if f.option] == list(SCHEDULE_FIELDS)
    assert [f.name for f in JOB_READ if f.option] == list(JOB_OPTION_FIELDS)
    assert {f.name for f in dataclasses.fields(Schedule)} == {f.name for f in SCHEDULE_READ}
    assert {f.name for f in dataclasses.fields(Job)} == {f.name for f in JOB_READ}
    job_types = typing.get_type_hints(Job)
    for name, annotation in typing.get_type_hints(JobOptions).items():
        expected = annotation
        if option_info(JobOptions, name).on_every_job:
            expected = next(a for a in typing.get_args(annotation) if a is not type(None))
        assert job_types[name] == expected, name


def _doc(fields: tuple[ReadField, ...], name: str) -> str:
    return read_field(fields, name).doc


def test_each_option_is_described_once_for_every_surface() -> None:
    for name in JOB_OPTION_FIELDS:
        assert _doc(JOB_READ, name) == option_info(JobOptions, name).doc, name
        assert JobIn.model_fields[name].description == _doc(JOB_READ, name), name
    for field in JOB_READ:
        assert field.doc, field.name
        assert JobOut.model_fields[field.name].description == field.doc, field.name
    for field in SCHEDULE_READ:
        assert field.doc, field.name
        assert ScheduleOut.model_fields[field.name].description == field.doc, field.name
    for name in SCHEDULE_FIELDS:
        for body in (ScheduleIn, ScheduleChangesIn, ScheduleItemIn):
            assert body.model_fields[name].description == _doc(SCHEDULE_READ, name), name


@pytest.fixture
def hg(store_url: str) -> Iterator[Headgate]:
    clock = FakeClock(START_MS)
    with Headgate(store_url, clock=clock) as headgate:
        yield headgate


def _assert_schedule(schedule: Schedule | dict[str, Any]) -> None:
    read = schedule if isinstance(schedule, dict) else schedule.__dict__
    assert {name: read[name] for name in SCHEDULE_FIELDS} == SCHEDULE_SAMPLE


def _assert_job(job: Job | dict[str, Any]) -> None:
    read = job if isinstance(job, dict) else job.__dict__
    plain = {name: read[name] for name in JOB_OPTION_FIELDS}
    assert {k: list(v) if isinstance(v, tuple) else v for k, v in plain.items()} == JOB_SAMPLE


def test_python_round_trips_every_field(hg: Headgate) -> None:
    _assert_schedule(hg.schedules.put("nightly", **SCHEDULE_SAMPLE))
    _assert_schedule(hg.schedules.get("nightly"))
    sample = ScheduleDefinition.from_fields(SCHEDULE_SAMPLE)
    assert hg.schedules.get("nightly").definition.same_as(sample)
    assert operator_of(hg).put_definition("nightly", sample).outcome == "unchanged"
    hg.schedules.put("other", spec="@every:5000", kind="k")
    changes = {name: value for name, value in SCHEDULE_SAMPLE.items()}
    _assert_schedule(hg.schedules.update("other", **changes))
    _assert_job(hg.enqueue("send", {"to": "a"}, **JOB_SAMPLE))


# HTTP API ----------------------------------------------------------------------


def test_api_bodies_carry_every_field() -> None:
    for body in (ScheduleIn, ScheduleChangesIn, ScheduleItemIn):
        assert set(SCHEDULE_FIELDS) <= set(body.model_fields), body
    assert set(SCHEDULE_FIELDS) <= set(ScheduleOut.model_fields)
    assert set(JOB_OPTION_FIELDS) <= set(JobIn.model_fields)
    assert set(JOB_OPTION_FIELDS) <= set(JobOut.model_fields)


@pytest.fixture
def client(hg: Headgate) -> Iterator[TestClient]:
    with TestClient(create_app(hg, api_token=""), base_url="http://127.0.0.1") as test_client:
        yield test_client


def test_api_round_trips_every_field(client: TestClient) -> None:
    created = client.put("/api/v1/periodic/nightly", json=SCHEDULE_SAMPLE)
    assert created.status_code == 201, created.text
    _assert_schedule(created.json())
    _assert_schedule(client.get("/api/v1/periodic/nightly").json())
    client.put("/api/v1/periodic/other", json={"spec": "@every:5000", "kind": "k"})
    patched = client.patch("/api/v1/periodic/other", json=SCHEDULE_SAMPLE)
    assert patched.status_code == 200, patched.text
    _assert_schedule(patched.json())
    bulk = client.post(
        "/api/v1/periodic:bulk", json={"schedules": [{"id": "third", **SCHEDULE_SAMPLE}]}
    )
    assert bulk.status_code == 201, bulk.text
    _assert_schedule(client.get("/api/v1/periodic/third").json())
    job = client.post("/api/v1/jobs", json={"kind": "send", "payload": None, **JOB_SAMPLE})
    assert job.status_code == 201, job.text
    _assert_job(job.json())
    _assert_job(client.get(f"/api/v1/jobs/{job.json()['id']}").json())


def test_openapi_documents_every_field(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("ScheduleIn", "ScheduleChangesIn", "ScheduleOut"):
        properties = schemas[name]["properties"]
        assert set(SCHEDULE_FIELDS) <= set(properties), name
    assert set(JOB_OPTION_FIELDS) <= set(schemas["JobIn"]["properties"])
    for field in SCHEDULE_FIELDS:
        assert schemas["ScheduleIn"]["properties"][field].get("description"), field


def test_openapi_describes_every_read_field_as_the_domain_does(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for schema, fields in (("JobOut", JOB_READ), ("ScheduleOut", SCHEDULE_READ)):
        properties = schemas[schema]["properties"]
        for field in fields:
            assert properties[field.name]["description"] == field.doc, (schema, field.name)
    for name in JOB_OPTION_FIELDS:
        assert schemas["JobIn"]["properties"][name]["description"] == _doc(JOB_READ, name)
    for name in SCHEDULE_FIELDS:
        for schema in ("ScheduleIn", "ScheduleChangesIn", "ScheduleItemIn"):
            described = schemas[schema]["properties"][name]["description"]
            assert described == _doc(SCHEDULE_READ, name), (schema, name)


# Command line --------------------------------------------------------------------


def _flags(values: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, json.dumps(value) if isinstance(value, dict | list) else str(value)]
    return argv


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)


def test_cli_round_trips_every_field(
    hg: Headgate, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hg.schedules.put("seed", spec="@every:5000", kind="k")  # the store exists
    db = ["--db", store_url]
    _assert_schedule(
        _cli_json(capsys, "schedules", "put", "nightly", *db, *_flags(SCHEDULE_SAMPLE))
    )
    _assert_schedule(_cli_json(capsys, "schedules", "show", "nightly", *db))
    _assert_schedule(
        _cli_json(capsys, "schedules", "update", "seed", *db, *_flags(SCHEDULE_SAMPLE))
    )
    job = _cli_json(capsys, "jobs", "enqueue", "send", *db, *_flags(JOB_SAMPLE))
    _assert_job(job)
    _assert_job(_cli_json(capsys, "jobs", "show", job["id"], *db))


SCHEDULE_DEFINITION_OWN = {f.name for f in dataclasses.fields(ScheduleDefinition)}


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_cli_help_describes_every_option_as_the_domain_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, names in (
        (("jobs", "enqueue"), JOB_OPTION_FIELDS),
        (("schedules", "put"), SCHEDULE_FIELDS),
        (("schedules", "update"), SCHEDULE_FIELDS),
    ):
        text = _help(capsys, *argv)
        for name in names:
            owner = ScheduleDefinition if name in SCHEDULE_DEFINITION_OWN else JobOptions
            assert " ".join(option_info(owner, name).doc.split()) in text, (argv, name)


def _shown_labels(capsys: pytest.CaptureFixture[str], *argv: str) -> set[str]:
    assert main(list(argv)) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split(":", 1)[0] for line in lines if ":" in line}


def test_cli_show_labels_every_option_as_the_domain_does(
    hg: Headgate, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hg.schedules.put("nightly", **SCHEDULE_SAMPLE)
    job = hg.enqueue("send", {"to": "a"}, **JOB_SAMPLE)
    db = ["--db", store_url]
    shown = _shown_labels(capsys, "schedules", "show", "nightly", *db)
    assert {f.label for f in SCHEDULE_READ if f.option} <= shown
    shown = _shown_labels(capsys, "jobs", "show", job.id, *db)
    assert {f.label for f in JOB_READ if f.option} <= shown


# Console -------------------------------------------------------------------------


def test_console_shows_the_summary_on_the_list_and_the_schedule(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("nightly", **SCHEDULE_SAMPLE)
    assert "Builds each tenant&#39;s nightly report" in client.get("/").text
    assert "Builds each tenant&#39;s nightly report" in client.get("/schedules/nightly").text


def test_console_form_has_an_input_for_every_field(client: TestClient, hg: Headgate) -> None:
    hg.schedules.put("nightly", **SCHEDULE_SAMPLE)
    for path in ("/schedules/new", "/schedules/nightly/edit"):
        page = client.get(path).text
        named = set(re.findall(r'data-field="([a-z_]+)"', page))
        assert named == set(SCHEDULE_FIELDS), path
    edit = client.get("/schedules/nightly/edit").text
    assert 'value="reports"' in edit
    assert 'value="60000"' in edit


def test_console_describes_every_job_option_as_the_domain_does(
    client: TestClient, hg: Headgate
) -> None:
    job = hg.enqueue("send", None, **JOB_SAMPLE)
    page = html.unescape(client.get(f"/jobs/{job.id}").text)
    for name in JOB_OPTION_FIELDS:
        assert f'title="{_doc(JOB_READ, name)}"' in page, name


def test_console_job_page_shows_every_option(client: TestClient, hg: Headgate) -> None:
    job = hg.enqueue("send", None, **JOB_SAMPLE)
    page = client.get(f"/jobs/{job.id}").text
    assert "reports" in page
    assert "order-7" in page
    assert "3" in page
    assert "2 s" in page or "2000" in page
    assert '<dd id="priority">-3</dd>' in page
    assert '<dd id="start-by">2026-01-01 00:01:45' in page


def test_console_schedule_page_shows_its_overlap_policy_and_start_deadline(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("nightly", **SCHEDULE_SAMPLE)
    page = client.get("/schedules/nightly").text
    assert '<dd id="overlap">Buffer one behind the running one</dd>' in page
    assert "expiring unless started within 1 min 30 s of their tick" in page
