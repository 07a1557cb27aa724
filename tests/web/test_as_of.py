"""The API's and the console's "as of" reads and a schedule's changes: the past
shown as it was, who changed it by surface, payload values never in a diff, bad
instants a 4xx naming the field, and every route a read that writes nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL

MINUTE = 60_000


def _edited(client: TestClient, clock: FakeClock) -> int:
    """A schedule created through the API, then edited from the console's script
    a minute later; returns the instant just before the edit."""
    body = {"spec": "0 2 * * *", "kind": "report", "payload": {"token": "s3cret"}}
    assert client.put("/api/v1/periodic/nightly", json=body).status_code in {200, 201}
    clock.advance(MINUTE)
    before_edit = clock.now_ms() - 1
    edit = {"spec": "0 3 * * *", "payload": {"token": "n3w"}}
    response = client.patch(
        "/api/v1/periodic/nightly", json=edit, headers={"X-Headgate-Client": "console"}
    )
    assert response.status_code == 200, response.text
    return before_edit


def test_a_schedule_as_of_before_an_edit_over_the_api(client: TestClient, clock: FakeClock) -> None:
    before_edit = _edited(client, clock)
    old = client.get("/api/v1/periodic/nightly/as-of", params={"as_of": before_edit}).json()
    assert old["state"] == "defined" and old["schedule"]["spec"] == "0 2 * * *"
    assert old["changed_by"] == "operator:api"
    new = client.get("/api/v1/periodic/nightly/as-of", params={"as_of": clock.now_ms()}).json()
    assert (new["schedule"]["spec"], new["changed_by"]) == ("0 3 * * *", "operator:console")
    iso = client.get(
        "/api/v1/periodic/nightly/as-of", params={"as_of": "2024-01-01T00:00:00+00:00"}
    ).json()
    assert iso["schedule"]["spec"] == "0 2 * * *"


def test_changes_over_the_api_say_who_and_never_a_payload_value(
    client: TestClient, clock: FakeClock
) -> None:
    _edited(client, clock)
    response = client.get("/api/v1/periodic/nightly/changes")
    assert response.status_code == 200
    assert "s3cret" not in response.text and "n3w" not in response.text
    created, changed = response.json()["changes"]
    assert (created["what"], created["changed_by"]) == ("created", "operator:api")
    assert (changed["what"], changed["changed_by"]) == ("changed", "operator:console")
    fields = {f["field"]: f for f in changed["fields"]}
    assert fields["spec"]["before"] == "0 2 * * *" and fields["spec"]["after"] == "0 3 * * *"
    assert fields["payload"]["after"] == "an object with keys token (changed: token)"


def test_a_job_as_of_over_the_api(client: TestClient, hg: Headgate, clock: FakeClock) -> None:
    job = hg.enqueue("k", {"n": 1})
    before = clock.now_ms() - 1
    found = client.get(f"/api/v1/jobs/{job.id}/as-of", params={"as_of": clock.now_ms()}).json()
    assert (found["state"], found["job"]["state"]) == ("defined", "pending")
    early = client.get(f"/api/v1/jobs/{job.id}/as-of", params={"as_of": before}).json()
    assert (early["state"], early["job"]) == ("not_yet", None)
    assert client.get("/api/v1/jobs/nope/as-of", params={"as_of": 1}).status_code == 404


def test_a_bad_instant_is_a_422_naming_the_field(client: TestClient, clock: FakeClock) -> None:
    _edited(client, clock)
    for path, params, field in (
        ("/api/v1/periodic/nightly/as-of", {"as_of": "last night"}, "as_of"),
        ("/api/v1/periodic/nightly/as-of", {"as_of": "-5"}, "as_of"),
        ("/api/v1/periodic/nightly/changes", {"since": "soon"}, "since"),
        ("/api/v1/periodic/nightly/changes", {"since": "10", "until": "5"}, "until"),
        ("/api/v1/jobs/x/as-of", {"as_of": "99999999999999999999"}, "as_of"),
    ):
        response = client.get(path, params=params)
        assert response.status_code == 422, (path, params)
        assert response.json()["error"].startswith(f"{field}:"), response.json()
    missing = client.get("/api/v1/periodic/nightly/as-of")
    assert missing.status_code == 422 and "as_of" in missing.text
    page = client.get("/schedules/nightly/as-of", params={"as_of": "last night"})
    assert page.status_code == 422 and "as_of: must be an instant" in page.text


def test_the_console_shows_a_schedule_as_of_before_an_edit_with_a_banner(
    client: TestClient, clock: FakeClock
) -> None:
    before_edit = _edited(client, clock)
    live = client.get("/schedules/nightly")
    assert (
        'action="/schedules/nightly/as-of"' in live.text
        and "/schedules/nightly/changes" in live.text
    )
    page = client.get("/schedules/nightly/as-of", params={"as_of": "2024-01-01T00:00:30"})
    assert page.status_code == 200
    assert 'id="as-of-banner"' in page.text and "As of 2024-01-01 00:00:30 UTC" in page.text
    assert "0 2 * * *" in page.text and "0 3 * * *" not in page.text
    assert "through the HTTP API" in page.text
    just_before = client.get("/schedules/nightly/as-of", params={"as_of": before_edit})
    assert "0 2 * * *" in just_before.text and "0 3 * * *" not in just_before.text
    too_early = client.get("/schedules/nightly/as-of", params={"as_of": "2023-12-31T00:00:00Z"})
    assert 'id="as-of-state"' in too_early.text and "did not exist yet" in too_early.text


def test_the_console_shows_changes_as_a_diff_with_who(client: TestClient, clock: FakeClock) -> None:
    _edited(client, clock)
    page = client.get("/schedules/nightly/changes")
    assert page.status_code == 200
    assert "s3cret" not in page.text and "n3w" not in page.text
    assert "through the console" in page.text and "through the HTTP API" in page.text
    assert "0 2 * * *" in page.text and "0 3 * * *" in page.text
    assert client.get("/schedules/missing/changes").status_code == 404


def test_the_console_shows_a_job_as_of(client: TestClient, hg: Headgate, clock: FakeClock) -> None:
    job = hg.enqueue("k", {"n": 1})
    assert f'action="/jobs/{job.id}/as-of"' in client.get(f"/jobs/{job.id}").text
    page = client.get(f"/jobs/{job.id}/as-of", params={"as_of": clock.now_ms()})
    assert page.status_code == 200 and 'id="as-of-banner"' in page.text
    assert "pending" in page.text
    early = client.get(f"/jobs/{job.id}/as-of", params={"as_of": clock.now_ms() - 1})
    assert "had not been enqueued yet" in early.text


def test_a_bearer_clients_changes_are_the_apis_even_with_the_console_header(
    hg: Headgate,
) -> None:
    app = create_app(hg, api_token="t0ken-for-tests-only")
    with TestClient(app, base_url=LOCAL) as client:
        response = client.put(
            "/api/v1/periodic/tokened",
            json={"spec": "0 2 * * *", "kind": "report"},
            headers={
                "Authorization": "Bearer t0ken-for-tests-only",
                "X-Headgate-Client": "console",
            },
        )
        assert response.status_code in {200, 201}, response.text
    (created,) = hg.schedules.changes("tokened").changes
    assert created.changed_by == "operator:api"
