"""A store URL's password appears in no output: every line `headgate serve`
prints, its logs (Headgate's, uvicorn's), every HTTP body and header it sends,
every CLI command's output and errors (good input and bad), the exceptions
`headgate.ops` raises (their whole chain), and the repr of what holds a URL.

PostgreSQL here takes any password (trust auth), so a URL carrying the marker
really connects: the paths that work are exercised, not only the failures.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from headgate import Headgate, _redact, ops
from headgate._domain.ids import fingerprint_of_text
from headgate._errors import HeadgateError
from headgate.cli import main
from tests.conftest import drop_postgres_schema, fresh_postgres_url
from tests.web.serving import headgate_command, server_environment, serving_printed

pytestmark = pytest.mark.processes

MARKER = "MARKER-PW-123"
SEEN = "MARKER"
"""What no output may contain: the marker in any spelling (percent-encoding
leaves its letters as they are)."""


@dataclass
class MarkedStore:
    """A fresh schema reached through URLs that carry the marker password."""

    server_url: str
    schema: str
    url: str
    """postgresql+psycopg://postgres:MARKER-PW-123@.../headgate_test?options=..."""

    def spelled(self, how: str) -> str:
        """The same store, its password given another way."""
        parsed = make_url(self.url)
        if how == "platform, percent-encoded":  # postgres:// as platforms write it
            rest = self.with_password_written(MARKER.replace("-", "%2D")).split("://", 1)[1]
            return "postgres://" + rest
        if how == "query":
            return (
                parsed.set(password=None)
                .update_query_dict({"password": MARKER})
                .render_as_string(hide_password=False)
            )
        return self.url

    def with_password_written(self, written: str) -> str:
        """The URL with its password written as given, not encoded by SQLAlchemy."""
        placeholder = "PASSWORD-PLACEHOLDER"
        rendered = make_url(self.url).set(password=placeholder)
        return rendered.render_as_string(hide_password=False).replace(placeholder, written, 1)


@pytest.fixture
def marked(postgres_server_url: str) -> Iterator[MarkedStore]:
    url, schema = fresh_postgres_url(postgres_server_url)
    with_marker = make_url(url).set(password=MARKER).render_as_string(hide_password=False)
    yield MarkedStore(postgres_server_url, schema, with_marker)
    drop_postgres_schema(postgres_server_url, schema)


@pytest.fixture
def second_schema(postgres_server_url: str) -> Iterator[str]:
    """A second fresh schema's URL with the marker: a `replay --to` target."""
    url, schema = fresh_postgres_url(postgres_server_url)
    yield make_url(url).set(password=MARKER).render_as_string(hide_password=False)
    drop_postgres_schema(postgres_server_url, schema)


def _unseen(where: str, output: str) -> None:
    assert SEEN not in output, f"the password reached {where}:\n{output}"


# headgate serve ---------------------------------------------------------------


@dataclass
class Client:
    base: str
    bodies: list[str] = field(default_factory=list)
    """Every response seen: status line, headers and body."""

    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, **(headers or {})} if data else headers or {},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, heads, text_ = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, heads, text_ = error.code, error.headers, error.read()
        shown = f"{method} {path} -> {status}\n{heads}\n{text_.decode(errors='replace')}"
        self.bodies.append(shown)
        return status, text_.decode(errors="replace")


