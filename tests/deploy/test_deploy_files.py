"""The files of the deployment guide (docs/how-to/deploy/) are checked by the
tools that can check them here: the systemd units by `systemd-analyze verify`,
the Kubernetes manifests against the Kubernetes schema (vendored:
`vendor_kubernetes_schema.py`), the Dockerfile's steps run as a script in a
temporary directory standing in for the image's root, then its command. Each
command line in them is parsed by `headgate`'s own parser, and the numbers the
guide matches to each other (the stop timeouts, the probes' paths) are held to
it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml

from headgate.cli._main import build_parser
from headgate.web._probes import HEALTH_PATHS

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "how-to" / "deploy"
UNITS = sorted(DEPLOY.glob("*.service"))
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
DOCKER = DEPLOY / "docker"
SCHEMA = json.loads((Path(__file__).with_name("kubernetes-1.37-strict.json")).read_text())
SCHEMA_OF_KIND = {
    ("apps/v1", "Deployment"): "io.k8s.api.apps.v1.Deployment",
    ("v1", "Service"): "io.k8s.api.core.v1.Service",
    ("policy/v1", "PodDisruptionBudget"): "io.k8s.api.policy.v1.PodDisruptionBudget",
}
STOP_MARGIN_S = 15
"""What the guide adds to the shutdown timeout for a stop: the jobs left given
back, the lease released, the store closed."""
DEFAULT_SHUTDOWN_TIMEOUT_S = 30


def _headgate_arguments(argv: list[str]) -> Any:
    """`argv` (after the `headgate` program) as headgate's parser reads it; a flag
    it does not know fails the test (argparse exits)."""
    return build_parser().parse_args(argv)


def _documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, document)
        for path in MANIFESTS
        for document in yaml.safe_load_all(path.read_text())
        if document is not None
    ]


def _deployments() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in _documents() if d["kind"] == "Deployment"}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


# systemd ---------------------------------------------------------------------


def _unit_settings(path: Path) -> dict[str, str]:
    text = path.read_text().replace("\\\n", " ")
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Za-z]+=", line))


def test_the_guide_has_its_units_and_manifests() -> None:
    assert [p.name for p in UNITS] == ["headgate-worker.service", "headgate.service"]
    assert [p.name for p in MANIFESTS] == ["scheduler.yaml", "workers.yaml"]


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here"
)
@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_the_unit_verifies(unit: Path, tmp_path: Path) -> None:
    """Verified with its ExecStart pointed at this interpreter's `headgate` (verify
    checks the program exists); any warning (an unknown key, a bad value) fails."""
    program = Path(sys.executable).with_name("headgate")
    copied = tmp_path / unit.name
    copied.write_text(unit.read_text().replace("/srv/myservice/venv/bin/headgate", str(program)))
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(copied)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr == ""


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_the_units_stop_is_given_the_shutdown_timeout_and_its_margin(unit: Path) -> None:
    settings = _unit_settings(unit)
    program, *argv = shlex.split(settings["ExecStart"])
    assert program.endswith("/bin/headgate")
    arguments = _headgate_arguments(argv)
    assert settings["KillSignal"] == "SIGTERM"
    assert settings["KillMode"] == "mixed"  # SIGTERM to headgate alone; its children follow it
    grace = getattr(arguments, "shutdown_timeout", DEFAULT_SHUTDOWN_TIMEOUT_S)
    assert int(settings["TimeoutStopSec"]) == grace + STOP_MARGIN_S


# Kubernetes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "document"), _documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_manifest_is_valid_against_the_kubernetes_schema(
    name: str, document: dict[str, Any]
) -> None:
    kind = SCHEMA_OF_KIND[(document["apiVersion"], document["kind"])]
    validator = jsonschema_rs.validator_for({**SCHEMA, "$ref": f"#/$defs/{kind}"})
    errors = [f"{list(e.instance_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert errors == [], f"{name}: {document['kind']}"


def test_the_schema_check_refuses_what_kubernetes_refuses() -> None:
    """The vendored schema is strict: a misspelt field and a wrong type fail."""
    deployment = _deployments()["headgate-worker"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["replicas"] = "3"
    _container(broken)["livenessProbe"] = {"httpGett": {"path": "/healthz"}}
    validator = jsonschema_rs.validator_for(
        {**SCHEMA, "$ref": "#/$defs/io.k8s.api.apps.v1.Deployment"}
    )
    assert len(list(validator.iter_errors(broken))) == 2


@pytest.mark.parametrize("name", ["headgate-worker", "headgate-scheduler"])
def test_each_deployment_runs_a_headgate_command_and_selects_its_pods(name: str) -> None:
    deployment = _deployments()[name]
    spec = deployment["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    program, *argv = _container(deployment)["command"]
    assert program == "headgate"
    _headgate_arguments(argv)


def test_the_workers_grace_period_covers_their_shutdown_timeout() -> None:
    deployment = _deployments()["headgate-worker"]
    arguments = _headgate_arguments(_container(deployment)["command"][1:])
    assert arguments.handler.__name__ == "_worker"
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == arguments.shutdown_timeout + STOP_MARGIN_S


def test_the_scheduler_runs_no_workers_and_is_probed_on_the_probe_routes() -> None:
    deployment = _deployments()["headgate-scheduler"]
    container = _container(deployment)
    arguments = _headgate_arguments(container["command"][1:])
    assert arguments.handler.__name__ == "serve"
    assert arguments.no_workers
    (port,) = container["ports"]
    assert port["containerPort"] == arguments.port
    liveness = container["livenessProbe"]["httpGet"]
    readiness = container["readinessProbe"]["httpGet"]
    assert (liveness["path"], readiness["path"]) == ("/healthz", "/readyz")
    assert {liveness["path"], readiness["path"]} == HEALTH_PATHS
    assert liveness["port"] == readiness["port"] == port["name"]
    assert container["readinessProbe"]["timeoutSeconds"] > 5  # the store's connect timeout
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > pause


def test_the_service_sends_requests_to_the_schedulers_port() -> None:
    (service,) = [d for _, d in _documents() if d["kind"] == "Service"]
    scheduler = _deployments()["headgate-scheduler"]
    assert service["spec"]["selector"] == scheduler["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in _container(scheduler)["ports"]}


# Docker ----------------------------------------------------------------------


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments), continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [
        (word.upper(), rest.strip())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
        for word, _, rest in [line.strip().partition(" ")]
    ]


def test_the_image_is_of_a_python_headgate_supports() -> None:
    (base,) = [rest for word, rest in _instructions(DOCKER / "Dockerfile") if word == "FROM"]
    found = re.fullmatch(r"python:3\.(\d+)-slim", base)
    assert found, base
    needed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert int(found[1]) >= int(needed.removeprefix(">=3."))


def test_the_requirements_pin_this_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    lines = [
        line
        for line in (DOCKER / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines == [f"headgate-jobs[server,postgresql]=={version}"]


def _as_a_script(dockerfile: Path, root: Path) -> tuple[str, list[str], Path]:
    """The Dockerfile's steps as one shell script run with `root` for the image's
    /, the context beside the Dockerfile; its CMD, and its last WORKDIR."""
    lines = ["set -eu"]
    workdir = root
    command: list[str] = []

    def rooted(text: str) -> str:
        return re.sub(r"(?<![\w.$/])/(opt|srv)/", lambda m: f"{root}/{m[1]}/", text)

    for word, rest in _instructions(dockerfile):
        if word == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                lines.append(f'export {name}="{rooted(value)}"')
        elif word == "RUN":
            lines.append(rooted(rest))
        elif word == "WORKDIR":
            workdir = Path(rooted(rest))
            lines.append(f"mkdir -p {workdir} && cd {workdir}")
        elif word == "COPY":
            *sources, target = shlex.split(rest)
            for source in sources:
                lines.append(f"cp -R {dockerfile.parent / source} {workdir / target}")
        elif word == "CMD":
            command = json.loads(rest)
        else:
            assert word in {"FROM", "USER", "EXPOSE"}, f"{word}: not run by this test"
    return "\n".join(lines) + "\n", command, workdir


def test_the_dockerfiles_steps_install_headgate_and_its_command_runs(tmp_path: Path) -> None:
    """What `docker build` would do, on this machine's Python: pip installs the
    requirements (Headgate from a wheel of this tree), then the image's command,
    a worker of the example app, starts and stops cleanly on SIGTERM."""
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    root = tmp_path / "image"
    root.mkdir()
    script, command, workdir = _as_a_script(DOCKER / "Dockerfile", root)
    tools = tmp_path / "tools"  # `python` as the base image has it: this interpreter's base
    tools.mkdir()
    (tools / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    environment = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "PIP_FIND_LINKS": " ".join(filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS")])),
    }
    environment.pop("PYTHONPATH", None)
    environment.pop("VIRTUAL_ENV", None)
    ran = subprocess.run(
        ["sh", "-c", script],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, f"{script}\n{ran.stdout}\n{ran.stderr}"
    assert re.search(r"^headgate \d", ran.stdout, re.MULTILINE), ran.stdout  # headgate --version

    venv_bin = root / "opt" / "venv" / "bin"
    program, *argv = command
    assert program == "headgate"
    worker = subprocess.Popen(
        [str(venv_bin / program), *argv],
        cwd=workdir,
        env={**environment, "HEADGATE_DB": f"sqlite:///{tmp_path / 'image.db'}"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        seen: list[str] = []
        while not (seen and seen[-1].startswith("headgate: worker running the handlers of")):
            line = worker.stderr.readline()
            assert line, "the worker exited:\n" + "".join(seen)
            seen.append(line)
        logged = [json.loads(line) for line in seen[:-1]]  # not a terminal: JSON lines
        assert {"event", "level", "timestamp"} <= logged[0].keys()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
