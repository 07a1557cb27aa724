"""A task's job sent over HTTP by kind: its arguments are checked against the
task's signature where the serving process registers it, as a Python caller's
are, and a refusal names the argument and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from headgate import Headgate


def test_an_argument_of_another_kind_is_a_422_naming_it(hg: Headgate, client: TestClient) -> None:
    received: list[tuple[int, datetime]] = []

    @hg.task("invoice.send")
    def send(invoice_id: int, due: datetime) -> None:
        received.append((invoice_id, due))

    refused = client.post(
        "/api/v1/jobs",
        json={"kind": "invoice.send", "payload": {"invoice_id": "7", "due": "2026-12-05T08:30Z"}},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"].startswith("invoice_id: must be int, got str"), refused.json()
    assert hg.drain().ran == 0, "nothing was written"
    taken = client.post(
        "/api/v1/jobs",
        json={"kind": "invoice.send", "payload": {"invoice_id": 7, "due": "2026-12-05T08:30Z"}},
    )
    assert taken.status_code == 201, taken.text
    hg.drain()
    assert received == [(7, datetime(2026, 12, 5, 8, 30, tzinfo=UTC))]
