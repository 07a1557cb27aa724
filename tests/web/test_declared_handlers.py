"""Declared handlers where an operator looks: the API (`GET /api/v1/handlers`),
the CLI (`headgate handlers list`) and the console's Workers page show the same
facts, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
from html import unescape

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, RuntimeConfig
from headgate.cli import main
from tests.web.conftest import START_MS


def _declare(store_url: str, group: str, queue: str) -> None:
    config = RuntimeConfig(lease_ttl_ms=3_600_000, declarations_group=group)
    with Headgate(store_url, config=config) as code:
        code.handler("pdf.render", queue=queue, priority=2, rate_class="render")(lambda job: None)
        code.start(workers=False, scheduler=False)


def test_the_api_and_the_cli_show_each_groups_declaration(
    client: TestClient, hg: Headgate, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert client.get("/api/v1/handlers").json() == {"handlers": []}
    assert "No handler is declared" in client.get("/workers").text
    assert main(["handlers", "list", "--db", store_url]) == 0
    assert "no handler is declared" in capsys.readouterr().out
    _declare(store_url, "web", "pdf")
    _declare(store_url, "batch", "pdf-batch")
    response = client.get("/api/v1/handlers")
    assert response.status_code == 200
    handlers = response.json()["handlers"]
    assert [(h["kind"], h["declared_by"], h["queue"]) for h in handlers] == [
        ("pdf.render", "batch", "pdf-batch"),
        ("pdf.render", "web", "pdf"),
    ]
    assert handlers[0]["priority"] == 2 and handlers[0]["rate_class"] == "render"
    assert handlers[0]["host"].endswith(f":{os.getpid()}")
    assert handlers[0]["declared_at_ms"] > START_MS
    assert main(["handlers", "list", "--db", store_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == response.json()
    assert main(["handlers", "list", "--db", store_url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["KIND", "QUEUE", "PRIORITY", "GROUP", "HOST", "SINCE"]
    assert table[1].split()[:4] == ["pdf.render", "pdf-batch", "2", "batch"]
    assert table[2].split()[:4] == ["pdf.render", "pdf", "2", "web"]
    page = client.get("/workers").text
    body = page.split('<table id="handlers">', 1)[1].split("</table>", 1)[0]
    rows = [
        unescape(re.sub(r"<[^>]+>", " ", row)).split()
        for row in re.findall(r"<tr\b.*?</tr>", body.split("<tbody>", 1)[1], re.S)
    ]
    assert [row[:4] for row in rows] == [
        ["pdf.render", "pdf-batch", "2", "batch"],
        ["pdf.render", "pdf", "2", "web"],
    ]