def _exercise_every_route(client: Client) -> None:
    """Each route family with good and bad input, what succeeds and what fails."""
    call = client.call
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json", "/static/x"):
        call("GET", path)
    assert call("PUT", "/api/v1/periodic/s1", {"kind": "k", "spec": "@every:60000"})[0] == 201
    call("PUT", "/api/v1/periodic/s2", {"kind": "k", "spec": "0 9 * * *", "payload": {"a": 1}})
    call("PUT", "/api/v1/periodic/bad", {"kind": "k", "spec": "61 * * * *"})
    call("PUT", "/api/v1/periodic/bad", "{not json")
    call("PUT", "/api/v1/periodic/bad", "kind=k", content_type="application/x-www-form-urlencoded")
    call("POST", "/api/v1/periodic:bulk", {"items": [{"id": "b1", "kind": "k", "spec": "nope"}]})
    call("POST", "/api/v1/periodic/s1/run", headers={"Idempotency-Key": "k1"})
    call("POST", "/api/v1/periodic/s1/pause")
    call("POST", "/api/v1/periodic/s1/resume")
    status, body = call("POST", "/api/v1/jobs", {"kind": "k", "payload": {"n": 1}})
    assert status == 201, body
    job_id = json.loads(body)["id"]
    fingerprint = fingerprint_of_text("k", '{"n":2}')
    call("PUT", f"/api/v1/quarantine/{fingerprint}", {"note": "by hand"})
    doc = json.loads(call("GET", "/openapi.json")[1])
    call("PUT", "/api/v1/limits", {"queue": "default", "partition_key": "*", "limit": 2})
    call("PUT", "/api/v1/rate-limits/mail-api", {"limit": 30, "per_ms": 60_000})
    values = {
        "schedule_id": "s1",
        "job_id": job_id,
        "fingerprint": fingerprint,
        "queue": "default",
        "rate_class": "mail-api",
    }
    for path, operations in doc["paths"].items():
        for method in operations:
            for chosen in (values, dict.fromkeys(values, "nope")):
                concrete = re.sub(r"\{(\w+)\}", lambda m, c=chosen: c[m[1]], path)
                call(method.upper(), concrete, {} if method in ("put", "post") else None)
                call(method.upper(), concrete + "?cursor=forged&limit=0")
    for page in (
        "/",
        "/?cursor=forged",
        "/schedules/new",
        "/schedules/s1",
        "/schedules/s1/edit",
        "/schedules/nope",
        "/jobs",
        f"/jobs/{job_id}",
        "/jobs/nope",
        "/workers",
        "/quarantine",
        "/queues",
        "/limits",
        "/overview",
        "/login",
        "/nowhere",
    ):
        call("GET", page)
    call("POST", "/login", {"token": "wrong"})
    call("POST", "/api/v1/jobs/nope/cancel")
    call("DELETE", "/api/v1/periodic/s2")


@pytest.mark.parametrize("how", ["--db", "HEADGATE_DB, platform, percent-encoded", "query"])
def test_serve_shows_the_password_nowhere(how: str, marked: MarkedStore, tmp_path: Path) -> None:
    url = marked.spelled(how.removeprefix("HEADGATE_DB, "))
    argv, env = (
        (["--db", url], {})
        if how != "HEADGATE_DB, platform, percent-encoded"
        else (
            [],
            {"HEADGATE_DB": url},
        )
    )
    with serving_printed(tmp_path, *argv, env=env) as served:
        serving_line = served.stderr.read_text()
        _unseen("the line `headgate serve` prints", serving_line)
        assert re.search(r"serving postgres(ql\+psycopg)?://postgres(:\*\*\*)?@", serving_line)
        client = Client(served.base)
        _exercise_every_route(client)
        drop_postgres_schema(marked.server_url, marked.schema)  # the store goes away
        assert client.call("GET", "/readyz")[0] == 503
        client.call("GET", "/api/v1/periodic")
        client.call("GET", "/metrics")
        client.call("GET", "/")
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=60) == 0
        stdout, stderr = served.stdout.read_text(), served.stderr.read_text()
    assert "not ready" in stderr, "the not-ready line, with its detail, was logged"
    _unseen("serve's stdout", stdout)
    _unseen("serve's stderr (its lines and its logs)", stderr)
    for shown in client.bodies:
        _unseen("an HTTP response", shown)
    assert len(client.bodies) > 100


