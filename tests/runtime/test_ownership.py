"""Code declares a schedule; operators override it; the overrides survive deploys.

A "deploy" here is a new Headgate on the same store whose code declares its
schedules and starts, as a restarted host does.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from headgate import Headgate, JobContext, RuntimeConfig, ValidationError
from headgate.cli import main


def _host(
    make_headgate: Callable[..., Headgate],
    declarations: dict[str, str],
    **config: object,
) -> Headgate:
    """A host whose code declares `declarations` (id -> spec), started."""
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=60_000, **config))  # type: ignore[arg-type]
    for schedule_id, spec in declarations.items():

        @hg.periodic(schedule_id, spec=spec, max_attempts=5, timeout_s=60)
        def report(job: JobContext) -> None:
            return None

    hg.start(workers=False)
    return hg


def test_declared_job_options_survive_an_edit(make_headgate: Callable[..., Headgate]) -> None:
    hg = _host(make_headgate, {"nightly": "0 9 * * *"})
    stored = hg.schedules.get("nightly")
    assert (stored.max_attempts, stored.timeout_ms) == (5, 60_000)
    edited = hg.schedules.update("nightly", spec="0 10 * * *")
    assert (edited.spec, edited.max_attempts, edited.timeout_ms) == ("0 10 * * *", 5, 60_000)
    replaced = hg.schedules.put("nightly", spec="0 11 * * *", kind="nightly", timeout_ms=5_000)
    assert (replaced.max_attempts, replaced.timeout_ms) == (None, 5_000)


def test_an_operators_pause_and_spec_survive_a_deploy(
    make_headgate: Callable[..., Headgate], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _host(make_headgate, {"heartbeat-report": "@every:5000"})
    assert first.schedules.get("heartbeat-report").declared_in_code
    first.stop()
    status = main(
        [
            "schedules",
            "put",
            "heartbeat-report",
            "--db",
            store_url,
            "--spec",
            "@every:60000",
            "--kind",
            "heartbeat-report",
            "--max-attempts",
            "5",
            "--timeout-ms",
            "60000",
            "--paused",
        ]
    )
    assert status == 0, capsys.readouterr().err
    assert "overridden: spec, paused" in capsys.readouterr().out

    deployed = _host(make_headgate, {"heartbeat-report": "@every:5000"})
    schedule = deployed.schedules.get("heartbeat-report")
    assert (schedule.spec, schedule.paused) == ("@every:60000", True)
    assert schedule.overrides == ("spec", "paused")

    cleared = deployed.schedules.clear_overrides("heartbeat-report")
    assert (cleared.spec, cleared.paused, cleared.overrides) == ("@every:5000", False, ())


def test_a_code_change_to_a_field_nobody_overrode_is_applied(
    make_headgate: Callable[..., Headgate],
) -> None:
    first = _host(make_headgate, {"nightly": "0 9 * * *"})
    first.schedules.pause("nightly")
    first.stop()
    deployed = _host(make_headgate, {"nightly": "0 7 * * *"})
    schedule = deployed.schedules.get("nightly")
    assert (schedule.spec, schedule.paused, schedule.overrides) == ("0 7 * * *", True, ("paused",))


def test_setting_a_field_back_to_the_code_ends_its_override(hg: Headgate) -> None:
    @hg.periodic("nightly", spec="0 9 * * *")
    def report(job: JobContext) -> None:
        return None

    hg.start(workers=False)
    assert hg.schedules.pause("nightly").overrides == ("paused",)
    assert hg.schedules.resume("nightly").overrides == ()


def test_a_schedule_only_operators_define_has_nothing_to_clear(hg: Headgate) -> None:
    hg.schedules.put("adhoc", spec="@every:5000", kind="k")
    assert not hg.schedules.get("adhoc").declared_in_code
    with pytest.raises(ValidationError, match="not declared in code"):
        hg.schedules.clear_overrides("adhoc")


def test_a_vanished_declaration_is_reported_never_deleted(
    make_headgate: Callable[..., Headgate],
) -> None:
    first = _host(make_headgate, {"old-report": "@every:5000", "kept": "@every:5000"})
    first.stop()
    with capture_logs() as logs:
        deployed = _host(make_headgate, {"kept": "@every:5000"})
    warned = [entry for entry in logs if entry["event"] == "schedule no longer declared in code"]
    assert [entry["schedule_id"] for entry in warned] == ["old-report"]
    old = deployed.schedules.get("old-report")
    assert old.undeclared_at_ms is not None
    assert not old.paused  # reported, still ticking: on_undeclared="report"
    assert b"headgate_schedules_undeclared 1.0" in generate_latest(deployed.metrics.registry)
    deployed.stop()

    again = _host(make_headgate, {"kept": "@every:5000"})
    assert again.schedules.get("old-report").undeclared_at_ms == old.undeclared_at_ms  # once


def test_a_vanished_declaration_is_paused_when_the_setting_says_so(
    make_headgate: Callable[..., Headgate],
) -> None:
    _host(make_headgate, {"old-report": "@every:5000"}).stop()
    _host(make_headgate, {"other": "@every:5000"}, on_undeclared="pause").stop()
    hg = make_headgate()
    assert hg.schedules.get("old-report").paused


def test_a_declaration_that_comes_back_is_declared_again(
    make_headgate: Callable[..., Headgate],
) -> None:
    _host(make_headgate, {"report": "@every:5000"}).stop()
    _host(make_headgate, {"other": "@every:5000"}).stop()
    back = _host(make_headgate, {"report": "@every:5000", "other": "@every:5000"})
    assert back.schedules.get("report").undeclared_at_ms is None


def test_another_groups_declarations_are_left_alone(
    make_headgate: Callable[..., Headgate],
) -> None:
    _host(make_headgate, {"billing": "@every:5000"}, declarations_group="billing").stop()
    web = _host(make_headgate, {"web": "@every:5000"}, declarations_group="web")
    assert web.schedules.get("billing").undeclared_at_ms is None


def test_a_host_without_declarations_reports_nothing(
    make_headgate: Callable[..., Headgate],
) -> None:
    _host(make_headgate, {"report": "@every:5000"}).stop()
    plain = make_headgate()
    plain.start(workers=False)
    assert plain.schedules.get("report").undeclared_at_ms is None
