"""The Python examples of the README and the documentation site type-check under
mypy --strict, as a user's code would against the package (it ships py.typed),
like structlog's typing tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_examples import ROOT, every_example

pytestmark = pytest.mark.processes


def test_the_examples_type_check_strictly(tmp_path: Path) -> None:
    examples = [example for example in every_example() if example.skip is None]
    assert len(examples) >= 20
    files = []
    for example in examples:
        path = tmp_path / (re.sub(r"\W", "_", example.name.removesuffix("]")) + ".py")
        path.write_text(example.code)
        files.append(str(path))
    # Django ships no type hints: a user's project checks it with django-stubs or not at all.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n\n[mypy-django.*]\nignore_missing_imports = True\n")
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
            str(config),
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_mypy_sees_a_tasks_arguments_and_result() -> None:
    """`tests/typing_examples/tasks.py`: its typed uses pass, and each line marked
    `# rejected: <code>` is an error of that code, on that line, and no other."""
    example = ROOT / "tests" / "typing_examples" / "tasks.py"
    expected = {
        (number, marked.group(1))
        for number, line in enumerate(example.read_text().splitlines(), start=1)
        if (marked := re.search(r"# rejected: ([\w-]+)", line))
    }
    assert len(expected) >= 5
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(example),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = {
        (int(error.group(1)), error.group(2))
        for error in re.finditer(r"tasks\.py:(\d+): error: .*\[([\w-]+)\]", checked.stdout)
    }
    assert found == expected, checked.stdout + checked.stderr
