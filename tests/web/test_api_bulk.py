"""POST /api/v1/periodic:bulk: many schedules in one request, on both backends."""

from __future__ import annotations

from fastapi.testclient import TestClient

from headgate import Headgate

URL = "/api/v1/periodic:bulk"


def _item(schedule_id: str, **fields: object) -> dict[str, object]:
    return {"id": schedule_id, "kind": "report", "spec": "@every:60000", **fields}


def test_creates_with_201_then_answers_200_with_each_outcome(
    client: TestClient, hg: Headgate
) -> None:
    created = client.post(URL, json={"schedules": [_item("a"), _item("b", payload={"t": 1})]})
    assert created.status_code == 201
    assert created.json() == {
        "created": 2,
        "updated": 0,
        "unchanged": 0,
        "results": [{"id": "a", "outcome": "created"}, {"id": "b", "outcome": "created"}],
    }
    assert hg.schedules.get("b").payload == {"t": 1}
    again = client.post(URL, json={"schedules": [_item("b", paused=True), _item("a")]})
    assert again.status_code == 200
    assert again.json()["results"] == [
        {"id": "b", "outcome": "updated"},
        {"id": "a", "outcome": "unchanged"},
    ]
    assert client.get("/api/v1/periodic/b").json()["paused"] is True
    empty = client.post(URL, json={"schedules": []})
    assert (empty.status_code, empty.json()["results"]) == (200, [])


def test_a_bad_item_is_a_422_naming_it_and_nothing_is_written(
    client: TestClient, hg: Headgate
) -> None:
    good = [_item(f"s{n}") for n in range(4)]
    cases = [
        ({"spec": "61 * * * *"}, "schedules[3].spec: "),
        ({"id": "no spaces"}, "schedules[3].id: may contain only"),
        ({"backfill_max": 0}, "schedules[3].backfill_max: "),
        ({"spec": 5}, "schedules[3].spec: "),
        ({"colour": "red"}, "schedules[3].colour: is not a known field"),
    ]
    for bad, message in cases:
        items = [*good[:3], {**good[3], **bad}]
        response = client.post(URL, json={"schedules": items})
        assert response.status_code == 422, bad
        assert response.json()["error"].startswith(message), response.json()
    missing = client.post(URL, json={"schedules": [_item("a"), {"id": "b", "spec": "@every:1"}]})
    assert (missing.status_code, missing.json()) == (
        422,
        {"error": "schedules[1].kind: is required"},
    )
    twice = client.post(URL, json={"schedules": [_item("a"), _item("a")]})
    assert twice.status_code == 422
    assert twice.json()["error"].startswith("schedules[1].id: 'a' is also schedules[0]")
    assert client.post(URL, json={}).json() == {"error": "schedules: is required"}
    assert hg._core.store.log.head() == 0
    assert client.get("/api/v1/periodic").json()["schedules"] == []


def test_thousands_fit_in_the_body_limit(client: TestClient, hg: Headgate) -> None:
    items = [
        _item(f"tenant-{n}-nightly", kind="report.build", spec="0 9 * * *", payload={"tenant": n})
        for n in range(6_000)
    ]
    response = client.post(URL, json={"schedules": items})
    assert response.status_code == 201
    assert response.json()["created"] == 6_000
    assert hg.schedules.get("tenant-5999-nightly").payload == {"tenant": 5999}
