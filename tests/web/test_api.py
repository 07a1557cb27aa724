"""The HTTP API contract, on SQLite and PostgreSQL: every route and every error."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from headgate import Headgate
from headgate._domain.ids import tick_job_id
from headgate._wire.schedules import ScheduleOut
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.store.builders import enqueued, schedule_defined
from tests.web.conftest import LOCAL, START_MS

MINUTE = 60_000
JSON = {"Content-Type": "application/json"}
NIGHTLY = {
    "kind": "report.build",
    "spec": "CRON_TZ=America/New_York 0 9 * * *",
    "payload": {"team": 7},
}
SCHEDULE_KEYS = {*ScheduleOut.model_fields, *ScheduleOut.model_computed_fields}
"""A schedule's fields as the API sends them (a renamed field's former name too)."""


def _snapshot(client: TestClient) -> object:
    return client.get("/api/v1/periodic").json(), client.get("/api/v1/periodic/nightly").json()


class TestSchedules:
    def test_put_creates_then_updates(self, client: TestClient) -> None:
        created = client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        assert created.status_code == 201
        body = created.json()
        assert set(body) == SCHEDULE_KEYS
        assert (body["queue"], body["on_missed"], body["backfill_max"], body["paused"]) == (
            "default",
            "skip",
            1,
            False,
        )
        updated = client.put(
            "/api/v1/periodic/nightly",
            json={**NIGHTLY, "on_missed": "backfill", "backfill_max": 5},
        )
        assert updated.status_code == 200
        assert (updated.json()["on_missed"], updated.json()["backfill_max"]) == ("backfill", 5)
        assert updated.json()["next_run_ms"] == body["next_run_ms"]

    def test_get_returns_the_payload(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        assert client.get("/api/v1/periodic/nightly").json()["payload"] == {"team": 7}
        listed = client.get("/api/v1/periodic").json()["schedules"]
        assert [schedule["payload"] for schedule in listed] == [{"team": 7}]

    def test_patch_changes_only_what_it_names(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/nightly", json={**NIGHTLY, "max_attempts": 5})
        before = client.get("/api/v1/periodic/nightly").json()
        patched = client.patch("/api/v1/periodic/nightly", json={"paused": True})
        assert patched.status_code == 200
        judged = {"health": None, "last_run": None}  # told by reads, not by writes
        assert patched.json() == {**before, "paused": True, **judged}
        cleared = client.patch("/api/v1/periodic/nightly", json={"max_attempts": None})
        assert cleared.json()["max_attempts"] is None
        refused = client.patch("/api/v1/periodic/nightly", json={"backfill_max": 0})
        assert refused.status_code == 422
        assert refused.json() == {"error": "backfill_max: must be between 1 and 1000, got 0"}
        assert client.patch("/api/v1/periodic/ghost", json={"paused": True}).status_code == 404
        assert client.patch("/api/v1/periodic/nightly", json={"run_at_ms": 1}).status_code == 422

    def test_put_is_a_full_replace(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/nightly", json={**NIGHTLY, "max_attempts": 5})
        replaced = client.put("/api/v1/periodic/nightly", json=NIGHTLY).json()
        assert replaced["max_attempts"] is None

    def test_list_pages_to_the_end(self, client: TestClient) -> None:
        for n in range(5):
            client.put(f"/api/v1/periodic/s{n}", json={"kind": "k", "spec": "@every:60000"})
        seen, cursor = [], None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/v1/periodic", params=params).json()
            seen += [s["id"] for s in page["schedules"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [f"s{n}" for n in range(5)]

    def test_delete_then_history_stays(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        client.put("/api/v1/periodic/pulse", json={"kind": "k", "spec": "@every:60000"})
        clock.advance(MINUTE)
        hg.start()
        assert hg.fire_due_ticks()
        assert client.delete("/api/v1/periodic/pulse").status_code == 204
        assert client.get("/api/v1/periodic/pulse").status_code == 404
        events = client.get("/api/v1/periodic/pulse/enqueue-events").json()["events"]
        assert [(e["tick_ms"], e["outcome"], e["reason"]) for e in events] == [
            (START_MS + MINUTE, "enqueued", "accepted")
        ]
        assert set(events[0]) == {
            "event_id",
            "schedule_id",
            "tick_ms",
            "job_id",
            "outcome",
            "reason",
            "recorded_at_ms",
        }
        assert client.delete("/api/v1/periodic/pulse").status_code == 404


class TestEvents:
    def test_paging_newest_first(self, client: TestClient, hg: Headgate, clock: FakeClock) -> None:
        client.put(
            "/api/v1/periodic/b",
            json={
                "kind": "k",
                "spec": "@every:60000",
                "on_missed": "backfill",
                "backfill_max": 40,
            },
        )
        clock.advance(35 * MINUTE)
        hg.start()
        assert hg.fire_due_ticks()
        first = client.get("/api/v1/periodic/b/enqueue-events").json()
        assert len(first["events"]) == 30
        assert first["events"][0]["tick_ms"] == START_MS + 35 * MINUTE
        rest = client.get(
            "/api/v1/periodic/b/enqueue-events", params={"cursor": first["next_cursor"]}
        ).json()
        assert [e["tick_ms"] for e in rest["events"]] == [
            START_MS + n * MINUTE for n in range(5, 0, -1)
        ]
        assert rest["next_cursor"] is None

    @pytest.mark.parametrize("limit", ["0", "101", "x"])
    def test_limit_out_of_range(self, client: TestClient, limit: str) -> None:
        response = client.get("/api/v1/periodic/b/enqueue-events", params={"limit": limit})
        assert response.status_code == 422
        assert response.json()["error"].startswith("limit: ")

    def test_malformed_cursor(self, client: TestClient) -> None:
        response = client.get(
            "/api/v1/periodic/b/enqueue-events", params={"cursor": "not-a-cursor"}
        )
        assert response.status_code == 422
        assert response.json() == {
            "error": "cursor: is not a cursor returned by this list; pass next_cursor back unchanged"
        }


def _raw_post(app: object, path: str, idempotency_key: bytes) -> tuple[int, bytes]:
    """POST `path` straight to the ASGI app, the header's bytes as given."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"idempotency-key", idempotency_key)],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))  # type: ignore[operator]
    body = b"".join(bytes(m.get("body", b"")) for m in sent[1:])  # type: ignore[arg-type]
    return int(sent[0]["status"]), body  # type: ignore[call-overload]


