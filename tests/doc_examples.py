"""The Python examples of the README and of the documentation site (docs/), as
the tests that run and type-check them read them: every ```python block, in
order, each with the reason it is not run, if it has one.

A page marks a block it cannot run here (it needs a package the suite does not
install) with an HTML comment on the line before it, which the site does not
show: `<!-- docs-test: skip (needs Django, which ...) -->`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_BLOCK = re.compile(
    r"(?:<!-- docs-test: skip \((?P<skip>.*?)\) -->\n)?```python[^\n]*\n(?P<code>.*?)```",
    re.DOTALL,
)
_POSTGRES_URL = re.compile(r"postgres(?:ql)?(?:\+psycopg)?://[^\"']*")


@dataclass(frozen=True)
class Example:
    page: str
    """Relative to the repository: README.md, docs/how-to/fastapi.md."""
    index: int
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page}[{self.index}]"

    def on_sqlite(self, directory: Path) -> str:
        """The code with each PostgreSQL URL swapped for a SQLite file in `directory`:
        what it shows of a shared store holds of SQLite too."""
        return _POSTGRES_URL.sub(f"sqlite:///{directory / 'postgres-stand-in.db'}", self.code)


def examples_in(path: Path) -> list[Example]:
    page = str(path.relative_to(ROOT))
    return [
        Example(page, index, found["code"], found["skip"])
        for index, found in enumerate(_BLOCK.finditer(path.read_text()))
    ]


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def every_example() -> list[Example]:
    return [example for path in [README, *doc_pages()] for example in examples_in(path)]


def example_with(path: Path, text: str) -> str:
    (code,) = [example.code for example in examples_in(path) if text in example.code]
    return code
