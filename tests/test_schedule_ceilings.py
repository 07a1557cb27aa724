"""The store-wide ceilings on schedules (`max_schedules`, `max_ticks_per_s`): set once
in RuntimeConfig, reaching `serve`, the schedule writes' flags and the environment,
and refused the same way in Python (ValidationError), the API (422) and the CLI
(exit 2), naming the field and the rule. One 150 KB request of 2,000
`@every:1000` schedules wrote 122,000 jobs a minute before."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from headgate import Headgate, RuntimeConfig, ValidationError
from headgate._domain.schedule_load import Ceilings, Load, load_problem, ticks_per_s
from headgate._domain.spec import parse_spec
from headgate._operator import operator_of
from headgate.cli._main import build_parser, main
from headgate.cli._settings import RUNTIME_SETTINGS, runtime_config
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL, START_MS
from tests.web.serving import serving, wait_until_answering

TIGHT = RuntimeConfig(lease_ttl_ms=3_600_000, max_schedules=3, max_ticks_per_s=2)


@pytest.fixture
def hg(store_url: str) -> Iterator[Headgate]:
    with Headgate(store_url, clock=FakeClock(START_MS), config=TIGHT) as headgate:
        yield headgate


def test_a_spec_costs_its_busiest_hour() -> None:
    assert ticks_per_s("@every:1000") == 1.0
    assert ticks_per_s("@every:7m") == 9 / 3600  # an hour holds 9 of its ticks at most
    assert ticks_per_s("* * * * *") == 60 / 3600
    assert ticks_per_s("0 9 * * *") == 1 / 3600
    assert ticks_per_s("*/5 * * * * *") == 720 / 3600


@given(st.integers(min_value=1, max_value=10 * 3_600_000), st.integers(1, 10**12))
def test_no_hour_holds_more_ticks_than_an_every_spec_is_charged(
    interval_ms: int, start_ms: int
) -> None:
    spec = parse_spec(f"@every:{interval_ms}")
    first = spec.next_tick_ms(start_ms - 1)
    in_the_hour = len(range(first, start_ms + 3_600_000, interval_ms))
    assert in_the_hour <= spec.busiest_hour_ticks


def test_python_refuses_a_write_past_a_ceiling_naming_the_field_and_the_rule(
    hg: Headgate,
) -> None:
    hg.schedules.put("a", spec="@every:1000", kind="k")
    hg.schedules.put("b", spec="@hourly", kind="k")
    with pytest.raises(ValidationError) as too_fast:
        hg.schedules.put("c", spec="@every:1000", kind="k")
    assert too_fast.value.field == "spec"
    assert str(too_fast.value).startswith(
        "spec: the store's schedules would tick 2.0003 times a second (each at its busiest "
        "hour), over max_ticks_per_s 2 (RuntimeConfig.max_ticks_per_s, serve --max-ticks-per-s"
    )
    hg.schedules.put("c", spec="@daily", kind="k")
    with pytest.raises(ValidationError) as too_many:
        hg.schedules.put("d", spec="@daily", kind="k")
    assert too_many.value.field == "schedule_id"
    assert str(too_many.value).startswith(
        "schedule_id: the store would hold 4 schedules, over max_schedules 3"
    )
    with pytest.raises(ValidationError, match=r"^spec: .*max_ticks_per_s"):
        hg.schedules.update("b", spec="@every:1000")
    assert hg.schedules.get("b").spec == "0 * * * *", "nothing written"
    hg.schedules.put("a", spec="@every:1000", kind="k", summary="changed")  # no more load
    hg.schedules.delete("c")
    hg.schedules.put("d", spec="@daily", kind="k")  # room again


def test_a_bulk_call_past_a_ceiling_writes_nothing(hg: Headgate) -> None:
    items = [{"schedule_id": f"s{i}", "spec": "@every:1000", "kind": "k"} for i in range(3)]
    with pytest.raises(ValidationError, match=r"^schedules: .*max_ticks_per_s 2"):
        hg.schedules.put_many(items)
    assert operator_of(hg).count_schedules() == 0


def test_a_store_above_a_lowered_ceiling_can_still_be_changed(store_url: str) -> None:
    with Headgate(store_url, clock=FakeClock(START_MS)) as roomy:
        for index in range(5):
            roomy.schedules.put(f"s{index}", spec="@every:1000", kind="k")
    with Headgate(store_url, clock=FakeClock(START_MS), config=TIGHT) as tight:
        tight.schedules.put("s0", spec="@every:1000", kind="k", summary="same load")
        tight.schedules.update("s1", spec="@hourly")  # brings the rate down
        with pytest.raises(ValidationError, match="max_schedules 3"):
            tight.schedules.put("s9", spec="@daily", kind="k")


def test_the_api_answers_422_for_the_attack_of_the_issue(hg: Headgate) -> None:
    with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client:
        body = {
            "schedules": [{"id": f"t{i}", "kind": "k", "spec": "@every:1000"} for i in range(2_000)]
        }
        response = client.post("/api/v1/periodic:bulk", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"].startswith(
            "schedules: the store would hold 2,000 schedules, over max_schedules 3"
        )
        one = client.put("/api/v1/periodic/a", json={"kind": "k", "spec": "@every:300"})
        assert one.status_code == 422  # below the minimum interval first
        fast = [
            client.put(f"/api/v1/periodic/{name}", json={"kind": "k", "spec": "@every:1000"})
            for name in ("a", "b", "c")
        ]
        assert [r.status_code for r in fast] == [201, 201, 422]
        assert fast[2].json()["error"].startswith("spec: the store's schedules would tick 3 ")
        patched = client.patch("/api/v1/periodic/a", json={"spec": "@every:500"})
        assert patched.status_code == 422
    assert operator_of(hg).count_schedules() == 2


def test_the_cli_exits_2_naming_the_rule(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Headgate(store_url).close()  # the commands write to a store that exists
    put = ["schedules", "put", "--db", store_url, "--kind", "k", "--spec", "@every:1000"]
    assert main([*put[:2], "a", *put[2:], "--max-ticks-per-s", "1"]) == 0
    assert main([*put[:2], "b", *put[2:], "--max-ticks-per-s", "1"]) == 2
    assert "error: spec: the store's schedules would tick 2 times" in capsys.readouterr().err
    assert main([*put[:2], "b", *put[2:], "--max-ticks-per-s", "2", "--max-schedules", "1"]) == 2
    assert "error: schedule_id: the store would hold 2 schedules" in capsys.readouterr().err


@pytest.mark.parametrize("setting", RUNTIME_SETTINGS, ids=lambda s: s.field)
def test_every_runtime_setting_reaches_every_surface(
    setting: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defined once (RuntimeConfig's field, with its default and rule); `serve`,
    `schedules put` and `schedules update` take its flag, and each reads its
    environment variable when the flag is not given."""
    from headgate.cli._settings import RuntimeSetting

    assert isinstance(setting, RuntimeSetting)
    default = getattr(RuntimeConfig(), setting.field)
    assert isinstance(default, int) and 1 <= default <= setting.highest
    parser = build_parser()
    put = ["schedules", "put", "x", "--spec", "@daily", "--kind", "k"]
    for command in (["serve"], put, ["schedules", "update", "x"]):
        args = parser.parse_args([*command, setting.flag, "7"])
        assert getattr(runtime_config(args), setting.field) == 7, command
        monkeypatch.setenv(setting.environment, "9")
        assert getattr(runtime_config(parser.parse_args(command)), setting.field) == 9
        monkeypatch.delenv(setting.environment)
        assert getattr(runtime_config(parser.parse_args(command)), setting.field) == default
    with pytest.raises(ValueError, match=setting.field):
        RuntimeConfig(**{setting.field: setting.highest + 1})  # type: ignore[arg-type]
    monkeypatch.setenv(setting.environment, "0")
    with pytest.raises(ValidationError, match=setting.environment):
        runtime_config(parser.parse_args(["serve"]))


