"""Make `kubernetes-1.37-strict.json`: the Kubernetes JSON schemas of the kinds the
deployment guide's manifests use, and of everything they refer to, taken from
kubernetes-validate's strict schemas (Apache-2.0; generated from the Kubernetes
OpenAPI document), descriptions dropped. Run again to add a kind:

    pip download --no-deps kubernetes-validate==1.37.0 && unzip kubernetes_validate-*.whl
    python tests/deploy/vendor_kubernetes_schema.py kubernetes_validate/kubernetes-json-schema
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

VERSION = "v1.37.0"
KINDS = (
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
)
HERE = Path(__file__).resolve().parent
VENDORED = HERE / "kubernetes-1.37-strict.json"
_REFERENCE = re.compile(r"#/\$defs/([A-Za-z0-9_.\-]+)")


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def main(schemas: Path) -> None:
    definitions = json.loads(
        (schemas / f"{VERSION}-local-strict" / "_definitions.json").read_text()
    )
    every = definitions["$defs"]
    kept: dict[str, Any] = {}
    pending = list(KINDS)
    while pending:
        name = pending.pop()
        if name not in kept:
            kept[name] = _without_descriptions(every[name])
            pending.extend(_REFERENCE.findall(json.dumps(kept[name])))
    VENDORED.write_text(
        json.dumps(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$comment": f"Kubernetes {VERSION}, strict: {__doc__.splitlines()[0]}",
                "$defs": dict(sorted(kept.items())),
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