class TestRunNow:
    def test_the_same_key_twice_is_one_job(self, client: TestClient) -> None:
        before = client.put("/api/v1/periodic/nightly", json=NIGHTLY).json()
        first = client.post("/api/v1/periodic/nightly/run", headers={"Idempotency-Key": "click-1"})
        second = client.post("/api/v1/periodic/nightly/run", headers={"Idempotency-Key": "click-1"})
        assert (first.status_code, second.status_code) == (202, 202)
        assert first.json()["id"] == second.json()["id"]
        assert (first.json()["replayed"], second.json()["replayed"]) == (False, True)
        job = client.get(f"/api/v1/jobs/{first.json()['id']}").json()
        assert job["periodic_origin"] is None and job["payload"] == {"team": 7}
        assert client.get("/api/v1/periodic/nightly").json()["next_run_ms"] == before["next_run_ms"]

    def test_the_key_is_required(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        response = client.post("/api/v1/periodic/nightly/run")
        assert response.status_code == 422
        assert response.json() == {"error": "Idempotency-Key: header is required"}

    def test_unknown_schedule(self, client: TestClient) -> None:
        response = client.post("/api/v1/periodic/ghost/run", headers={"Idempotency-Key": "k"})
        assert response.status_code == 404

    def test_a_key_that_is_not_ascii_is_read_as_the_utf8_it_was_sent_as(
        self, client: TestClient, hg: Headgate
    ) -> None:
        """The same key from Python and over HTTP is one job (it was read as latin-1)."""
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        from_python = hg.schedules.enqueue_now("nightly", "clé-ü-1")
        headers = {"Idempotency-Key": "clé-ü-1".encode()}
        over_http = client.post("/api/v1/periodic/nightly/run", headers=headers)
        assert over_http.status_code == 202
        assert over_http.json() == {"id": from_python.job_id, "replayed": True}

    def test_a_key_that_is_not_utf8_is_a_422(self, client: TestClient) -> None:
        """Sent as the ASGI scope has it (the test client re-encodes every header as
        UTF-8): latin-1 bytes, as a client that does not send UTF-8 would."""
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        status, body = _raw_post(
            client.app, "/api/v1/periodic/nightly/run", "clé".encode("latin-1")
        )
        assert (status, json.loads(body)) == (
            422,
            {"error": "Idempotency-Key: header is not valid UTF-8"},
        )


class TestJobs:
    def test_ordinary_job_round_trip(self, client: TestClient) -> None:
        created = client.post(
            "/api/v1/jobs", json={"kind": "email.send", "payload": {"to": "a"}, "queue": "mail"}
        )
        assert created.status_code == 201
        job = client.get(f"/api/v1/jobs/{created.json()['id']}").json()
        assert (job["kind"], job["queue"], job["payload"], job["periodic_origin"]) == (
            "email.send",
            "mail",
            {"to": "a"},
            None,
        )

    def test_periodic_origin_pair(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/s", json={"kind": "k", "spec": "@every:60000"})
        ok = client.post(
            "/api/v1/jobs",
            json={"kind": "k", "periodic_origin": {"schedule_id": "s", "tick_ms": 5}},
        )
        assert ok.json()["periodic_origin"] == {"schedule_id": "s", "tick_ms": 5}
        half = client.post("/api/v1/jobs", json={"kind": "k", "periodic_origin": {"tick_ms": 5}})
        assert half.status_code == 422
        assert half.json() == {
            "error": "periodic_origin: needs both schedule_id and tick_ms, or neither"
        }

    def test_one_job_per_tick(self, client: TestClient, hg: Headgate, clock: FakeClock) -> None:
        ghost = client.post(
            "/api/v1/jobs",
            json={"kind": "k", "periodic_origin": {"schedule_id": "ghost", "tick_ms": 5}},
        )
        assert (ghost.status_code, ghost.json()) == (
            422,
            {"error": "periodic_origin.schedule_id: no schedule 'ghost'"},
        )
        tick = client.put(
            "/api/v1/periodic/pulse", json={"kind": "k", "spec": "@every:60000"}
        ).json()["next_run_ms"]
        clock.set(tick)
        hg.start()
        assert hg.fire_due_ticks(timeout=30)
        again = client.post(
            "/api/v1/jobs",
            json={"kind": "k", "periodic_origin": {"schedule_id": "pulse", "tick_ms": tick}},
        )
        assert again.status_code == 409
        assert again.json()["job_id"] == tick_job_id("pulse", tick)
        listed = client.get("/api/v1/jobs", params={"schedule_id": "pulse"}).json()["jobs"]
        assert [job["id"] for job in listed] == [tick_job_id("pulse", tick)]

    def test_scheduler_jobs_expose_their_origin(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        client.put("/api/v1/periodic/pulse", json={"kind": "k", "spec": "@every:60000"})
        clock.advance(MINUTE)
        hg.start()
        assert hg.fire_due_ticks()
        event = client.get("/api/v1/periodic/pulse/enqueue-events").json()["events"][0]
        job = client.get(f"/api/v1/jobs/{event['job_id']}").json()
        assert job["periodic_origin"] == {"schedule_id": "pulse", "tick_ms": START_MS + MINUTE}

    def test_unique_key_conflict(self, client: TestClient) -> None:
        first = client.post("/api/v1/jobs", json={"kind": "k", "unique_key": "u"}).json()
        again = client.post("/api/v1/jobs", json={"kind": "k", "unique_key": "u"})
        assert again.status_code == 409
        assert again.json()["job_id"] == first["id"]

    def test_unknown_job(self, client: TestClient) -> None:
        assert client.get("/api/v1/jobs/nope").status_code == 404


BAD_PUTS = [
    (
        {"kind": "k", "spec": "61 * * * *"},
        "spec: bad cron '61 * * * *': minute 61 out of range 0-59",
    ),
    (
        {"kind": "k", "spec": "CRON_TZ=Europe/Paris @every:1000"},
        "spec: bad spec 'CRON_TZ=Europe/Paris @every:1000': @every is always aligned to UTC and rejects a CRON_TZ prefix",
    ),
    (
        {"kind": "k", "spec": "@every:1000", "on_missed": "later"},
        "on_missed: input should be 'skip', 'run_once' or 'backfill'",
    ),
    (
        {"kind": "k", "spec": "@every:1000", "backfill_max": 0},
        "backfill_max: must be between 1 and 1000, got 0",
    ),
    (
        {"kind": "k", "spec": "@every:1000", "backfill_max": "5"},
        "backfill_max: input should be a valid integer",
    ),
    ({"spec": "@every:1000"}, "kind: is required"),
    ({"kind": "", "spec": "@every:1000"}, "kind: must be 1-128 characters, got 0"),
    ({"kind": "k", "spec": "@every:1000", "colour": "red"}, "colour: is not a known field"),
    (
        {"kind": "k", "spec": "@every:1000", "start_at_ms": 5000, "end_at_ms": 4000},
        "end_at_ms: must be after start_at_ms (5000), got 4000",
    ),
    (
        {"kind": "k", "spec": "@every:1000", "jitter_ms": 3_600_001},
        "jitter_ms: must be an integer from 0 to 3600000 (an hour), got 3600001",
    ),
]


class TestBadInput:
    @pytest.mark.parametrize(("body", "message"), BAD_PUTS)
    def test_bad_put_is_422_and_changes_nothing(
        self, client: TestClient, body: dict[str, object], message: str
    ) -> None:
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        before = _snapshot(client)
        response = client.put("/api/v1/periodic/nightly", json=body)
        assert response.status_code == 422
        assert response.json() == {"error": message}
        assert _snapshot(client) == before

    def test_not_json_is_400(self, client: TestClient) -> None:
        response = client.put(
            "/api/v1/periodic/nightly",
            content=b"{nope",
            headers={"Content-Type": "application/json"},
        )
        assert (response.status_code, response.json()) == (
            400,
            {"error": "body: is not valid JSON"},
        )

    @pytest.mark.parametrize("spec", ["@\\ud800", "CRON_TZ=\\ud800 0 9 * * *"])
    def test_a_lone_surrogate_in_the_spec_is_422(self, client: TestClient, spec: str) -> None:
        """JSON may escape a lone surrogate; quoting it back must not break the reply."""
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        before = _snapshot(client)
        response = client.put(
            "/api/v1/periodic/nightly",
            content=f'{{"kind": "k", "spec": "{spec}"}}'.encode(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 422
        assert response.json()["error"].startswith("spec: ")
        assert _snapshot(client) == before

    @pytest.mark.parametrize("body", [b"[" * 5_000 + b"]" * 5_000, b'{"n": ' + b"9" * 5_000 + b"}"])
    def test_json_too_deep_or_too_long_is_400_naming_the_body(
        self, client: TestClient, body: bytes
    ) -> None:
        response = client.put("/api/v1/periodic/nightly", content=body, headers=JSON)
        assert response.status_code == 400
        assert response.json()["error"].startswith("body: could not be read as JSON")

    def test_non_json_content_type_is_415(self, client: TestClient) -> None:
        # (A type a form can send, text/plain among them, is refused before
        # this, as a cross-site write: tests/web/test_guard.py.)
        response = client.put(
            "/api/v1/periodic/nightly",
            content=b"<kind>k</kind>",
            headers={"Content-Type": "application/xml"},
        )
        assert response.status_code == 415

    def test_body_over_one_mebibyte_is_413(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/nightly", json=NIGHTLY)
        before = _snapshot(client)
        huge = {"kind": "k", "spec": "@every:1000", "payload": "x" * (1024 * 1024)}
        response = client.put("/api/v1/periodic/nightly", json=huge)
        assert response.status_code == 413
        assert _snapshot(client) == before

    def test_schedule_list_limit(self, client: TestClient) -> None:
        assert client.get("/api/v1/periodic", params={"limit": 201}).status_code == 422
        assert client.get("/api/v1/periodic", params={"limit": 200}).status_code == 200

    def test_a_write_while_shutting_down_is_a_503(self, client: TestClient, hg: Headgate) -> None:
        hg.close()
        response = client.post("/api/v1/jobs", json={"kind": "email.send", "payload": {}})
        assert response.status_code == 503 and "shutting down" in response.json()["error"]

    def test_unknown_route_is_a_json_404(self, client: TestClient) -> None:
        response = client.get("/api/v1/nothing-here")
        assert response.status_code == 404 and "error" in response.json()


NEWLINE_AT_3 = "found U+000A (a control character) at index 3"
EVERY_MINUTE = {"kind": "k", "spec": "@every:60000"}


class TestNames:
    """Names with a newline, a space at an end or an invisible character are 422s
    naming the field, and nothing is stored; names stored before stay usable."""

    def test_a_schedule_id_ending_in_a_newline_is_422(self, client: TestClient) -> None:
        client.put("/api/v1/periodic/abc", json=EVERY_MINUTE)
        response = client.put("/api/v1/periodic/abc%0A", json=EVERY_MINUTE)
        assert response.status_code == 422
        assert response.json()["error"].startswith("id: may contain only letters")
        assert response.json()["error"].endswith(NEWLINE_AT_3)
        assert [s["id"] for s in client.get("/api/v1/periodic").json()["schedules"]] == ["abc"]

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("queue", "q\n", "queue: may contain only letters"),
            ("queue", " q", "queue: may contain only letters"),
            ("kind", "k ", "kind: must not start or end with a space"),
            ("kind", "k\u200b", "kind: must not contain control or invisible characters"),
        ],
    )
    def test_bad_names_in_a_schedule_body_are_422(
        self, client: TestClient, field: str, value: str, message: str
    ) -> None:
        response = client.put("/api/v1/periodic/s", json={**EVERY_MINUTE, field: value})
        assert response.status_code == 422 and response.json()["error"].startswith(message)
        bulk = client.post(
            "/api/v1/periodic:bulk",
            json={
                "schedules": [
                    {**EVERY_MINUTE, "id": "ok"},
                    {**EVERY_MINUTE, field: value, "id": "s"},
                ]
            },
        )
        assert bulk.status_code == 422
        assert bulk.json()["error"].startswith(f"schedules[1].{message}")
        assert client.get("/api/v1/periodic").json()["schedules"] == []

    def test_a_bulk_id_ending_in_a_newline_is_422(self, client: TestClient) -> None:
        response = client.post(
            "/api/v1/periodic:bulk", json={"schedules": [{**EVERY_MINUTE, "id": "abc\n"}]}
        )
        assert response.status_code == 422
        assert response.json()["error"].startswith("schedules[0].id: may contain only")
        assert client.get("/api/v1/periodic").json()["schedules"] == []

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ({"kind": "k", "queue": "q\n"}, "queue: may contain only letters"),
            ({"kind": "k\n"}, "kind: must not contain control or invisible characters"),
            ({"kind": " k"}, "kind: must not start or end with a space"),
            ({"kind": "k", "unique_key": "u "}, "unique_key: must not start or end with a space"),
            ({"kind": "k", "unique_key": "u\u2028"}, "unique_key: must not contain control"),
        ],
    )
    def test_bad_names_in_a_job_body_are_422(
        self, client: TestClient, body: dict[str, object], message: str
    ) -> None:
        response = client.post("/api/v1/jobs", json=body)
        assert response.status_code == 422 and response.json()["error"].startswith(message)
        assert client.get("/api/v1/jobs").json()["jobs"] == []

    def test_an_idempotency_key_with_an_invisible_character_is_422(
        self, client: TestClient
    ) -> None:
        client.put("/api/v1/periodic/s", json=EVERY_MINUTE)
        response = client.post("/api/v1/periodic/s/run", headers={"Idempotency-Key": "k\tv"})
        assert response.status_code == 422
        assert response.json()["error"] == (
            "Idempotency-Key: must not contain control or invisible characters; "
            "found U+0009 (a control character) at index 1"
        )
        assert client.get("/api/v1/jobs").json()["jobs"] == []

    @pytest.mark.parametrize("fingerprint", ["zzz", "zzz%0A", "ABCDEF0123456789ABCDEF0123456789"])
    def test_a_fingerprint_headgate_cannot_make_is_422(
        self, client: TestClient, fingerprint: str
    ) -> None:
        for response in (
            client.put(f"/api/v1/quarantine/{fingerprint}", json={"note": "x"}),
            client.delete(f"/api/v1/quarantine/{fingerprint}"),
        ):
            assert response.status_code == 422
            assert response.json()["error"].startswith(
                "fingerprint: must be 32 lowercase hexadecimal digits"
            )
        assert client.get("/api/v1/quarantine").json()["entries"] == []

    def test_names_stored_before_the_rules_are_read_filtered_and_deleted(
        self, client: TestClient, hg: Headgate
    ) -> None:
        from headgate._domain.events import FingerprintQuarantined
        from headgate._domain.streams import job_stream, quarantine_stream, schedule_stream
        from headgate._store.port import NO_STREAM

        log = hg._core.store.log
        legacy = schedule_defined(
            "abc\n", "@every:60000", "k", "default", None, "skip", 1, False, START_MS + MINUTE
        )  # type: ignore[arg-type]
        log.append(schedule_stream("abc\n"), NO_STREAM, [legacy])
        log.append(job_stream("j"), NO_STREAM, [enqueued("j", "k", "a\n", None, None)])
        log.append(quarantine_stream("zzz"), NO_STREAM, [FingerprintQuarantined("zzz", "old")])
        assert client.get("/api/v1/periodic/abc%0A").json()["id"] == "abc\n"
        assert client.post("/api/v1/periodic/abc%0A/pause").json()["paused"] is True
        assert [j["id"] for j in client.get("/api/v1/jobs?queue=a%0A").json()["jobs"]] == ["j"]
        assert client.get("/api/v1/jobs?queue=a").json()["jobs"] == []
        assert client.delete("/api/v1/periodic/abc%0A").status_code == 204
        assert client.get("/api/v1/periodic/abc%0A").status_code == 404
        assert client.delete("/api/v1/quarantine/zzz").status_code == 204
        assert client.get("/api/v1/quarantine").json()["entries"] == []


def test_an_app_that_should_start_the_runtime_says_so_when_mounted(hg: Headgate) -> None:
    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="", manage_runtime=True))
    with capture_logs() as logs, TestClient(host, base_url=LOCAL) as client:
        client.get("/scheduler/api/v1/periodic")
        client.get("/scheduler/api/v1/periodic")
    warnings = [e for e in logs if "never starts the runtime" in e["event"]]
    assert len(warnings) == 1 and warnings[0]["root_path"] == "/scheduler"
    assert not hg.running
    with (
        capture_logs() as logs,
        TestClient(create_app(hg, api_token="", manage_runtime=True), base_url=LOCAL) as client,
    ):
        client.get("/api/v1/periodic")
        assert hg.running
    assert not [e for e in logs if "never starts the runtime" in e["event"]]