def test_a_refusal_names_the_ceiling_it_would_break() -> None:
    ceilings = Ceilings(max_schedules=2, max_ticks_per_s=1)
    empty = Load(0, 0.0)
    assert load_problem(empty, empty.plus(["@every:1000"]), ceilings) is None
    too_fast = load_problem(empty, empty.plus(["@every:1000"] * 2), ceilings)
    assert too_fast is not None and too_fast[0] == "max_ticks_per_s"
    too_many = load_problem(empty, empty.plus(["@daily"] * 3), ceilings)
    assert too_many is not None and too_many[0] == "max_schedules"
    above = empty.plus(["@every:1000"] * 5)
    assert load_problem(above, above, ceilings) is None, "nothing raised, nothing refused"


_LOADS = st.builds(Load, st.integers(0, 20), st.floats(0, 20, allow_nan=False))


@given(_LOADS, _LOADS, st.integers(0, 20), st.integers(0, 20))
def test_a_load_within_both_ceilings_is_never_refused(
    before: Load, after: Load, max_schedules: int, max_ticks_per_s: int
) -> None:
    """Why a write reads the store's load as it was only for a load `over` a
    ceiling: within both, nothing the load was before can make it refused."""
    ceilings = Ceilings(max_schedules, max_ticks_per_s)
    if load_problem(before, after, ceilings) is not None:
        assert after.over(ceilings)


def _put(base: str, schedule_id: str, spec: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{base}/api/v1/periodic/{schedule_id}",
        data=json.dumps({"kind": "k", "spec": spec}).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.processes
def test_serve_holds_the_store_to_its_flags_and_environment(tmp_path: Path) -> None:
    environment = {"HEADGATE_MAX_TICKS_PER_S": "1"}
    with serving(tmp_path, "--max-schedules", "2", environment=environment) as (process, base):
        wait_until_answering(f"{base}/api/v1/periodic", timeout=60)
        assert _put(base, "a", "@every:2000")[0] == 201
        status, body = _put(base, "b", "@every:1000")
        assert status == 422 and str(body["error"]).startswith("spec: ")
        assert "max_ticks_per_s 1" in str(body["error"])
        assert _put(base, "b", "@every:2000")[0] == 201
        status, body = _put(base, "c", "@daily")
        assert status == 422 and "over max_schedules 2" in str(body["error"])
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
