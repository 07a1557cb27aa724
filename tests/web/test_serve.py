"""`headgate serve` as a newcomer runs it: answers within seconds, stops cleanly."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from headgate import Headgate
from tests.web.serving import (
    Served,
    headgate_command,
    serving,
    serving_printed,
    wait_until_answering,
)

pytestmark = pytest.mark.processes


def test_serve_answers_quickly_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    with serving(tmp_path) as (process, base):
        assert wait_until_answering(f"{base}/api/v1/periodic") < 10
        request = urllib.request.Request(
            f"{base}/api/v1/periodic/pulse",
            data=json.dumps({"kind": "demo", "spec": "@every:1000"}).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 201
        with urllib.request.urlopen(f"{base}/", timeout=5) as response:
            page = response.read().decode()
        assert "pulse" in page and "Every second" in page
        _wait_for_first_tick(f"{base}/api/v1/periodic/pulse/enqueue-events")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        output = process.stdout.read() if process.stdout else ""
        assert "Traceback" not in output
    database = tmp_path / "headgate.db"
    assert database.exists(), "the embedded default lives in the working directory"
    hg = Headgate(f"sqlite:///{database}")
    try:
        assert hg.runtime.lease() is None, "SIGTERM released the scheduler lease"
    finally:
        hg.close()


def _wait_for_first_tick(url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as response:
            if json.loads(response.read())["events"]:
                return
        time.sleep(0.2)
    raise AssertionError(f"no tick recorded within {timeout} s")


def test_serve_rejects_a_bad_port_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [headgate_command(), "serve", "--port", "99999"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "error: headgate serve: argument --port: must be 0-65535, got 99999"
    )


def _unopenable(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """SQLite paths no store can be opened at: (URL, what the error says)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return {
        "missing directory": (
            "sqlite:////nonexistent-dir/x.db",
            "/nonexistent-dir/x.db: directory /nonexistent-dir does not exist",
        ),
        "under a file": (f"sqlite:///{a_file}/x.db", f"{a_file}/x.db: {a_file} is not a directory"),
        "a directory": (f"sqlite:///{tmp_path}", f"{tmp_path}: it is a directory"),
    }


