"""Every Python example of the documentation site runs as written: each page's
examples in order, each in a process of its own, in one directory per page (a
page may build on its earlier examples). A PostgreSQL URL is swapped for a
SQLite file. Some examples are held to what their comments say they show."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate
from headgate.cli._main import build_parser
from headgate.web import create_app
from tests.doc_examples import DOCS, Example, doc_pages, example_with, examples_in
from tests.web.conftest import LOCAL

pytestmark = pytest.mark.processes

PAGES_WITH_EXAMPLES = [page for page in doc_pages() if examples_in(page)]
SKIPPED = {
    "docs/how-to/django.md[0]": "settings of a Django project",
    "docs/how-to/django.md[2]": "an AppConfig runs only inside a Django project",
}
"""The Django backend itself runs in a Django project: tests/contrib/test_django.py."""


def _run(example: Example, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", example.on_sqlite(directory)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda page: str(page.relative_to(DOCS)))
def test_the_pages_examples_run(page: Path, tmp_path: Path) -> None:
    for example in examples_in(page):
        if example.skip is None:
            result = _run(example, tmp_path)
            assert result.returncode == 0, f"{example.name}:\n{result.stderr}"


def test_only_examples_that_cannot_run_here_are_skipped() -> None:
    skipped = {
        example.name: example.skip
        for page in doc_pages()
        for example in examples_in(page)
        if example.skip is not None
    }
    assert skipped == SKIPPED


def test_the_tutorial_runs_a_handler_on_every_tick(tmp_path: Path) -> None:
    write, read = examples_in(DOCS / "tutorial.md")
    ran = _run(write, tmp_path)
    assert ran.returncode == 0, ran.stderr
    ticks = ran.stdout.splitlines()
    assert len(ticks) >= 2
    assert all(line.endswith("for {'service': 'billing'}") for line in ticks)
    shown = _run(read, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith("@every:1000 ")
    assert " enqueued accepted " in shown.stdout
    assert " completed {'attempt': 1}" in shown.stdout


def test_the_mounting_example_runs_the_scheduler_with_the_host(tmp_path: Path) -> None:
    """The host's lifespan starts Headgate and closes it; the API answers under the mount."""
    example = examples_in(DOCS / "how-to" / "fastapi.md")[0]
    url = f"sqlite:///{tmp_path / 'postgres-stand-in.db'}"
    namespace: dict[str, Any] = {}
    exec(compile(example.on_sqlite(tmp_path), example.page, "exec"), namespace)
    hg = namespace["hg"]
    with TestClient(namespace["app"], base_url=LOCAL) as client:
        assert hg.running
        deadline = time.monotonic() + 10
        while hg.runtime.lease() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hg.runtime.lease() is not None, "the runtime took the scheduler lease"
        assert client.get("/scheduler/api/v1/periodic").status_code == 200
    assert not hg.running
    with Headgate(url) as observer:
        assert observer.runtime.lease() is None, "closing with the host released the lease"


def test_the_gunicorn_hooks_start_and_close_headgate_in_the_worker(tmp_path: Path) -> None:
    (example,) = examples_in(DOCS / "how-to" / "gunicorn.md")
    namespace: dict[str, Any] = {}
    exec(
        compile(example.code.replace("sqlite:///", f"sqlite:///{tmp_path}/"), "conf", "exec"),
        namespace,
    )
    hg = namespace["hg"]
    assert not hg.running, "made in the master, not started there"
    namespace["post_fork"](None, None)
    assert hg.running
    namespace["worker_exit"](None, None)
    assert not hg.running


