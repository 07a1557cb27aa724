"""What an operator may do to a job is one table (`_domain/lifecycle.py`): the
commands refuse by it, the API answers by it, the console offers by it."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate._domain.lifecycle import JobAction, allows, needs_text
from headgate.testing import finish_job

STATES = ("pending", "completed", "failed", "cancelled")


def _job_in(hg: Headgate, state: str) -> str:
    job = hg.enqueue("k", {"state": state})
    if state != "pending":
        finish_job(hg, job.id, state)
    return job.id


@pytest.mark.parametrize("state", STATES)
def test_the_console_offers_exactly_the_actions_the_api_takes(
    client: TestClient, hg: Headgate, state: str
) -> None:
    job_id = _job_in(hg, state)
    page = client.get(f"/jobs/{job_id}").text
    offered = set(re.findall(rf'data-path="/jobs/{job_id}/(cancel|retry)"', page))
    assert offered == {
        action.value for action in (JobAction.CANCEL, JobAction.RETRY) if allows(action, state)
    }
    for action in (JobAction.CANCEL, JobAction.RETRY):
        fresh = _job_in(hg, state)
        answer = client.post(f"/api/v1/jobs/{fresh}/{action.value}")
        if allows(action, state):
            assert answer.status_code == 200, answer.text
        else:
            assert answer.status_code == 409
            assert answer.json()["error"].endswith(f"({action.value} needs {needs_text(action)})")