class TestAuth:
    def test_token_required_when_configured(self, hg: Headgate) -> None:
        with TestClient(create_app(hg, api_token="s3cret"), base_url=LOCAL) as client:
            assert client.get("/api/v1/periodic").status_code == 401
            assert client.get("/").status_code == 401
            assert (
                client.get(
                    "/api/v1/periodic", headers={"Authorization": "Bearer wrong"}
                ).status_code
                == 401
            )
            assert (
                client.get(
                    "/api/v1/periodic", headers={"Authorization": "Bearer s3cret"}
                ).status_code
                == 200
            )
            assert client.post("/login", json={"token": "wrong"}).status_code == 401
            nested = b"[" * 100_000
            assert client.post("/login", content=nested, headers=JSON).status_code == 401
            assert client.post("/login", json={"token": "s3cret"}).status_code == 200
            assert client.get("/").status_code == 200  # the cookie now carries the token

    def test_the_login_cookie_is_secure_over_https(self, hg: Headgate) -> None:
        app = create_app(hg, api_token="s3cret")
        for base_url, secure in (("https://127.0.0.1", True), ("http://127.0.0.1", False)):
            with TestClient(app, base_url=base_url) as client:
                cookie = client.post("/login", json={"token": "s3cret"}).headers["set-cookie"]
                assert ("secure" in cookie.lower()) is secure, cookie
                assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()

    def test_token_login_works_in_an_app_mounted_by_a_host(self, hg: Headgate) -> None:
        host = FastAPI()
        host.mount("/scheduler", create_app(hg, api_token="s3cret"))
        with TestClient(host, base_url=LOCAL) as client:
            refused = client.get("/scheduler/api/v1/periodic")
            assert refused.status_code == 401 and "bearer token" in refused.json()["error"]
            assert client.get("/scheduler/").status_code == 401
            assert client.get("/scheduler/static/console.css").status_code == 200
            assert client.post("/scheduler/login", json={"token": "wrong"}).status_code == 401
            login = client.post("/scheduler/login", json={"token": "s3cret"})
            assert login.status_code == 200
            assert "path=/scheduler" in login.headers["set-cookie"].lower()
            assert client.get("/scheduler/").status_code == 200
            assert client.get("/scheduler/api/v1/periodic").status_code == 200