def test_the_testing_example_runs(tmp_path: Path) -> None:
    result = _run(examples_in(DOCS / "how-to" / "testing.md")[0], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "enqueued"


def test_the_tasks_examples_print_what_their_comments_say(tmp_path: Path) -> None:
    """Each `print(...)  # shown` line of the tasks page prints what its comment shows."""
    for example in examples_in(DOCS / "how-to" / "tasks.md"):
        result = _run(example, tmp_path)
        assert result.returncode == 0, f"{example.name}:\n{result.stderr}"
        promised = re.findall(r"^ *print\(.*\)  # (.*)$", example.code, flags=re.MULTILINE)
        assert promised, example.name
        printed = result.stdout.strip().splitlines()
        assert printed[-len(promised) :] == promised, example.name


def test_the_operating_examples_show_what_their_comments_say(tmp_path: Path) -> None:
    outputs = [_run(example, tmp_path) for example in examples_in(DOCS / "how-to" / "operate.md")]
    assert [result.returncode for result in outputs] == [0] * 10, [r.stderr for r in outputs]
    assert outputs[0].stdout == "60000\n"
    assert outputs[1].stdout == "('paused',)\nFalse\n"
    alert, health, runs = outputs[2].stdout.splitlines()
    assert alert.startswith("ScheduleAlert(kind='failure', schedule_id='nightly', job_id=")
    assert "consecutive_failures=2, error_type='ConnectionError'" in alert
    assert (health, runs) == ("failing 2 ConnectionError", "['failed', 'failed']")
    before, change, job = outputs[3].stdout.splitlines()
    assert before == "0 2 * * * operator:python"
    assert change.startswith("changed operator:python [('spec', '0 2 * * *', '0 3 * * *'), (")
    assert "s3cret" not in outputs[3].stdout and job == "defined"
    assert outputs[4].stdout == "failed ConnectionError\ncancelled\n"
    assert outputs[5].stdout == "3\n3 0 False\n"
    assert outputs[6].stdout.splitlines()[0] == "quarantined"
    assert outputs[7].stdout == "[('reports', True, 1, 'warehouse migration')]\n"
    assert outputs[8].stdout == "skip 30000\n"
    assert outputs[9].stdout == "* 1 ()\n"


def test_the_backfill_example_fires_the_three_latest_hours(tmp_path: Path) -> None:
    (example,) = examples_in(DOCS / "explanation" / "timing.md")
    result = _run(example, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[1704078000000, 1704081600000, 1704085200000]\n"


def test_the_ops_example_runs(tmp_path: Path) -> None:
    code = example_with(DOCS / "how-to" / "store.md", "from headgate import Headgate, ops")
    result = _run(Example("store.md", 0, code, None), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "True 0"


def test_the_metrics_example_exposes_headgates_metrics_in_the_hosts_registry(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    example = example_with(DOCS / "how-to" / "metrics.md", "metrics.collector")
    namespace: dict[str, Any] = {}
    exec(compile(example.replace("sqlite:///headgate.db", url), "metrics.md", "exec"), namespace)
    hg = namespace["hg"]
    try:
        with TestClient(namespace["app"], base_url=LOCAL) as client:
            response = client.get("/metrics/")
        assert response.status_code == 200
        assert "headgate_store_up 1.0" in response.text
        assert "python_info" in response.text  # the host's own registry, Headgate's beside
    finally:
        namespace["REGISTRY"].unregister(hg.metrics.collector)
        hg.close()


def test_the_http_reference_names_every_route() -> None:
    text = (DOCS / "reference" / "http-api.md").read_text()
    with Headgate("memory://") as hg:
        paths = create_app(hg).openapi()["paths"]
    missing = []
    for path in paths:
        route = re.sub(r"\{\w+\}", "{id}", path.removeprefix("/api/v1")).replace("{id}:", ":")
        shown = (
            route.replace("/quarantine/{id}", "/quarantine/{fp}")
            .replace("/queues/{id}", "/queues/{name}")
            .replace("/rates/{id}", "/rates/{class}")
        )
        if shown not in text and f"`/{shown.rsplit('/', 1)[1]}`" not in text:
            missing.append(path)
    assert missing == []


def _commands(parser: argparse.ArgumentParser, prefix: str = "headgate") -> list[str]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for shown in action._choices_actions:  # a command's former name is not shown
                name = shown.dest
                found.append(f"{prefix} {name}")
                found.extend(_commands(action.choices[name], f"{prefix} {name}"))
    return found


def test_the_cli_reference_names_every_command() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    commands = _commands(build_parser())
    assert len(commands) > 20
    assert [command for command in commands if command not in text] == []
