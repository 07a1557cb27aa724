"""The README's embedding example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from headgate import Headgate
from tests.web.conftest import LOCAL

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def _block_with(text: str) -> str:
    (block,) = [block for block in _python_blocks() if text in block]
    return block


def test_the_embedding_example_runs(tmp_path: Path) -> None:
    example = _python_blocks()[0]
    result = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].isdigit()  # next_run_ms
    assert lines[1] == "None"  # a manual run has no periodic origin
    assert (tmp_path / "headgate.db").exists()


def test_the_readme_gives_exactly_two_shell_commands() -> None:
    section = README.read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert [c.strip() for c in commands] == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/headgate serve",
        "sh tests/run.sh",
    ]
    assert "sh tests/run.sh" in (README.parent / ".ci" / "run").read_text()


def test_the_mounting_example_runs_the_scheduler_with_the_host(tmp_path: Path) -> None:
    """The host's lifespan starts Headgate and closes it; the API answers under the mount."""
    url = f"sqlite:///{tmp_path / 'host.db'}"
    example = _python_blocks()[2].replace("postgresql+psycopg://app@db/app", url)
    namespace: dict[str, Any] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    hg = namespace["hg"]
    with TestClient(namespace["app"], base_url=LOCAL) as client:
        assert hg.running
        deadline = time.monotonic() + 10
        while hg.lease_status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hg.lease_status() is not None, "the runtime took the scheduler lease"
        assert client.get("/scheduler/api/v1/periodic").status_code == 200
    assert not hg.running
    with Headgate(url) as observer:
        assert observer.lease_status() is None, "closing with the host released the lease"


def test_the_testing_example_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _python_blocks()[3]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "enqueued"


def test_the_ops_example_runs(tmp_path: Path) -> None:
    Headgate(f"sqlite:///{tmp_path / 'headgate.db'}").close()
    result = subprocess.run(
        [sys.executable, "-c", _block_with("from headgate import ops")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "True 0"


def test_the_jobs_example_runs_the_handler(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _python_blocks()[1]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "sending to ada@example.com (attempt 1)",
        "{'sent': 'ada@example.com'}",
    ]
    with Headgate(f"sqlite:///{tmp_path / 'jobs.db'}") as hg:
        assert hg.get_schedule("nightly-report").kind == "nightly-report"


def test_the_metrics_example_exposes_headgates_metrics_in_the_hosts_registry(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    example = _block_with("metrics_collector").replace("sqlite:///headgate.db", url)
    namespace: dict[str, Any] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    hg = namespace["hg"]
    try:
        with TestClient(namespace["app"], base_url=LOCAL) as client:
            response = client.get("/metrics/")
        assert response.status_code == 200
        assert "headgate_store_up 1.0" in response.text
        assert "python_info" in response.text  # the host's own registry, Headgate's beside
    finally:
        namespace["REGISTRY"].unregister(hg.metrics_collector)
        hg.close()
