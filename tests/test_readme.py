"""The README's embedding example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


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