@pytest.mark.parametrize("case", ["missing directory", "under a file", "a directory"])
def test_serve_names_an_unopenable_sqlite_path_in_one_line(case: str, tmp_path: Path) -> None:
    url, reason = _unopenable(tmp_path)[case]
    before = sorted(tmp_path.iterdir())
    result = subprocess.run(
        [headgate_command(), "serve", "--db", url, "--port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: store URL: cannot open the SQLite database {reason}\n"
    assert sorted(tmp_path.iterdir()) == before
    assert not Path("/nonexistent-dir").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any directory")
def test_serve_names_a_read_only_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    result = subprocess.run(
        [headgate_command(), "serve", "--db", f"sqlite:///{locked}/x.db", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"error: store URL: cannot open the SQLite database {locked}/x.db: directory {locked} "
        "is not writable (SQLite keeps its journal beside the file)\n"
    )


def _status(base: str, host: str) -> int:
    request = urllib.request.Request(f"{base}/api/v1/periodic", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _stopped_output(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    return process.stdout.read() if process.stdout else ""


def test_serve_answers_the_hosts_it_is_told_and_loopback_names_only(tmp_path: Path) -> None:
    with serving(
        tmp_path, "--allowed-host", "scheduler.internal", "--allowed-host", "b.internal"
    ) as (
        process,
        base,
    ):
        wait_until_answering(f"{base}/healthz")
        for host, status in (
            ("scheduler.internal:8080", 200),
            ("b.internal", 200),
            ("localhost", 200),
            ("attacker.example", 400),
        ):
            assert _status(base, host) == status, host
        output = _stopped_output(process)
    assert "warning" not in output, "a loopback bind warns of nothing"
    with serving(tmp_path, environment={"HEADGATE_ALLOWED_HOSTS": "env.internal"}) as (_, base):
        wait_until_answering(f"{base}/healthz")
        assert _status(base, "env.internal") == 200
        assert _status(base, "scheduler.internal") == 400


def test_serve_on_every_address_without_a_token_warns_and_answers_this_machine(
    tmp_path: Path,
) -> None:
    environment = {"HEADGATE_API_TOKEN": "", "HEADGATE_ALLOWED_HOSTS": ""}
    with serving(tmp_path, "--host", "0.0.0.0", environment=environment) as (process, base):
        wait_until_answering(f"{base}/healthz")
        assert _status(base, socket.gethostname()) == 200
        assert _status(base, "127.0.0.1") == 200
        assert _status(base, "attacker.example") == 400
        output = _stopped_output(process)
    assert (
        "headgate: warning: listening on 0.0.0.0 with no HEADGATE_API_TOKEN: anyone who can "
        "reach this address can read and change its schedules and jobs" in output
    )
    assert (
        f"answering requests addressed to localhost, 127.0.0.1, [::1], {socket.gethostname()}"
        in output
    )
    with serving(
        tmp_path, "--host", "0.0.0.0", environment={**environment, "HEADGATE_API_TOKEN": "t"}
    ) as (process, base):
        wait_until_answering(f"{base}/healthz")
        assert "warning" not in _stopped_output(process), "with a token it is not open"


def _this_machines_address() -> str:
    """An IPv4 address of one of this machine's interfaces that is not loopback:
    the one it would send from to a documentation address (nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))
        except OSError:
            pytest.skip("no route off this machine: no address but loopback to reach it by")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this machine has no address but loopback")
    return address


def _answered_line(served: Served) -> list[str]:
    """The names serve's line says it answers, in order."""
    found = re.search(
        r"headgate: answering requests addressed to (.*); name others", served.output()
    )
    assert found is not None, served.output()
    return found[1].split(", ")


def _port(served: Served) -> str:
    return served.base.rsplit(":", 1)[1]


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
def test_serve_on_every_address_answers_each_address_it_names(bind: str, tmp_path: Path) -> None:
    """A request by this machine's interface address is answered (the name may
    resolve to loopback only), and every name the line lists is answered."""
    address = _this_machines_address()
    environment = {"HEADGATE_API_TOKEN": "t", "HEADGATE_ALLOWED_HOSTS": ""}
    with serving_printed(tmp_path, "--host", bind, env=environment) as served:
        port = _port(served)
        named = _answered_line(served)
        assert named[:4] == ["localhost", "127.0.0.1", "[::1]", socket.gethostname()], named
        if bind == "0.0.0.0":
            assert address in named, named
            assert not any(":" in name for name in named[3:]), "no IPv6 address on an IPv4 socket"
        for name in named:
            assert _status(served.base, f"{name}:{port}") == 401, name  # past the Host check
        assert _status(served.base, f"attacker.example:{port}") == 400
        if address in named:
            assert _status(f"http://{address}:{port}", f"{address}:{port}") == 401


@pytest.mark.parametrize("which", ["an interface's", "a loopback one but 127.0.0.1"])
def test_serve_on_an_address_answers_it_besides_the_hosts_it_is_told(
    which: str, tmp_path: Path
) -> None:
    """The address it prints is answered whatever else is named, by flag or environment."""
    address = _this_machines_address() if which == "an interface's" else "127.0.0.2"
    told: list[tuple[list[str], dict[str, str]]] = [
        (["--allowed-host", "jobs.internal"], {"HEADGATE_ALLOWED_HOSTS": ""}),
        ([], {"HEADGATE_ALLOWED_HOSTS": "jobs.internal"}),
    ]
    for flags, environment in told:
        environment["HEADGATE_API_TOKEN"] = "t"
        with serving_printed(tmp_path, "--host", address, *flags, env=environment) as served:
            port = _port(served)
            assert served.base == f"http://{address}:{port}"
            assert _answered_line(served) == [
                "localhost",
                "127.0.0.1",
                "[::1]",
                address,
                "jobs.internal",
            ]
            for host, status in ((address, 401), ("jobs.internal", 401), ("attacker.example", 400)):
                assert _status(served.base, f"{host}:{port}") == status, (flags, host)


def test_serve_names_a_bad_allowed_host_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [headgate_command(), "serve", "--port", "0", "--allowed-host", "a b"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: headgate serve: --allowed-host (or $HEADGATE_ALLOWED_HOSTS): "
        "'a b' is not a host name\n"
    )
    assert not (tmp_path / "headgate.db").exists(), "refused before the store is opened"


def _put(base: str, schedule_id: str, spec: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{base}/api/v1/periodic/{schedule_id}",
        data=json.dumps({"kind": "demo", "spec": spec}).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_serve_takes_the_minimum_interval_from_its_flag(tmp_path: Path) -> None:
    with serving(tmp_path, "--min-interval-ms", "250") as (process, base):
        wait_until_answering(f"{base}/api/v1/periodic")
        assert _put(base, "quarter", "@every:250ms")[0] == 201
        assert _put(base, "fast", "@every:100") == (
            422,
            {
                "error": "spec: interval 100 ms is below the minimum of 250 ms "
                "(RuntimeConfig.min_interval_ms)"
            },
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


@pytest.mark.parametrize(
    ("argv", "environment", "message"),
    [
        (
            ["--app", "nowhere:hg", "--min-interval-ms", "5"],
            {},
            "error: --min-interval-ms: --app names its own Headgate: "
            "set RuntimeConfig.min_interval_ms",
        ),
        (
            ["--min-interval-ms", "0"],
            {},
            "error: headgate serve: argument --min-interval-ms: must be 1-60000, got 0",
        ),
        (
            [],
            {"HEADGATE_MIN_INTERVAL_MS": "1s"},
            "error: HEADGATE_MIN_INTERVAL_MS: must be a whole number from 1 to 60000",
        ),
    ],
)
def test_serve_refuses_a_bad_minimum_interval_in_one_line(
    tmp_path: Path, argv: list[str], environment: dict[str, str], message: str
) -> None:
    result = subprocess.run(
        [headgate_command(), "serve", "--port", "0", *argv],
        cwd=tmp_path,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (result.returncode, result.stderr) == (2, message + "\n")
    assert list(tmp_path.iterdir()) == [], "a refused serve created a store"


def _raw_status(base: str, request: str) -> int:
    """The status of `request`, sent as it is on a connection of its own."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request.encode())
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    return int(answer.split(b" ", 2)[1])


def _guess(base: str, forwarded_for: str) -> int:
    return _raw_status(
        base,
        "GET /api/v1/periodic HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: Bearer wrong\r\nX-Forwarded-For: {forwarded_for}\r\n\r\n",
    )


def test_serve_throttles_wrong_tokens_whatever_x_forwarded_for_claims(tmp_path: Path) -> None:
    """Issue 36: from loopback, each guess claiming a fresh X-Forwarded-For was a
    fresh client (1,800 guesses in 2 s, no 429), logged by the forged address."""
    environment = {"HEADGATE_API_TOKEN": "the-token"}
    with serving_printed(tmp_path, env=environment) as served:
        statuses = [_guess(served.base, f"198.51.100.{n}") for n in range(30)]
        output = served.output()
    assert statuses == [401] * 10 + [429] * 20
    assert "198.51.100" not in output, "no forged address is logged"
    assert output.count('"client": "127.0.0.1"') == 10, output


def test_serve_believes_x_forwarded_for_from_the_proxies_it_is_told(tmp_path: Path) -> None:
    environment = {"HEADGATE_API_TOKEN": "the-token"}
    flags = ("--forwarded-allow-ips", "127.0.0.1,::1")
    with serving_printed(tmp_path, *flags, env=environment) as served:
        first = [_guess(served.base, f"6.6.6.{n}, 203.0.113.5") for n in range(11)]
        other = _guess(served.base, "203.0.113.6")
        output = served.output()
    assert (first, other) == ([401] * 10 + [429], 401)
    assert output.count('"client": "203.0.113.5", "via": "127.0.0.1"') == 10, output
    assert "6.6.6" not in output


def test_serve_refuses_a_proxy_that_is_no_address_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [headgate_command(), "serve", "--port", "0", "--forwarded-allow-ips", "proxy.internal"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (
        2,
        "error: headgate serve: --forwarded-allow-ips: 'proxy.internal' is not an IP address "
        "or network (e.g. 10.0.0.5, 10.0.0.0/8, or '*' for any)\n",
    )
    assert list(tmp_path.iterdir()) == [], "refused before the store is opened"


def test_serve_with_no_workers_fires_the_apps_ticks_and_runs_none_of_its_jobs(
    tmp_path: Path,
) -> None:
    """`--no-workers`: the scheduler and console of a deployment whose workers run
    apart (`headgate worker`); the app's schedules are declared and fire here."""
    (tmp_path / "deployed.py").write_text(
        "from headgate import Headgate, JobContext\n"
        "hg = Headgate('sqlite:///deployed.db')\n"
        "@hg.periodic('pulse', spec='@every:1000')\n"
        "def pulse(job: JobContext) -> None:\n"
        "    pass\n"
    )
    with serving(tmp_path, "--app", "deployed:hg", "--no-workers") as (process, base):
        wait_until_answering(f"{base}/api/v1/periodic")
        _wait_for_first_tick(f"{base}/api/v1/periodic/pulse/enqueue-events")
        with urllib.request.urlopen(f"{base}/api/v1/workers", timeout=5) as response:
            assert json.loads(response.read())["workers"] == []
        with urllib.request.urlopen(f"{base}/api/v1/jobs?state=pending", timeout=5) as response:
            assert json.loads(response.read())["jobs"], "the tick's job waits for a worker"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