@pytest.mark.parametrize("how", ["--db", "HEADGATE_DB"])
def test_serve_refuses_a_password_with_an_unencoded_at_sign_showing_none_of_it(
    how: str, marked: MarkedStore, tmp_path: Path
) -> None:
    """SQLAlchemy splits `postgres:p@MARKER...@host` at the first `@`: the driver
    would look up, and quote, a host name that is the rest of the password."""
    url = marked.with_password_written(f"p@{MARKER}")
    argv, env = (["--db", url], {}) if how == "--db" else ([], {"HEADGATE_DB": url})
    finished = subprocess.run(
        [headgate_command(), "serve", "--port", "0", *argv],
        cwd=tmp_path,
        env={**server_environment(), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    _unseen("`headgate serve`", finished.stdout + finished.stderr)
    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.splitlines() == [
        "error: store URL: an '@' in its password must be percent-encoded as %40 (as written, "
        "the rest of the password would be read as the host name)"
    ]


# the command line -------------------------------------------------------------


@dataclass
class Ran:
    status: int
    output: str


@pytest.fixture
def run_cli(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., Ran]:
    """`headgate ARGV` through its entry point, as a fresh process would run it:
    the passwords remembered by earlier commands are forgotten first. Its
    output is stdout, stderr and every log record, at every level."""

    def run(*argv: str, env: dict[str, str] | None = None) -> Ran:
        monkeypatch.setattr(_redact, "_remembered", ())
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        caplog.clear()
        caplog.set_level("DEBUG")
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = int(exit_.code or 0)
        captured = capsys.readouterr()
        for name in env or {}:
            monkeypatch.delenv(name)
        output = captured.out + captured.err + caplog.text
        _unseen(f"`headgate {' '.join(argv)}`", output)
        return Ran(status, output)

    return run


def _bad_urls(marked: MarkedStore) -> dict[str, str]:
    parsed = make_url(marked.url)
    return {
        "unparseable": f"postgresql://postgres:{MARKER}@[::1/x",
        "unparseable port": f"postgresql://postgres:{MARKER}@127.0.0.1:abc/x",
        "a malformed percent-encoding": "postgresql://postgres:MARKER%ZZ@127.0.0.1:1/x",
        "a host that refuses": parsed.set(port=1).render_as_string(hide_password=False),
        "an unknown host": parsed.set(host="nosuch.invalid").render_as_string(hide_password=False),
        "a wrong database": parsed.set(database="nosuch_db").render_as_string(hide_password=False),
        "a bad driver option": parsed.update_query_dict({"sslmode": "bogus"}).render_as_string(
            hide_password=False
        ),
        "an unknown option": parsed.update_query_dict({"badopt": "1"}).render_as_string(
            hide_password=False
        ),
        "a query password, a bad port": f"postgresql://postgres@127.0.0.1:99999/x?password={MARKER}",
        "an unsupported driver": f"postgresql+asyncpg://postgres:{MARKER}@127.0.0.1/x",
        "an unsupported scheme": f"mysql://root:{MARKER}@127.0.0.1/x",
        "a schema that holds no store": marked.url,
        "an unencoded @ in the password": marked.with_password_written(f"p@{MARKER}"),
        **{f"mistyped: {case}": url for case, url in MISTYPED_URLS.items()},
    }


MISTYPED_URLS: dict[str, str] = {
    "no scheme": f"postgres:{MARKER}@127.0.0.1:1/x",
    "no scheme, no host": f"postgres:{MARKER}@",
    "slashes, no scheme": f"//postgres:{MARKER}@127.0.0.1:1/x",
    "one slash": f"postgresql:/postgres:{MARKER}@127.0.0.1:1/x",
    "no colon": f"postgresql//postgres:{MARKER}@127.0.0.1:1/x",
    "no slashes": f"postgresql:postgres:{MARKER}@127.0.0.1:1/x",
    "three slashes": f"postgresql+psycopg:///postgres:{MARKER}@127.0.0.1:1/x",
    "backslashes": f"postgresql:\\\\postgres:{MARKER}@127.0.0.1:1/x",
    "a space before": f" postgresql://postgres:{MARKER}@127.0.0.1:1/x",
    "a space in the scheme": f"postgresql ://postgres:{MARKER}@127.0.0.1:1/x",
    "a space in the password": f"postgresql://postgres:{MARKER} x@127.0.0.1:1/x",
    "a colon in the password": f"postgres:x:{MARKER}@127.0.0.1:1/x",
}
"""Near-misses of a store URL, each with the marker as its password: the rule
cannot parse them, and must mask them still (`_redact`'s loose rule)."""


STORE_COMMANDS = [
    ["schedules", "list"],
    ["schedules", "show", "s1"],
    ["schedules", "put", "s9", "--spec", "@every:60000", "--kind", "k"],
    ["schedules", "pause", "s1"],
    ["schedules", "resume", "s1"],
    ["schedules", "enqueue-now", "s1"],
    ["schedules", "delete", "s9"],
    ["jobs", "list"],
    ["jobs", "show", "nope"],
    ["jobs", "cancel", "nope"],
    ["jobs", "retry", "nope"],
    ["quarantine", "list"],
    ["quarantine", "release", "nope"],
    ["events", "show"],
    ["events", "replay"],
    ["projections", "rebuild"],
    ["projections", "rebuild", "--verify"],
]


def test_no_command_shows_the_password_of_a_bad_url(
    marked: MarkedStore, run_cli: Callable[..., Ran]
) -> None:
    for case, url in _bad_urls(marked).items():
        for command in STORE_COMMANDS:
            ran = run_cli(*command, "--db", url)
            assert ran.status in (1, 2), f"{case}: {command}: {ran.output}"
        ran = run_cli("schedules", "list", env={"HEADGATE_DB": url})
        assert ran.status in (1, 2), f"{case}: {ran.output}"
    for misplaced in (["schedules", "list", marked.url], ["schedules", marked.url]):
        assert run_cli(*misplaced).status == 2, "argparse quotes what it cannot place"
    ran = run_cli("schedules", "list", "--db", _bad_urls(marked)["unparseable"])
    assert (
        "error: store URL: 'postgresql://postgres:***@[::1/x' is not a database URL" in ran.output
    )


def test_no_command_shows_the_password_of_a_good_url(
    marked: MarkedStore, second_schema: str, run_cli: Callable[..., Ran]
) -> None:
    with Headgate(marked.url) as hg:
        hg.schedules.put("s1", spec="@every:60000", kind="k", payload={"n": 1})
        job = hg.enqueue("k", payload={"n": 2})
    fingerprint = fingerprint_of_text("k", '{"n":3}')
    good = [
        *STORE_COMMANDS[:7],
        ["jobs", "list", "--state", "pending"],
        ["jobs", "show", job.id],
        ["jobs", "cancel", job.id],
        ["jobs", "retry", job.id],
        ["quarantine", "add", fingerprint, "--note", "x"],
        ["quarantine", "list"],
        ["quarantine", "release", fingerprint],
        ["events", "show", "--stream", "s1"],
        ["events", "replay"],
        ["events", "replay", "--to", second_schema],
        ["projections", "rebuild"],
        ["projections", "rebuild", "--verify"],
    ]
    reads = [
        ["schedules", "list"],
        ["schedules", "show", "s1"],
        ["jobs", "list"],
        ["jobs", "show", job.id],
    ]
    for command in [*good, *([*read, "--json"] for read in reads)]:
        ran = run_cli(*command, "--db", marked.url)
        assert ran.status == 0, f"{command}: {ran.output}"
    replayed = run_cli("events", "replay", "--to", second_schema, "--db", marked.url)
    assert replayed.status == 1 and "replay needs a fresh database" in replayed.output
    for url in _bad_urls(marked).values():
        ran = run_cli("events", "replay", "--db", marked.url, "--to", url)
        assert ran.status in (1, 2), ran.output
    for bad in (
        ["schedules", "put", "x", "--spec", "nope", "--kind", "k"],
        ["schedules", "list", "--cursor", "forged"],
        ["schedules", "put", "x", "--spec", "@every:1000", "--kind", "k", "--payload", "{"],
        ["events", "show", "--stream", "nope"],
        ["projections", "rebuild", "--projection", "nope"],
    ):
        assert run_cli(*bad, "--db", marked.url).status in (1, 2)


def test_worker_shows_the_password_nowhere(marked: MarkedStore, tmp_path: Path) -> None:
    (tmp_path / "marked_app.py").write_text(
        textwrap.dedent(
            f"""
            from headgate import Headgate
            hg = Headgate({marked.url!r})

            @hg.handler("k")
            def work(ctx):
                raise RuntimeError("handler failed")
            """
        )
    )
    with Headgate(marked.url) as hg:
        job = hg.enqueue("k", payload={})
    worker = subprocess.Popen(
        [headgate_command(), "worker", "--app", "marked_app:hg"],
        cwd=tmp_path,
        env={
            **server_environment(),
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{server_environment()['PYTHONPATH']}",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        with Headgate(marked.url) as hg:
            while not hg.jobs.get(job.id).attempt_history:  # its handler ran, and failed
                assert time.monotonic() < deadline, "the worker ran nothing"
                time.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
    assert worker.returncode == 0, output
    assert "worker running the handlers of marked_app:hg" in output
    _unseen("`headgate worker`", output)


@pytest.mark.parametrize("case", [*MISTYPED_URLS, "a SQLite path"])
def test_the_command_shows_no_password_of_a_mistyped_url(case: str, tmp_path: Path) -> None:
    """The installed `headgate` command, as a person would run it: the URL as
    --db, as HEADGATE_DB, and as a flag argparse does not know (quoted back)."""
    url = MISTYPED_URLS.get(case, f"sqlite:///postgres:{MARKER}@h/x.db")
    for argv, env in (
        (["jobs", "list", "--db", url], {}),
        (["jobs", "list"], {"HEADGATE_DB": url}),
        (["jobs", "list", "--store", url], {}),
    ):
        finished = subprocess.run(
            [headgate_command(), *argv],
            cwd=tmp_path,
            env={**server_environment(), **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert finished.returncode in (1, 2), f"{argv}: {finished.stdout}{finished.stderr}"
        assert finished.stderr.startswith("error: "), finished.stderr
        _unseen(f"`headgate {' '.join(argv)}`", finished.stdout + finished.stderr)


# the library's surface --------------------------------------------------------


def _chain(error: BaseException) -> str:
    """Everything an exception holds that a handler may show: its traceback (as
    Python prints it), and the str and repr of it and of every cause and context."""
    shown = ["".join(traceback.format_exception(error))]
    seen: BaseException | None = error
    while seen is not None:
        shown += [str(seen), repr(seen), repr(getattr(seen, "args", ()))]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(shown)


def test_ops_errors_and_public_objects_show_no_password(
    marked: MarkedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Callable[[str], object]] = [
        ops.verify,
        ops.read_events,
        ops.rebuild,
        ops.compact,
        ops.replay,
        lambda url: ops.replay(marked.url, url),
        Headgate,
    ]
    for case, url in _bad_urls(marked).items():
        for call in calls:
            monkeypatch.setattr(_redact, "_remembered", ())
            with pytest.raises((HeadgateError, ValueError)) as raised:
                with_store = call(url)
                if isinstance(with_store, Headgate):
                    with_store.schedules.list()
                    with_store.close()
                    raise HeadgateError("opened")
            if str(raised.value) == "opened":
                continue  # the schema that holds no store: Headgate(url) makes one
            _unseen(f"{case}: {call}: the exception", _chain(raised.value))
    with Headgate(marked.url) as hg:
        _unseen("repr(Headgate)", repr(hg) + str(hg))
        assert "postgres:***@" in repr(hg)
        _unseen("a readiness", repr(hg.runtime.readiness()))
        report = ops.replay(marked.url)
        _unseen("a replay report", repr(report))
    monkeypatch.setattr(_redact, "_remembered", ())
    with Headgate(marked.spelled("query")) as hg:
        _unseen("repr(Headgate) of a query password", repr(hg))
    engine = create_engine(marked.server_url)
    with engine.begin() as connection:  # the store's schema behind this build
        connection.execute(
            text(f"UPDATE \"{marked.schema}\".headgate_alembic_version SET version_num = '0001'")
        )
    engine.dispose()
    monkeypatch.setattr(_redact, "_remembered", ())
    with pytest.raises(HeadgateError) as behind:
        ops.read_events(marked.url)
    assert "postgres:***@" in str(behind.value)
    _unseen("SchemaBehind", _chain(behind.value))
