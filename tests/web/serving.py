"""Start `headgate serve` the way the README says, for end-to-end tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def headgate_command() -> str:
    """The console script installed next to this interpreter (what README runs)."""
    return str(Path(sys.executable).with_name("headgate"))


def server_environment() -> dict[str, str]:
    """This environment, with this checkout first on PYTHONPATH: the server runs
    the code under test, not whatever the console script's install points at (a
    relative PYTHONPATH would resolve in the server's working directory)."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def wait_until_answering(url: str, timeout: float = 15.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@contextmanager
def serving(
    directory: Path, *extra: str, environment: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    process = subprocess.Popen(
        [headgate_command(), "serve", "--port", str(port), *extra],
        cwd=directory,
        env={**server_environment(), **(environment or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


SERVING_LINE = re.compile(r"^headgate: serving .* on (http://\S+)/\n", re.MULTILINE)
"""The line, whole and on its own: serve writes every line to stderr in one call."""


@dataclass
class Served:
    """A `headgate serve` started on port 0, at the address it printed."""

    process: subprocess.Popen[bytes]
    base: str
    stdout: Path
    stderr: Path

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()


@contextmanager
def serving_printed(
    directory: Path, *extra: str, env: dict[str, str] | None = None, timeout: float = 120.0
) -> Iterator[Served]:
    """`headgate serve --port 0 ...`, its output in files; yields once it has
    printed where it serves (it is listening by then), killed if still running."""
    out, err = directory / "serve.out", directory / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [headgate_command(), "serve", "--port", "0", *extra],
            cwd=directory,
            env={**server_environment(), **(env or {})},
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + timeout
        while (found := SERVING_LINE.search(err.read_text())) is None:
            if process.poll() is not None:
                raise AssertionError(f"serve exited {process.returncode}: {err.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"serve printed no address in {timeout} s: {err.read_text()}")
            time.sleep(0.05)
        yield Served(process, found[1], out, err)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
