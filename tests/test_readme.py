"""The README says what a newcomer needs first, and its examples run as written:
which distribution to install, the two commands, embedding and running jobs.
The rest of what it said is in the documentation site, whose examples
tests/test_docs_examples.py runs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from headgate import Headgate
from tests.doc_examples import README, examples_in

pytestmark = pytest.mark.processes


def _run(code: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """The example run twice in one directory, as a reader runs it again: the
    second run's result, which must match the first's."""
    return _twice([sys.executable, "-c", code], directory)


def _twice(command: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    runs = [
        subprocess.run(
            command, cwd=directory, capture_output=True, text=True, timeout=120, check=False
        )
        for _ in range(2)
    ]
    first, second = runs
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, f"it fails when run again:\n{second.stderr}"
    assert second.stdout == first.stdout, "run again, it prints something else"
    return second


def test_the_readme_says_which_distribution_to_install() -> None:
    install = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", install, flags=re.DOTALL)[0]
    assert "pip install headgate-jobs " in commands
    assert "pip install 'headgate-jobs[postgresql]'" in commands
    assert "the import name is `headgate`" in install
    assert "`pip install headgate`\ndoes not install this one" in install


def test_the_embedding_example_runs(tmp_path: Path) -> None:
    result = _run(examples_in(README)[0].code, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].isdigit()  # next_run_ms
    assert lines[1] == "None"  # a manual run has no periodic origin
    assert (tmp_path / "headgate.db").exists()


def test_the_readme_gives_exactly_two_shell_commands() -> None:
    section = README.read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert [c.strip() for c in commands] == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[server]' "
        "&& .venv/bin/headgate serve",
        "sh tests/run.sh",
    ]
    assert "sh tests/run.sh" in (README.parent / ".ci" / "run").read_text()


def _extra(name: str) -> set[str]:
    """The distributions an extra names, without versions; an extra of this
    project it names (`headgate-jobs[a,b]`) is expanded."""
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named: set[str] = set()
    for requirement in extras[name]:
        distribution = re.split(r"[<>=\[;]", requirement, maxsplit=1)[0].strip().lower()
        if distribution == "headgate-jobs":
            for inner in re.findall(r"\[(.*?)\]", requirement)[0].split(","):
                named |= _extra(inner.strip())
        else:
            named.add(distribution)
    return named


def test_the_set_up_commands_install_what_serve_and_the_tests_need() -> None:
    """`headgate serve` needs the server extra: the first command installs it,
    and `tests/run.sh` (and so `.ci/run`) installs `dev`, which holds it."""
    server = _extra("server")
    assert {"fastapi", "uvicorn", "pydantic", "jinja2"} <= server
    assert server <= _extra("dev")
    assert "-e '.[dev]'" in (README.parent / "tests" / "run.sh").read_text()


def test_the_jobs_example_runs_the_handler(tmp_path: Path) -> None:
    result = _run(examples_in(README)[1].code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "sending to ada@example.com (attempt 1)",
        "{'sent': 'ada@example.com'}",
    ]
    with Headgate(f"sqlite:///{tmp_path / 'jobs.db'}") as hg:
        assert hg.schedules.get("nightly-report").kind == "nightly-report"


def test_the_readme_links_to_pages_that_exist() -> None:
    links = re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", README.read_text())
    assert len(links) >= 15
    assert [link for link in links if not (README.parent / link).is_file()] == []


def test_the_flow_control_example_pauses_a_queue_and_runs_by_priority(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if "queues.pause" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["0 [('invoices', True, 2)]", "[2, 1]"]


def test_the_overlap_example_skips_ticks_and_expires_the_late_job(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if 'overlap="skip"' in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[('enqueued', 'accepted'), ('skipped', 'overlap'), ('skipped', 'overlap')]",
        "['expired']",
    ]


def test_the_limits_example_shares_fairly_and_keeps_the_rate(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if "rates.set" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "30 1",
        "('rate class mail-api: 30 per 60000 ms',)",
        "[('mail-api', 30)]",
    ]


def test_the_snooze_example_runs_the_job_again_with_its_one_attempt(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if "Snooze(" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["pending 1", "1 ['succeeded', 'snoozed']"]


def test_the_transactional_example_keeps_a_job_only_with_its_committed_order(
    tmp_path: Path,
) -> None:
    example = next(e for e in examples_in(README) if "enqueue_many(" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[2]", "['order.mail', 'order.ship']"]


def test_the_async_example_names_the_extra_it_needs() -> None:
    """SQLAlchemy's asyncio extension needs greenlet, which SQLAlchemy 2.1 leaves
    to its `asyncio` extra: the example's install note names Headgate's `async`
    extra, which brings it (and `dev`, which runs the example, has it)."""
    example = next(e for e in examples_in(README) if "aenqueue" in e.code)
    assert "# pip install 'headgate-jobs[async]' aiosqlite\n" in example.code
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [r for r in extras["async"] if r.lower().startswith("sqlalchemy[asyncio]")]
    assert any("async" in r for r in extras["dev"] if r.startswith("headgate-jobs["))
    install = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'headgate-jobs[async]'" in install


def test_the_async_example_enqueues_on_and_off_the_hosts_transaction(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if "aenqueue" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["pending 2"]


def test_the_process_executor_example_kills_the_stuck_attempt_and_retries(tmp_path: Path) -> None:
    example = next(e for e in examples_in(README) if 'executor="process"' in e.code)
    (tmp_path / "reports.py").write_text(example.code)
    result = _twice([sys.executable, "reports.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "completed {'in_a_child': True, 'total': 499500} ['succeeded', 'timed_out']"
    )


def test_the_django_example_enqueues_in_the_transaction_and_runs_the_task(
    tmp_path: Path,
) -> None:
    example = next(e for e in examples_in(README) if "HeadgateBackend" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "SUCCESSFUL welcome, ada"
    assert (tmp_path / "site.db").exists()


def test_the_tracing_example_puts_the_enqueue_and_the_attempt_in_the_hosts_trace(
    tmp_path: Path,
) -> None:
    example = next(e for e in examples_in(README) if "TracerProvider" in e.code)
    result = _run(example.code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "['POST /orders', 'enqueue invoice.send', 'run invoice.send'] 1"
    )
