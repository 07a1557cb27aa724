"""Smoke test of the core install: the wheel without the server extra.

Run by `.ci/package` with the Python of a fresh venv that has only the wheel
installed (no extra), from an empty directory. It checks that `import headgate`
loads nothing of the server extra, that a store is made and migrated, a job runs
and the store's commands answer, and that `headgate serve` and `headgate.web`
say in one line what to install. The first failure exits 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SERVER_PACKAGES = ("fastapi", "starlette", "pydantic", "uvicorn", "jinja2", "swagger_ui_bundle")
INSTALL = "pip install 'headgate-jobs[server]'"
HEADGATE = Path(sys.executable).with_name("headgate")
URL = "sqlite:///core.db"


def check(condition: bool, what: str, detail: str = "") -> None:
    if not condition:
        sys.exit(f"smoke-core: FAILED: {what}\n{detail}")
    print(f"smoke-core: ok: {what}")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def main() -> None:
    for package in SERVER_PACKAGES:
        found = run(sys.executable, "-c", f"import {package}")
        check(found.returncode != 0, f"{package} is not installed")

    loaded = run(
        sys.executable,
        "-c",
        "import sys, headgate, headgate.cli\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {SERVER_PACKAGES!r}))",
    )
    check(
        loaded.stdout == "[]\n", "import headgate loads nothing of the server extra", loaded.stderr
    )

    made = run(
        sys.executable,
        "-c",
        "from headgate import Headgate, JobContext\n"
        f"with Headgate({URL!r}) as hg:\n"
        "    @hg.handler('core.ping')\n"
        "    def ping(job: JobContext) -> str:\n"
        "        return 'pong'\n"
        "    job = hg.enqueue('core.ping')\n"
        "    hg.drain()\n"
        "    hg.schedules.put('pulse', spec='@every:60000', kind='core.ping')\n"
        "    print(hg.jobs.get(job.id).result)\n",
    )
    check(made.stdout == "pong\n", "a store is made and migrated, and a job runs", made.stderr)

    for argv in (
        ("schedules", "list"),
        ("jobs", "list"),
        ("events", "show", "--limit", "3"),
        ("projections", "rebuild", "--verify"),
    ):
        ran = run(str(HEADGATE), *argv, "--db", URL)
        check(ran.returncode == 0, f"headgate {' '.join(argv)}", ran.stdout + ran.stderr)

    served = run(str(HEADGATE), "serve", "--port", "0")
    lines = served.stderr.splitlines()
    check(
        served.returncode == 2 and len(lines) == 1 and lines[0].endswith(INSTALL),
        "headgate serve says what to install, in one line",
        served.stderr,
    )
    web = run(sys.executable, "-c", "import headgate.web")
    check(
        web.returncode == 1 and web.stderr.strip().splitlines()[-1].endswith(INSTALL),
        "import headgate.web says what to install",
        web.stderr,
    )


if __name__ == "__main__":
    main()