def test_spec_preview(client: TestClient) -> None:
    good = client.get(
        "/api/v1/spec-preview", params={"spec": "CRON_TZ=America/New_York 0 9 * * *"}
    ).json()
    assert good["valid"] and good["description"] == "At 09:00, America/New_York"
    assert len(good["next_ticks_ms"]) == 5
    bad = client.get("/api/v1/spec-preview", params={"spec": "61 * * * *"}).json()
    assert bad == {
        "valid": False,
        "error": "bad cron '61 * * * *': minute 61 out of range 0-59",
        "spec": None,
        "description": None,
        "next_ticks_ms": [],
        "min_interval_ms": 1_000,
    }


def test_spec_preview_says_when_an_interval_is_below_the_minimum(client: TestClient) -> None:
    fast = client.get("/api/v1/spec-preview", params={"spec": "@every:250ms"}).json()
    assert fast == {
        "valid": False,
        "error": "interval 250 ms is below the minimum of 1000 ms (RuntimeConfig.min_interval_ms)",
        "spec": "@every:250",
        "description": "Every 250 ms",
        "next_ticks_ms": [START_MS + 250 * n for n in range(1, 6)],
        "min_interval_ms": 1_000,
    }
    friendly = client.get("/api/v1/spec-preview", params={"spec": "@every:1.5s"}).json()
    assert (friendly["valid"], friendly["spec"], friendly["next_ticks_ms"][0]) == (
        True,
        "@every:1500",
        START_MS + 1_500,
    )


