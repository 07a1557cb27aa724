"""The one masking rule (`headgate._redact`), and the log defences built on it:
a password never leaves Headgate, whichever way a URL holding it travels."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
import structlog
from structlog.testing import capture_logs

from headgate import Headgate
from headgate._errors import StoreUnavailable, ValidationError
from headgate._logs import get_logger, mask_secrets
from headgate._redact import masked, passwords_in, remember_secrets
from headgate._store.sql.engine import parse_store_url, shown_url

SECRET = "MARKER-PW-123"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # userinfo, as SQLAlchemy parses it and as it cannot
        ("postgresql://app:s3cret@db/app", "postgresql://app:***@db/app"),
        ("postgres://app:s3cret@db:5433/app", "postgres://app:***@db:5433/app"),
        ("postgresql+psycopg://app:s3cret@db/app", "postgresql+psycopg://app:***@db/app"),
        ("postgresql://postgres:s3cret@[::1/x", "postgresql://postgres:***@[::1/x"),
        (
            "postgresql://postgres:s3cret@127.0.0.1:abc/x",
            "postgresql://postgres:***@127.0.0.1:abc/x",
        ),
        # percent-encoded, and an unencoded @ or / in the password
        ("postgresql://app:s3%40cr%2Fet@db/app", "postgresql://app:***@db/app"),
        ("postgresql://app:s3@cret@db/app", "postgresql://app:***@db/app"),
        ("postgresql://app:s3/cret@db/app", "postgresql://app:***@db/app"),
        ("postgresql://a@b:s3cret@db/app", "postgresql://a@b:***@db/app"),
        # query-string passwords, their names percent-encoded or not
        ("postgresql://app@db/app?password=s3cret", "postgresql://app@db/app?password=***"),
        (
            "postgresql://app@db/app?sslmode=require&sslpassword=s3cret&x=1",
            "postgresql://app@db/app?sslmode=require&sslpassword=***&x=1",
        ),
        ("postgresql://app@db/app?pass%77ord=s3cret", "postgresql://app@db/app?pass%77ord=***"),
        ("postgresql://app@db/app?PASSWORD=s3cret", "postgresql://app@db/app?PASSWORD=***"),
        # a libpq connection string, a mapping's repr, a log field
        ("host=db password=s3cret dbname=app", "host=db password=*** dbname=app"),
        ("host=db password='s3 cret' dbname=app", "host=db password='***' dbname=app"),
        ("{'password': 's3cret', 'host': 'db'}", "{'password': '***', 'host': 'db'}"),
        ('{"password": "s3cret"}', '{"password": "***"}'),
        # in a sentence, twice on a line, quoted
        (
            "error: store URL: 'postgres://app:s3cret@db/app' is not a database URL",
            "error: store URL: 'postgres://app:***@db/app' is not a database URL",
        ),
        (
            "from postgresql://a:one1@h1/x to postgresql://b:two2@h2/y",
            "from postgresql://a:***@h1/x to postgresql://b:***@h2/y",
        ),
        # a mistyped URL: no scheme, slashes missing or doubled, a stray character
        ("u:PW@host", "u:***@host"),
        ("u:PW@", "u:***@"),
        ("u:PW@h:5432/db", "u:***@h:5432/db"),
        ("//u:PW@h/db", "//u:***@h/db"),
        ("//:PW@h/db", "//:***@h/db"),
        ("postgresql:/u:PW@h/db", "postgresql:/u:***@h/db"),
        ("postgresql//u:PW@h/db", "postgresql//u:***@h/db"),
        ("postgresql:://u:PW@h/db", "postgresql:://u:***@h/db"),
        ("postgresql:\\\\u:PW@h/db", "postgresql:\\\\u:***@h/db"),
        ("postgresql\\://u:PW@h/db", "postgresql\\://u:***@h/db"),
        ("postgresql ://u:PW@h/db", "postgresql ://u:***@h/db"),
        ("1postgresql://u:PW@h/db", "1postgresql://u:***@h/db"),
        ("postgresql:u:PW@h/db", "postgresql:***@h/db"),  # which `:`? the earliest
        ("u:p:w@h", "u:***@h"),
        ("u:p/w@h", "u:***@h"),
        ("u:p@ss@h", "u:***@h"),
        ("//u:/pw@h", "//u:***@h"),
        ("postgresql://u:P W@h/db", "postgresql://u:***@h/db"),  # a space in the password
        # ... quoted, in a message, as a flag's value, in a driver's error
        (
            "error: store URL: 'u:PW@host' is not a database URL",
            "error: store URL: 'u:***@host' is not a database URL",
        ),
        ("unrecognized arguments: --store u:PW@host", "unrecognized arguments: --store u:***@host"),
        ("--db=u:PW@host", "--db=u:***@host"),
        (
            'FATAL: database "u:PW@h/db" does not exist',
            'FATAL: database "u:***@h/db" does not exist',
        ),
        ("{'url': 'u:PW@h'}", "{'url': 'u:***@h'}"),
    ],
)
def test_a_password_is_masked_however_it_is_spelled(text: str, shown: str) -> None:
    assert masked(text) == shown
    assert masked(shown) == shown, "masking what is masked changes nothing"


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:////var/lib/headgate/h.db",
        "postgresql://app@db:5432/app?sslmode=require",
        "serving on http://127.0.0.1:8080/",
        "http://[::1]:8080/api/v1/periodic?limit=50&cursor=abc",
        "spec: bad cron '61 * * * *': minute 61 out of range 0-59",
        "postgresql://app:@db/app",
        "postgresql://app@db/app",
        "postgresql:/app@db/app",
        "postgresql://db:5432/app failed for ada@example.com",
        "user@host:5432/db",
        "git@github.com:owner/repo",
        "mail to=ada@example.com at 12:30",
        '{"to":"ada@example.com","at":"12:30"}',
        '{"to": "ada@example.com"}',
    ],
)
def test_text_without_a_password_is_left_as_it_is(text: str) -> None:
    assert masked(text) == text


def test_a_remembered_password_is_masked_wherever_it_appears() -> None:
    """libpq quotes a malformed percent-encoded token whole, outside any URL."""
    url = "postgresql://app:Zq%ZZ-remembered@db/app"
    assert "Zq%ZZ-remembered" in passwords_in(url)
    remember_secrets(*passwords_in(url))
    assert masked('invalid percent-encoded token: "Zq%ZZ-remembered"') == (
        'invalid percent-encoded token: "***"'
    )


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("u:Kq7-loose@host", "Kq7-loose"),
        ("postgresql:/u:Kq7-loose@h/db", "Kq7-loose"),
        ("postgresql://u:Kq7 spaced@h/db", "Kq7 spaced"),
        ("postgresql:/u:Kq7 spaced@h/db", "Kq7 spaced"),
    ],
)
def test_the_password_of_a_mistyped_url_is_remembered(url: str, password: str) -> None:
    """A driver may quote it outside the URL (percent-encoded, or a part of it as
    a database name): remembered, it is masked there too."""
    assert password in passwords_in(url)
    remember_secrets(*passwords_in(url))
    shown = masked(f"no store at {quote(url, safe='/:')}; no database {password!r}")
    assert password not in shown and quote(password, safe="") not in shown, shown


def test_a_url_without_a_password_remembers_nothing() -> None:
    for url in ("postgresql://app@db/app", "sqlite:////var/lib/h.db", "postgresql:/app@db/app"):
        assert passwords_in(url) == []


def test_parsing_a_store_url_remembers_its_password_in_each_spelling() -> None:
    parse_store_url("postgresql://app:Yv%2Fdecoded-pw@db/app")
    assert masked("Yv/decoded-pw and Yv%2Fdecoded-pw") == "*** and ***"


def test_what_follows_an_unencoded_at_sign_in_a_password_is_remembered_too() -> None:
    """SQLAlchemy splits `app:p@ss@w0rd@db` at the first `@`, and the driver
    quotes the host it was handed (`ss@w0rd@db`) outside any URL."""
    url = "postgresql://app:p@ss-Kx7q@w0rd-Kx7q@db/app"
    assert masked(url) == "postgresql://app:***@db/app"
    remember_secrets(*passwords_in(url))
    assert masked("failed to resolve host 'ss-Kx7q@w0rd-Kx7q@db'") == (
        "failed to resolve host '***@db'"
    )
    assert masked("host 'w0rd-Kx7q@db'") == "host '***@db'"


def test_a_password_with_an_unencoded_at_sign_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_store_url(f"postgresql://postgres:p@{SECRET}@127.0.0.1:1/x")
    assert str(refused.value) == (
        "store URL: an '@' in its password must be percent-encoded as %40 "
        "(as written, the rest of the password would be read as the host name)"
    )
    assert parse_store_url("postgresql://app:p%40ss@db/app").password == "p@ss"
    assert parse_store_url("postgresql://a@b:pw@db/app").username == "a@b", "one @ per part"


def test_an_unparseable_url_is_refused_as_bad_input_with_its_password_masked() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_store_url(f"postgresql://postgres:{SECRET}@[::1/x")
    assert str(refused.value) == (
        "store URL: 'postgresql://postgres:***@[::1/x' is not a database URL"
    )


def test_a_store_url_is_shown_with_its_passwords_masked() -> None:
    parsed = parse_store_url(f"postgres://app:{SECRET}@db/app?sslpassword={SECRET}x")
    assert shown_url(parsed) == "postgresql+psycopg://app:***@db/app?sslpassword=***"


def test_a_headgate_and_its_store_show_their_url(tmp_path: Path) -> None:
    with Headgate(f"sqlite:///{tmp_path}/h.db") as hg:
        assert repr(hg) == f"<Headgate on SqlStore('sqlite:///{tmp_path}/h.db')>"


def test_the_log_processor_masks_fields_and_rendered_tracebacks() -> None:
    event = {
        "event": f"connecting to postgresql://app:{SECRET}@db/app",
        "exception": f"Traceback ...\nValueError: bad 'postgres://app:{SECRET}@db/app'",
        "password": "hunter2",
        "nested": {"url": f"postgres://a:{SECRET}@h/x", "n": 1},
        "error": StoreUnavailable(f"at postgres://a:{SECRET}@h/x"),
        "count": 3,
    }
    shown = mask_secrets(None, "info", event)
    assert SECRET not in repr(shown) and "hunter2" not in repr(shown)
    assert shown["count"] == 3 and shown["nested"]["n"] == 1
    assert shown["event"] == "connecting to postgresql://app:***@db/app"


def test_a_headgate_line_is_masked_through_a_hosts_structlog() -> None:
    structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
    with capture_logs() as captured:
        get_logger("headgate").warning(
            f"store at postgres://a:{SECRET}@h/x", detail=f"postgres://a:{SECRET}@h/x"
        )
    assert captured and SECRET not in repr(captured)


@pytest.mark.processes
def test_a_headgate_line_and_its_exception_are_masked_through_stdlib_logging() -> None:
    """The host configured no structlog: the stdlib record's message and its
    rendered exception are masked before the host's handler prints them."""
    script = textwrap.dedent(
        f"""
        import logging
        from headgate._logs import get_logger
        logging.basicConfig(level=logging.INFO)
        try:
            raise RuntimeError("cannot reach postgresql://app:{SECRET}@db/app")
        except RuntimeError:
            get_logger("headgate").exception("failed", url="postgres://a:{SECRET}@h/x")
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert "RuntimeError: cannot reach postgresql://app:***@db/app" in finished.stderr
    assert "url=postgres://a:***@h/x" in finished.stderr
    assert SECRET not in finished.stderr


def test_the_stdlib_filter_leaves_other_records_readable(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="headgate"):
        get_logger("headgate").info("tick", schedule_id="s", tick_ms=5)
    assert caplog.records[-1].getMessage() == "tick schedule_id=s tick_ms=5"
