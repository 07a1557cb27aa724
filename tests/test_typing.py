"""The README's Python examples type-check under mypy --strict, as a user's code
would against the package (it ships py.typed), like structlog's typing tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_examples_type_check_strictly(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert len(blocks) >= 4
    files = []
    for index, block in enumerate(blocks):
        path = tmp_path / f"readme_example_{index}.py"
        path.write_text(block)
        files.append(str(path))
    # In a child: mypy raises the interpreter's recursion limit for good.
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--config-file",
            "",
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
