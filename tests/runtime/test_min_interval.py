"""The minimum interval between a schedule's ticks (RuntimeConfig.min_interval_ms),
on both backends: every way of defining a schedule refuses a spec that ticks
more often and writes nothing; a schedule stored before ticks on unchanged;
the friendlier spellings are the milliseconds form, phase and all."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headgate import Headgate, JobContext, RuntimeConfig, ValidationError
from headgate._domain.streams import schedule_stream
from headgate._store.port import NO_STREAM
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, fire, jobs_for
from tests.store.builders import schedule_defined

BELOW = "spec: interval 1 ms is below the minimum of 1000 ms (RuntimeConfig.min_interval_ms)"


def _refused(hg: Headgate, call: Callable[[], object], message: str) -> None:
    before = hg._core.store.log.head()
    with pytest.raises(ValidationError) as caught:
        call()
    assert str(caught.value) == message
    assert hg._core.store.log.head() == before, "a refused definition wrote to the log"


@AND_MEMORY
def test_the_default_minimum_is_a_second_on_every_path(hg: Headgate) -> None:
    assert hg.config.min_interval_ms == 1_000
    _refused(hg, lambda: hg.schedules.put("s", spec="@every:1", kind="k"), BELOW)
    _refused(
        hg,
        lambda: hg.schedules.put("s", spec="@every:999", kind="k"),
        "spec: interval 999 ms is below the minimum of 1000 ms (RuntimeConfig.min_interval_ms)",
    )
    _refused(
        hg,
        lambda: hg.schedules.put_many(
            [
                {"schedule_id": "ok", "spec": "@every:1s", "kind": "k"},
                {"schedule_id": "fast", "spec": "@every:500ms", "kind": "k"},
            ]
        ),
        "schedules[1].spec: interval 500 ms is below the minimum of 1000 ms "
        "(RuntimeConfig.min_interval_ms)",
    )
    with pytest.raises(ValidationError, match=r"^spec: interval 1 ms is below the minimum"):
        hg.periodic("fast", spec="@every:1")(lambda job: None)
    assert hg.schedules.list().schedules == []
    assert hg.schedules.put("s", spec="@every:1000", kind="k").spec == "@every:1000"


@AND_MEMORY
def test_a_cron_spec_with_seconds_is_held_to_it_too(
    make_headgate: Callable[..., Headgate],
) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=60_000, min_interval_ms=30_000))
    _refused(
        hg,
        lambda: hg.schedules.put("s", spec="*/10 * * * * *", kind="k"),
        "spec: '*/10 * * * * *' ticks as little as 10000 ms apart, below the minimum of "
        "30000 ms (RuntimeConfig.min_interval_ms)",
    )
    assert hg.schedules.put("s", spec="0,30 * * * * *", kind="k").spec == "0,30 * * * * *"


@AND_MEMORY
def test_a_host_lowers_it_explicitly(make_headgate: Callable[..., Headgate]) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=60_000, min_interval_ms=1, max_ticks_per_s=2_000))
    assert hg.schedules.put("s", spec="@every:1", kind="k").spec == "@every:1"

    @hg.periodic("fast", spec="@every:10ms")
    def fast(job: JobContext) -> None:
        del job

    hg.start(workers=False)
    assert hg.schedules.get("fast").spec == "@every:10"


@pytest.mark.parametrize("value", [0, -1, 60_001])
def test_the_setting_is_bounded(value: int) -> None:
    with pytest.raises(ValueError, match="min_interval_ms must be between 1 and 60000"):
        RuntimeConfig(min_interval_ms=value)


@pytest.mark.parametrize("value", [True, 1.5, "1000"])
def test_the_setting_is_an_integer(value: object) -> None:
    with pytest.raises(ValueError, match="min_interval_ms must be an integer"):
        RuntimeConfig(min_interval_ms=value)  # type: ignore[arg-type]


@AND_MEMORY
def test_a_schedule_stored_below_the_minimum_ticks_on_unchanged(
    hg: Headgate, clock: FakeClock
) -> None:
    """A store written before the minimum (or under a lower one) loses nothing:
    its schedule keeps its spec and fires every tick; pause and resume keep it;
    only defining it again is checked."""
    stored = schedule_defined(
        "pulse", "@every:100", "k", "default", None, "backfill", 1000, False, START_MS + 100
    )  # type: ignore[arg-type]
    hg._core.store.log.append(schedule_stream("pulse"), NO_STREAM, [stored])
    clock.advance(500)
    fire(hg)
    assert jobs_for(hg, "pulse") == [START_MS + 100 * n for n in range(1, 6)]
    assert hg.schedules.pause("pulse").spec == "@every:100"
    assert not hg.schedules.resume("pulse").paused
    clock.advance(200)
    fire(hg)
    assert jobs_for(hg, "pulse")[-1] == START_MS + 700
    assert [run.tick_ms for run in hg.schedules.upcoming("pulse", 2)] == [
        START_MS + 800,
        START_MS + 900,
    ]
    _refused(
        hg,
        lambda: hg.schedules.put("pulse", spec="@every:100", kind="k", on_missed="backfill"),
        "spec: interval 100 ms is below the minimum of 1000 ms (RuntimeConfig.min_interval_ms)",
    )
    assert hg.schedules.get("pulse").spec == "@every:100"
    assert hg.schedules.enqueue_now("pulse", "click-1").replayed is False


@AND_MEMORY
def test_a_respelled_interval_is_unchanged_and_keeps_its_phase(
    hg: Headgate, clock: FakeClock
) -> None:
    first = hg.schedules.put("s", spec="@every:30000", kind="k")
    before = hg._core.store.log.head()
    clock.advance(12_345)
    assert hg.schedules.put("s", spec="@every:30s", kind="k") == first
    assert hg.schedules.put_many(
        [{"schedule_id": "s", "spec": "@every:0.5m", "kind": "k"}]
    ).outcomes == {"s": "unchanged"}
    assert hg._core.store.log.head() == before, "a respelling wrote an event"
    made = hg.schedules.put("minutes", spec="@every:5m", kind="k")
    assert (made.spec, made.next_run_ms % 300_000) == ("@every:300000", 0)
