"""An option renamed (`OptionInfo.formerly`) keeps its former name working on
every surface for one minor version, saying what replaces it, and what a store
holds under the former name reads back under the new one."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, ValidationError
from headgate._domain.options import FORMER_NAMES
from headgate.cli import main
from headgate.testing import FakeClock
from headgate.web import create_app


def test_the_renamed_options_are_these() -> None:
    assert FORMER_NAMES == {"backfill_limit": "backfill_max"}


def test_a_former_keyword_warns_at_the_callers_line_and_sets_the_option() -> None:
    with Headgate("memory://", clock=FakeClock()) as hg:
        with pytest.warns(DeprecationWarning, match="backfill_limit .* use backfill_max") as seen:
            hg.schedules.put(
                "s", spec="@every:60000", kind="k", on_missed="backfill", backfill_limit=4
            )
        assert seen[0].filename == __file__
        assert hg.schedules.get("s").backfill_max == 4
        with pytest.warns(DeprecationWarning):
            hg.schedules.update("s", backfill_limit=6)
        schedule = hg.schedules.get("s")
        assert schedule.backfill_max == 6
        with pytest.warns(DeprecationWarning, match="Schedule.backfill_max"):
            assert schedule.backfill_limit == 6


def test_both_names_at_once_are_refused_and_nothing_changes() -> None:
    with Headgate("memory://", clock=FakeClock()) as hg:
        hg.schedules.put("s", spec="@every:60000", kind="k", backfill_max=2)
        with pytest.raises(ValidationError, match="backfill_limit: is backfill_max's former name"):
            hg.schedules.update("s", backfill_max=3, backfill_limit=5)
        assert hg.schedules.get("s").backfill_max == 2


def test_the_api_takes_the_former_body_field(tmp_path: Path) -> None:
    with (
        Headgate(f"sqlite:///{tmp_path / 'hg.db'}", clock=FakeClock()) as hg,
        TestClient(create_app(hg, api_token=""), base_url="http://127.0.0.1") as client,
    ):
        body = {"spec": "@every:60000", "kind": "k", "on_missed": "backfill"}
        put = client.put("/api/v1/periodic/s", json={**body, "backfill_limit": 9})
        assert put.status_code in (200, 201), put.text
        assert put.json()["backfill_max"] == put.json()["backfill_limit"] == 9
        shown = client.get("/openapi.json").json()["components"]["schemas"]["ScheduleOut"]
        assert shown["properties"]["backfill_limit"]["deprecated"] is True
        patched = client.patch("/api/v1/periodic/s", json={"backfill_limit": 3})
        assert patched.status_code == 200, patched.text
        assert hg.schedules.get("s").backfill_max == 3


def test_the_cli_takes_the_former_flag_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'hg.db'}"
    Headgate(url).close()
    put = ("schedules", "put", "s", "--db", url, "--spec", "@every:60000", "--kind", "k")
    assert main([*put, "--on-missed", "backfill", "--backfill-limit", "5"]) == 0
    assert "--backfill-limit is deprecated" in capsys.readouterr().err
    with Headgate(url) as hg:
        assert hg.schedules.get("s").backfill_max == 5


def test_the_cli_takes_a_renamed_commands_former_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`schedules run-now` is `schedules enqueue-now` for one minor version."""
    url = f"sqlite:///{tmp_path / 'hg.db'}"
    with Headgate(url) as hg:
        hg.schedules.put("s", spec="@every:60000", kind="k")
    assert main(["schedules", "run-now", "s", "--db", url, "--idempotency-key", "a"]) == 0
    assert main(["schedules", "enqueue-now", "s", "--db", url, "--idempotency-key", "a"]) == 0
    with Headgate(url) as hg:
        assert len(hg.schedules.manual_runs("s").jobs) == 1


@pytest.mark.parametrize(
    ("former", "now"),
    [
        ("RunNowResult", "EnqueueNowResult"),
        ("JobLimits", "JobSettings"),
        ("LimitInForce", "SettingInForce"),
        ("LimitSource", "SettingSource"),
        ("RateLimitStatus", "RateStatus"),
    ],
)
def test_a_renamed_public_type_still_imports_with_a_warning(former: str, now: str) -> None:
    import headgate

    with pytest.warns(DeprecationWarning, match=f"use headgate.{now}"):
        assert getattr(headgate, former) is getattr(headgate, now)
    with pytest.raises(AttributeError):
        headgate.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
