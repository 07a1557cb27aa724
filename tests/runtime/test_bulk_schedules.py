"""put_schedules: many upserts in one call, with put_schedule's rules, on both backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from headgate import Headgate, PutSchedulesResult, StoreUnavailable, ValidationError
from headgate._domain.spec import MAX_INSTANT_MS, parse_spec
from headgate._store.port import Unit
from headgate.testing import FakeClock
from tests.runtime.conftest import START_MS, FaultyHeadgate


def _item(schedule_id: str, **fields: object) -> dict[str, object]:
    return {"schedule_id": schedule_id, "spec": "@every:60000", "kind": "report", **fields}


def _all_ids(hg: Headgate) -> list[str]:
    ids, cursor = [], None
    while True:
        page = hg.schedules.list(limit=200, cursor=cursor)
        ids += [schedule.id for schedule in page.schedules]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def test_creates_updates_and_leaves_unchanged_what_it_is_given(hg: Headgate) -> None:
    hg.schedules.put("kept", spec="@every:60000", kind="report")
    hg.schedules.put("changed", spec="@every:60000", kind="report")
    hg.schedules.put("gone", spec="@every:60000", kind="report", payload={"v": 1})
    hg.schedules.delete("gone")
    result = hg.schedules.put_many(
        [
            _item("kept"),
            _item("changed", payload={"team": 7}, queue="reports", paused=True),
            _item("new", spec="0 9 * * *", on_missed="backfill", backfill_max=3),
            _item("gone"),
        ]
    )
    assert result == PutSchedulesResult(
        {"kept": "unchanged", "changed": "updated", "new": "created", "gone": "created"}
    )
    assert (result.created, result.updated, result.unchanged) == (2, 1, 1)
    changed = hg.schedules.get("changed")
    assert (changed.payload, changed.queue, changed.paused) == ({"team": 7}, "reports", True)
    new = hg.schedules.get("new")
    assert (new.spec, new.on_missed, new.backfill_max) == ("0 9 * * *", "backfill", 3)
    assert new.next_run_ms == parse_spec("0 9 * * *").next_tick_ms(START_MS)
    assert hg.schedules.get("gone").payload is None
    assert sorted(_all_ids(hg)) == ["changed", "gone", "kept", "new"]


def test_the_same_rows_as_put_schedule_one_by_one(make_headgate: Callable[..., Headgate]) -> None:
    hg = make_headgate()
    day = 86_400_000
    items = [
        _item(f"s{n}", spec=f"{n % 7} 9 * * *", payload={"n": n}, queue=f"q{n % 3}")
        | ({"start_at_ms": START_MS + 3 * day, "end_at_ms": START_MS + 9 * day} if n % 2 else {})
        for n in range(20)
    ]
    hg.schedules.put_many(items)
    for item in items:
        definition = {k: v for k, v in item.items() if k != "schedule_id"}
        hg.schedules.put(f"one-{item['schedule_id']}", **definition)  # type: ignore[arg-type]
    for item in items:
        bulk = hg.schedules.get(str(item["schedule_id"]))
        one = hg.schedules.get(f"one-{item['schedule_id']}")
        assert bulk.__dict__ == {**one.__dict__, "id": bulk.id}


def test_an_unchanged_spec_keeps_its_phase_and_a_changed_one_re_anchors(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put_many([_item("same"), _item("respelled", spec="0 9 * * 1-5"), _item("moved")])
    phase = {s: hg.schedules.get(s).next_run_ms for s in ("same", "respelled", "moved")}
    clock.advance(90_000)  # past the first tick (nothing fired: the runtime is not started)
    result = hg.schedules.put_many(
        [
            _item("same", payload={"new": True}),
            _item("respelled", spec="0 9 * * MON-FRI"),
            _item("moved", spec="@every:3600000"),
        ]
    )
    assert result.updated == 3
    assert hg.schedules.get("same").next_run_ms == phase["same"] == START_MS + 60_000
    assert hg.schedules.get("respelled").next_run_ms == phase["respelled"]
    assert hg.schedules.get("moved").next_run_ms == START_MS + 3_600_000  # first tick after now


def test_an_identical_call_writes_nothing(hg: Headgate) -> None:
    items = [_item(f"s{n}", payload={"n": n}) for n in range(30)]
    assert hg.schedules.put_many(items).created == 30
    head = hg._core.store.log.head()
    assert hg.schedules.put_many(items).unchanged == 30
    assert hg._core.store.log.head() == head


def test_many_are_written_in_chunks_with_one_event_each(hg: Headgate) -> None:
    items = [_item(f"tenant-{n}", spec=f"{n % 60} 9 * * *") for n in range(1_201)]
    result = hg.schedules.put_many(items)
    assert result.created == 1_201
    assert len(_all_ids(hg)) == 1_201
    assert hg._core.store.log.head() == 1_201
    assert hg.schedules.get("tenant-1200").next_run_ms == parse_spec("0 9 * * *").next_tick_ms(
        START_MS
    )
    assert hg.schedules.put_many(items).unchanged == 1_201
    assert hg._core.store.log.head() == 1_201


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"spec": "61 * * * *"}, r"^schedules\[2\]\.spec: "),
        ({"schedule_id": "no spaces"}, r"^schedules\[2\]\.schedule_id: may contain only"),
        ({"kind": ""}, r"^schedules\[2\]\.kind: must be 1-128 characters"),
        ({"on_missed": "never"}, r"^schedules\[2\]\.on_missed: must be one of"),
        ({"backfill_max": 0}, r"^schedules\[2\]\.backfill_max: must be between"),
        ({"paused": "yes"}, r"^schedules\[2\]\.paused: must be true or false"),
        ({"payload": {"x": float("nan")}}, r"^schedules\[2\]\.payload: must be plain JSON"),
        ({"queue": "a" * 200}, r"^schedules\[2\]\.queue: must be 1-128 characters"),
        ({"colour": "red"}, r"^schedules\[2\]\.colour: is not a known option$"),
        ({"spec": None}, r"^schedules\[2\]\.spec: must be a string"),
    ],
)
def test_a_bad_item_is_named_by_index_and_field_and_nothing_is_written(
    hg: Headgate, bad: dict[str, object], message: str
) -> None:
    items = [_item(f"s{n}") for n in range(600)]  # more than one chunk
    items[2] = {**items[2], **bad}
    with pytest.raises(ValidationError, match=message):
        hg.schedules.put_many(items)
    assert hg._core.store.log.head() == 0
    assert _all_ids(hg) == []


def test_missing_fields_and_items_that_are_not_mappings(hg: Headgate) -> None:
    with pytest.raises(ValidationError, match=r"^schedules\[1\]\.kind: is required$"):
        hg.schedules.put_many([_item("a"), {"schedule_id": "b", "spec": "@every:1000"}])
    with pytest.raises(ValidationError, match=r"^schedules\[0\]\.schedule_id: is required$"):
        hg.schedules.put_many([{"spec": "@every:1000", "kind": "k"}])
    with pytest.raises(ValidationError, match=r"^schedules\[1\]: must be a mapping, got str$"):
        hg.schedules.put_many([_item("a"), "b"])  # type: ignore[list-item]
    assert hg._core.store.log.head() == 0


def test_an_id_given_twice_is_refused(hg: Headgate) -> None:
    with pytest.raises(
        ValidationError, match=r"^schedules\[2\]\.schedule_id: 'a' is also schedules\[0\]"
    ):
        hg.schedules.put_many([_item("a"), _item("b"), _item("a", payload=1)])
    assert hg._core.store.log.head() == 0


def test_nothing_to_do(hg: Headgate) -> None:
    assert hg.schedules.put_many([]) == PutSchedulesResult({})
    assert hg._core.store.log.head() == 0


def test_a_store_error_partway_keeps_earlier_chunks_and_a_repeat_finishes(
    make_faulty: Callable[..., FaultyHeadgate],
) -> None:
    hg, faults = make_faulty()
    items = [_item(f"s{n}") for n in range(1_100)]
    writes: list[int] = []

    def fail_the_second(units: Sequence[Unit]) -> None:
        writes.append(len(units))
        if len(writes) == 2:
            raise StoreUnavailable("the store went away")

    faults.before_append = fail_the_second
    with pytest.raises(StoreUnavailable) as raised:
        hg.schedules.put_many(items)
    assert "schedules[0:500] of 1100 were written" in "".join(raised.value.__notes__)
    assert len(_all_ids(hg)) == 500
    faults.before_append = None
    result = hg.schedules.put_many(items)
    assert (result.unchanged, result.created) == (500, 600)
    assert len(_all_ids(hg)) == 1_100


def test_declared_schedules_are_upserted_at_start_in_bulk(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    first = make_headgate()
    for n in range(3):
        first.periodic(f"declared-{n}", spec="@every:60000")(lambda job: None)
    first.start(workers=False, scheduler=False)
    first.stop()
    phase = first.schedules.get("declared-0").next_run_ms
    head = first._core.store.log.head()
    clock.advance(90_000)
    second = make_headgate()
    for n in range(3):
        second.periodic(f"declared-{n}", spec="@every:60000")(lambda job: None)
    second.periodic("declared-new", spec="@every:60000")(lambda job: None)
    second.start(workers=False, scheduler=False)
    second.stop()
    assert second.schedules.get("declared-0").next_run_ms == phase  # unchanged: its phase kept
    assert second.schedules.get("declared-new").next_run_ms == START_MS + 120_000
    assert second._core.store.log.head() == head + 1  # only the new one is written


def test_bounds_and_jitter_are_kept_and_validated_per_item(hg: Headgate) -> None:
    hg.schedules.put_many(
        [
            _item("late", start_at_ms=START_MS + 3_600_000),
            _item("spread", jitter_ms=30_000),
        ]
    )
    late, spread = hg.schedules.get("late"), hg.schedules.get("spread")
    assert late.next_run_ms == START_MS + 3_600_000
    assert spread.jitter_ms == 30_000
    assert 0 <= spread.next_due_at_ms - spread.next_run_ms < 30_000
    assert hg.schedules.upcoming("spread", 1)[0].due_at_ms == spread.next_due_at_ms
    with pytest.raises(ValidationError, match=r"schedules\[1\]\.end_at_ms: must be after"):
        hg.schedules.put_many(
            [_item("a"), _item("b", start_at_ms=START_MS, end_at_ms=START_MS - 1)]
        )
    assert "a" not in _all_ids(hg)


def test_an_item_with_no_tick_left_fails_the_call_before_any_chunk_is_written(
    hg: Headgate,
) -> None:
    items = [_item(f"s{n}") for n in range(600)]
    items[550] = _item("never", start_at_ms=MAX_INSTANT_MS)
    with pytest.raises(ValidationError, match=r"^schedules\[550\]\.start_at_ms: "):
        hg.schedules.put_many(items)
    assert _all_ids(hg) == []
