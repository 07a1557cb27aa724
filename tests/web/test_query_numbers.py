"""Every integer query parameter the API documents takes digits alone: `5.0`, a
digit of another script or an exponent is a 422 naming the parameter (pydantic's
lax integers took `5.0`, which the schema's integer does not allow; the fuzz test
found it)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def _integer_query_parameters(document: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path, operations in document["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", []):
            schema = parameter.get("schema", {})
            kinds = {schema.get("type")} | {each.get("type") for each in schema.get("anyOf", [])}
            if parameter["in"] == "query" and "integer" in kinds:
                found.append(
                    (path.replace("{schedule_id}", "s").replace("{job_id}", "j"), parameter["name"])
                )
    return found


@pytest.mark.parametrize("written", ["5.0", "\uff15", "5e0", " 5"])
def test_an_integer_query_parameter_takes_digits_alone(client: TestClient, written: str) -> None:
    parameters = _integer_query_parameters(client.get("/openapi.json").json())
    assert len(parameters) >= 8, parameters
    for path, name in parameters:
        answer = client.get(path, params={name: written})
        assert answer.status_code == 422, (path, name, answer.text)
        assert answer.json()["error"].startswith(f"{name}: "), answer.json()
        assert client.get(path, params={name: "5"}).status_code != 422, (path, name)
