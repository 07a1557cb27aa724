"""The API's former paths (the spec's `/api/v1/periodic/...`, a schedule's
`/run`, `/api/v1/rate-limits/...`) answer exactly as the paths they were renamed
to, behind the same Host check, write guard and token; the OpenAPI document
names the paths now alone."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from headgate.web._renamed import path_now

NIGHTLY = {"spec": "0 9 * * *", "kind": "report.build"}


@pytest.mark.parametrize(
    ("former", "now"),
    [
        ("/api/v1/periodic", "/api/v1/schedules"),
        ("/api/v1/periodic:bulk", "/api/v1/schedules:bulk"),
        ("/api/v1/periodic/a/enqueue-events", "/api/v1/schedules/a/enqueue-events"),
        ("/api/v1/periodic/a/run", "/api/v1/schedules/a/enqueue-now"),
        ("/api/v1/periodic/run", "/api/v1/schedules/run"),
        ("/api/v1/rate-limits/mail", "/api/v1/rates/mail"),
        ("/api/v1/periodicals", "/api/v1/periodicals"),
        ("/api/v1/jobs/a/run", "/api/v1/jobs/a/run"),
        ("/periodic", "/periodic"),
    ],
)
def test_a_former_path_is_the_path_now(former: str, now: str) -> None:
    assert path_now(former) == now


def test_the_spec_paths_answer_as_the_paths_now(client: TestClient) -> None:
    assert client.put("/api/v1/periodic/nightly", json=NIGHTLY).status_code == 201
    run = client.post("/api/v1/periodic/nightly/run", headers={"Idempotency-Key": "k1"})
    now = client.post("/api/v1/schedules/nightly/enqueue-now", headers={"Idempotency-Key": "k1"})
    assert run.status_code == now.status_code
    assert run.json()["id"] == now.json()["id"]
    spec = client.get("/api/v1/periodic/nightly/enqueue-events?limit=30")
    assert spec.status_code == 200
    assert spec.json() == client.get("/api/v1/schedules/nightly/enqueue-events?limit=30").json()
    assert (
        client.get("/api/v1/periodic/nightly").json()
        == client.get("/api/v1/schedules/nightly").json()
    )
    assert client.put(
        "/api/v1/rate-limits/mail", json={"limit": 3, "per_ms": 1000}
    ).status_code in (
        200,
        201,
    )
    assert [r["rate_class"] for r in client.get("/api/v1/rates").json()["rate_limits"]] == ["mail"]


def test_a_former_path_keeps_the_write_guard(client: TestClient) -> None:
    refused = client.put(
        "/api/v1/periodic/nightly", json=NIGHTLY, headers={"Origin": "https://evil.example"}
    )
    assert refused.status_code == 403
    assert client.get("/api/v1/schedules/nightly").status_code == 404


def test_the_api_document_names_the_paths_now_alone(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path_now(path) != path]
    assert "/api/v1/schedules/{schedule_id}/enqueue-events" in paths
