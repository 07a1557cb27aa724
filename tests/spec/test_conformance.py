"""Every tick vector from the peer implementation must match exactly.

The vectors are vendored next to this file so a clean checkout can run them;
when the shared original is present we also check the copy has not drifted.
"""

import json
from pathlib import Path

import pytest

from headgate import next_tick_ms

LOCAL_COPY = Path(__file__).with_name("cron_ticks.json")
SHARED_ORIGINAL = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cron_ticks.json"
VECTORS: list[dict[str, int | str]] = json.loads(LOCAL_COPY.read_text())


def test_vendored_copy_is_the_full_peer_set() -> None:
    assert len(VECTORS) == 100
    if SHARED_ORIGINAL.exists():
        assert json.loads(SHARED_ORIGINAL.read_text()) == VECTORS


@pytest.mark.parametrize("vector", VECTORS, ids=[f"{v['spec']}@{v['after_ms']}" for v in VECTORS])
def test_next_tick_matches_peer(vector: dict[str, int | str]) -> None:
    assert next_tick_ms(str(vector["spec"]), int(vector["after_ms"])) == int(vector["next_ms"])