def test_a_spec_below_the_minimum_is_a_422_and_a_respelling_is_unchanged(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    fast = client.put("/api/v1/periodic/fast", json={"kind": "k", "spec": "@every:1"})
    assert (fast.status_code, fast.json()) == (
        422,
        {
            "error": "spec: interval 1 ms is below the minimum of 1000 ms "
            "(RuntimeConfig.min_interval_ms)"
        },
    )
    bulk = client.post(
        "/api/v1/periodic:bulk",
        json={"schedules": [{"id": "fast", "kind": "k", "spec": "@every:999"}]},
    )
    assert bulk.status_code == 422 and bulk.json()["error"].startswith(
        "schedules[0].spec: interval 999 ms"
    )
    assert client.get("/api/v1/periodic").json()["schedules"] == []

    made = client.put("/api/v1/periodic/half", json={"kind": "k", "spec": "@every:30000"}).json()
    clock.advance(7_000)
    again = client.put("/api/v1/periodic/half", json={"kind": "k", "spec": "@every:30s"})
    assert again.status_code == 200 and again.json() == made
    respelled = client.post(
        "/api/v1/periodic:bulk",
        json={"schedules": [{"id": "half", "kind": "k", "spec": "@every:0.5m"}]},
    )
    assert respelled.json()["results"] == [{"id": "half", "outcome": "unchanged"}]


@pytest.mark.parametrize(
    "cursor",
    [
        "WyJlbnF1ZXVlLWV2ZW50cyIsMTE4MDU5MTYyMDcxNzQxMTMwMzQyNF0",  # 2**70
        "WyJzY2hlZHVsZXMiLCAiXHVkODAwIl0",  # a lone surrogate
    ],
)
def test_cursors_the_database_cannot_compare_are_422(client: TestClient, cursor: str) -> None:
    assert (
        client.get("/api/v1/periodic/b/enqueue-events", params={"cursor": cursor}).status_code
        == 422
    )
    assert client.get("/api/v1/periodic", params={"cursor": cursor}).status_code == 422


def test_nul_in_a_path_is_404(client: TestClient) -> None:
    assert client.get("/api/v1/periodic/a%00b").status_code == 404
    assert client.get("/api/v1/jobs/a%00b").status_code == 404


def test_writes_during_a_rebuild_are_503(client: TestClient, hg: Headgate) -> None:
    from sqlalchemy import update

    from headgate._store.sql.schema import log_head, projection_checkpoints

    with hg._core.store.engine.begin() as connection:  # a rebuild under way, as it marks both
        connection.execute(update(projection_checkpoints).values(rebuilding=True))
        connection.execute(update(log_head).values(rebuilding=True))
    response = client.put("/api/v1/periodic/nightly", json=NIGHTLY)
    assert response.status_code == 503


@pytest.mark.parametrize("path", ["/", "/schedules/nightly"])
def test_console_pages_explain_a_bad_cursor_in_html(client: TestClient, path: str) -> None:
    client.put("/api/v1/periodic/nightly", json=NIGHTLY)
    response = client.get(path, params={"cursor": "garbage"})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/html")
    assert "cursor" in response.text and "Bad request" in response.text


def test_bounds_jitter_and_upcoming_runs_in_the_api_and_the_console(
    client: TestClient, hg: Headgate
) -> None:
    start, end = START_MS + 10 * MINUTE, START_MS + 12 * MINUTE
    body = {"kind": "k", "spec": "@hourly", "start_at_ms": start, "end_at_ms": end}
    created = client.put("/api/v1/periodic/h", json={"kind": "k", "spec": "@hourly"})
    assert created.status_code == 201
    assert created.json()["spec"] == "0 * * * *"  # a macro is stored as its five fields
    assert client.put("/api/v1/periodic/h", json=body).status_code == 422  # no tick in bounds
    body = {**body, "spec": "* * * * *", "jitter_ms": 20_000}
    shown = client.put("/api/v1/periodic/h", json=body).json()
    assert (shown["start_at_ms"], shown["end_at_ms"], shown["jitter_ms"]) == (start, end, 20_000)
    assert shown["finished"] is False and shown["next_run_ms"] == start
    upcoming = client.get("/api/v1/periodic/h/upcoming", params={"count": 10})
    assert upcoming.status_code == 200
    runs = upcoming.json()["upcoming"]
    assert [run["tick_ms"] for run in runs] == [start, start + MINUTE, end]
    assert runs == [run._asdict() for run in hg.schedules.upcoming("h", 10)]
    assert shown["next_due_at_ms"] == runs[0]["due_at_ms"]
    assert client.get("/api/v1/periodic/h/upcoming").json()["upcoming"] == runs[:5]
    assert client.get("/api/v1/periodic/h/upcoming", params={"count": 0}).status_code == 422
    assert client.get("/api/v1/periodic/nope/upcoming").status_code == 404
    page = client.get("/schedules/h").text
    assert 'id="upcoming"' in page and "up to 20000 ms after each tick" in page
    assert page.count("<tr><td>") == 3
