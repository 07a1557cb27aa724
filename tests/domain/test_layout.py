"""The tests here prove the domain's pure rules directly: they reach no store, no
runtime and no surface, so they run in milliseconds and fail only on a rule."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALLOWED_PREFIXES = ("headgate._domain", "tests.store.builders", "pytest", "hypothesis")
ALLOWED_NAMES = {"headgate._errors", "__future__"}
PUBLIC_VALUES = {"Retry", "ValidationError"}
"""What these tests may take from `headgate` itself: value types, no facade."""


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


def _allowed(module: str, names: list[str]) -> bool:
    if module == "headgate":
        return set(names) <= PUBLIC_VALUES
    top = module.split(".", maxsplit=1)[0]
    return (
        module in ALLOWED_NAMES
        or top in sys.stdlib_module_names
        or any(module == p or module.startswith(f"{p}.") for p in ALLOWED_PREFIXES)
    )


def test_the_domain_tests_import_only_the_domain() -> None:
    modules = sorted(HERE.glob("test_*.py"))
    assert len(modules) > 5, modules
    beyond = {
        f"{path.name}: {module}"
        for path in modules
        for module, names in _imports(path)
        if not _allowed(module, names)
    }
    assert not beyond, sorted(beyond)
