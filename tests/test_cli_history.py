"""`schedules show --as-of`, `schedules changes` and `jobs show --as-of`: the
same answers as the API's, and the command line's own changes recorded as its."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from headgate import Headgate
from headgate.cli import main

Capture = pytest.CaptureFixture[str]


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


def test_a_schedule_as_of_before_its_edit_and_its_changes(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    db = ("--db", store_url)
    put = ("schedules", "put", "nightly", "--spec", "0 2 * * *", "--kind", "report")
    assert _run(capsys, *put, "--payload", '{"token": "s3cret"}', *db)[0] == 0
    time.sleep(0.005)  # the edit a few milliseconds later
    hg.schedules.update("nightly", spec="0 3 * * *")
    created, edited = hg.schedules.changes("nightly").changes
    instant = str(created.recorded_at_ms)
    status, out, _ = _run(capsys, "schedules", "show", "nightly", "--as-of", instant, *db)
    assert status == 0 and "0 2 * * *" in out and "0 3 * * *" not in out
    assert "operator:cli" in out and "as of " in out
    body = _json(capsys, "schedules", "show", "nightly", "--as-of", instant, *db)
    assert (body["state"], body["schedule"]["spec"]) == ("defined", "0 2 * * *")
    status, out, _ = _run(capsys, "schedules", "changes", "nightly", *db)
    assert status == 0 and "s3cret" not in out
    assert "operator:cli" in out and "operator:python" in out and "0 3 * * *" in out
    since = _json(capsys, "schedules", "changes", "nightly", "--since", instant, *db)
    assert [c["what"] for c in since["changes"]] == ["changed"]
    assert edited.changed_by == "operator:python"


def test_a_bad_instant_is_a_usage_error_naming_it(
    store_url: str, hg: Headgate, capsys: Capture
) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report")
    status, _, err = _run(
        capsys, "schedules", "show", "nightly", "--as-of", "last night", "--db", store_url
    )
    assert status == 2 and "as_of: must be an instant" in err
    status, _, err = _run(
        capsys, "schedules", "changes", "nightly", "--until", "soon", "--db", store_url
    )
    assert status == 2 and "until: must be an instant" in err


def test_a_job_as_of(store_url: str, hg: Headgate, capsys: Capture) -> None:
    job = hg.enqueue("k", {"n": 1})
    enqueued = hg._core.store.log.oldest_kept(f"job-{job.id}")
    assert enqueued is not None
    at = str(enqueued.recorded_at_ms)
    status, out, _ = _run(capsys, "jobs", "show", job.id, "--as-of", at, "--db", store_url)
    assert status == 0 and "pending" in out
    body = _json(capsys, "jobs", "show", job.id, "--as-of", str(int(at) - 1), "--db", store_url)
    assert (body["state"], body["job"]) == ("not_yet", None)
