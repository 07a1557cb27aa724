"""The README's Python examples type-check under mypy --strict, as a user's code
would against the package (it ships py.typed), like structlog's typing tests."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_examples_type_check_strictly(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert len(blocks) >= 4
    files = []
    for index, block in enumerate(blocks):
        path = tmp_path / f"readme_example_{index}.py"
        path.write_text(block)
        files.append(str(path))
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--config-file",
            "",
            *files,
        ]
    )
    assert status == 0, stdout + stderr
