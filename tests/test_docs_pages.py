"""The documentation site has a page for everything the README shows: every README
section (`## ...`) has pages, linked from it or named below, that are in the site's
navigation and mention every `hg.` call and every name imported from `headgate` in
that section's examples; each feature the README names has its own page. And the
process executor's example, a file of its own, runs as its page says."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.doc_examples import DOCS, README, ROOT

pytestmark = pytest.mark.processes

COVERED_BY = {
    "Install": ["docs/reference/install.md"],
    "Two commands": ["docs/reference/install.md"],
    "Embed it in a service": ["docs/tutorial.md", "docs/how-to/operate.md"],
    "Run the jobs": ["docs/tutorial.md", "docs/how-to/operate.md", "docs/how-to/testing.md"],
    "Flow control": [
        "docs/how-to/operate.md",
        "docs/how-to/snooze.md",
        "docs/explanation/timing.md",
    ],
    "Fit the host": [
        "docs/how-to/enqueue.md",
        "docs/how-to/operate.md",
        "docs/how-to/process-executor.md",
        "docs/reference/django.md",
        "docs/how-to/tracing.md",
    ],
    "Security": ["docs/how-to/security.md"],
    "Documentation": ["docs/index.md"],
    "Layout": ["docs/explanation/event-log.md"],
}
"""The pages that cover each README section, beside those it links to."""

FEATURE_PAGES = {
    'executor="process"': "docs/how-to/process-executor.md",
    "Snooze(": "docs/how-to/snooze.md",
    "enqueue_many(": "docs/how-to/enqueue.md",
    "connection=": "docs/how-to/enqueue.md",
    "aenqueue": "docs/how-to/enqueue.md",
    "opentelemetry": "docs/how-to/tracing.md",
    "HeadgateBackend": "docs/reference/django.md",
    "headgate serve": "docs/how-to/deploy.md",
}
"""A feature the README shows (by a term in it) and the page of its own that documents it."""


def _sections() -> dict[str, str]:
    parts = re.split(r"^## ", README.read_text(), flags=re.MULTILINE)[1:]
    return {part.splitlines()[0].strip(): part for part in parts}


def _nav_pages() -> set[str]:
    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may hold tags such as !ENV; the nav holds none.
    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    found: set[str] = set()

    def walk(item: object) -> None:
        if isinstance(item, str):
            found.add(f"docs/{item}")
        elif isinstance(item, list):
            for each in item:
                walk(each)
        elif isinstance(item, dict):
            for each in item.values():
                walk(each)

    walk(nav)
    return found


def _pages_of(title: str, text: str) -> set[str]:
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", text))
    return linked | set(COVERED_BY.get(title, []))


def _names_shown(text: str) -> set[str]:
    code = "".join(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL))
    calls = set(re.findall(r"\bhg\.([a-z_]+)\(", code))
    imported = {
        name.strip()
        for names in re.findall(r"^from headgate(?:\.\w+)* import ([\w, ]+)$", code, re.MULTILINE)
        for name in names.split(",")
    }
    return calls | imported


def test_every_readme_section_is_covered() -> None:
    """A new section is covered by a page before it lands (name it in COVERED_BY)."""
    assert sorted(COVERED_BY) == sorted(_sections())


@pytest.mark.parametrize("title", list(_sections()))
def test_the_sections_pages_are_in_the_site_and_show_what_it_shows(title: str) -> None:
    text = _sections()[title]
    pages = _pages_of(title, text)
    assert pages, f"README section {title!r} has no documentation page"
    assert pages <= _nav_pages(), f"not in mkdocs.yml's nav: {sorted(pages - _nav_pages())}"
    covered = "".join((ROOT / page).read_text() for page in pages)
    missing = sorted(name for name in _names_shown(text) if name not in covered)
    assert missing == [], f"README section {title!r} shows {missing}; none of {sorted(pages)} does"


@pytest.mark.parametrize(("term", "page"), list(FEATURE_PAGES.items()))
def test_each_feature_the_readme_names_has_a_page_of_its_own(term: str, page: str) -> None:
    assert term in README.read_text()
    assert page in _nav_pages()
    assert term in (ROOT / page).read_text()
    assert f"]({page})" in _sections()["Documentation"], f"README's Documentation lacks {page}"


def test_the_process_executor_example_runs_as_its_page_says(tmp_path: Path) -> None:
    example = DOCS / "how-to" / "examples" / "reports.py"
    page = (DOCS / "how-to" / "process-executor.md").read_text()
    assert '--8<-- "docs/how-to/examples/reports.py"' in page
    shutil.copy(example, tmp_path / "reports.py")
    ran = subprocess.run(
        [sys.executable, "reports.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    (printed,) = re.findall(r"It prints `(.*?)`", page)
    assert ran.stdout.strip() == printed
