"""Schedule reads: each schedule's row as its events fold it, the due read, the
listing, the enqueue history, and the bulk read inside a write."""

from __future__ import annotations

import pytest

from headgate._domain.events import NextRunAdvanced, Outcome, ScheduleDeleted
from headgate._domain.streams import schedule_stream
from headgate._errors import ConcurrencyConflict, ValidationError
from headgate._store.port import ANY_VERSION, NO_STREAM, Reads, Store, StreamAppend
from tests.store.builders import attempted, create_schedule, defined, fire_tick


class TestSchedules:
    def test_definition_creates_the_row(self, store: Store) -> None:
        create_schedule(store, "nightly", next_run_ms=60_000)
        row = store.reads.schedule("nightly")
        assert row is not None
        assert (row.spec, row.kind, row.queue, row.payload) == (
            "@every:60000",
            "report.build",
            "default",
            '{"team":7}',
        )
        assert (row.on_missed, row.backfill_limit, row.paused, row.deleted) == (
            "skip",
            1,
            False,
            False,
        )
        assert (
            row.next_run_ms,
            row.due_at_ms,
            row.failures,
            row.last_enqueued_ms,
            row.version,
        ) == (60_000, 60_000, 0, None, 1)

    def test_a_tick_advances_next_run_and_the_version(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        row = store.reads.schedule("nightly")
        assert row is not None
        assert (row.next_run_ms, row.due_at_ms, row.last_enqueued_ms, row.version) == (
            120_000,
            120_000,
            60_000,
            2,
        )

    def test_a_failed_attempt_keeps_the_tick_and_delays_the_retry(self, store: Store) -> None:
        create_schedule(store, "nightly")
        failed = attempted(
            "nightly", 60_000, Outcome.FAILED, "backpressure", attempt=3, retry_at_ms=64_000
        )
        store.log.append("schedule-nightly", 1, [failed])
        row = store.reads.schedule("nightly")
        assert row is not None
        assert (row.next_run_ms, row.due_at_ms, row.failures) == (60_000, 64_000, 3)
        store.log.append("schedule-nightly", 2, [NextRunAdvanced("nightly", 120_000, 60_000)])
        row = store.reads.schedule("nightly")
        assert row is not None
        assert (row.due_at_ms, row.failures) == (120_000, 0)

    def test_an_attempt_says_where_it_left_the_schedule(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        failed = attempted(
            "nightly",
            120_000,
            Outcome.FAILED,
            "hook_error",
            retry_at_ms=121_000,
            next_run_ms=120_000,
            last_enqueued_ms=60_000,
        )
        store.log.append("schedule-nightly", 2, [failed])
        assert self._progress(store) == (120_000, 121_000, 1, 60_000)
        enqueued = attempted(
            "nightly", 120_000, attempt=2, next_run_ms=180_000, last_enqueued_ms=120_000
        )
        store.log.append("schedule-nightly", 3, [enqueued])
        assert self._progress(store) == (180_000, 180_000, 0, 120_000)

    @staticmethod
    def _progress(store: Store) -> tuple[object, ...]:
        row = store.reads.schedule("nightly")
        assert row is not None
        return (row.next_run_ms, row.due_at_ms, row.failures, row.last_enqueued_ms)

    def test_redefinition_keeps_last_enqueued_from_the_snapshot(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        store.log.append(
            "schedule-nightly",
            2,
            [defined("nightly", 300_000, paused=True, last_enqueued_ms=60_000)],
        )
        row = store.reads.schedule("nightly")
        assert row is not None
        assert (row.paused, row.next_run_ms, row.last_enqueued_ms, row.version) == (
            True,
            300_000,
            60_000,
            3,
        )

    def test_due_read_is_bounded_ordered_and_skips_paused_and_deleted(self, store: Store) -> None:
        create_schedule(store, "late", next_run_ms=50_000)
        create_schedule(store, "early", next_run_ms=10_000)
        create_schedule(store, "future", next_run_ms=999_000)
        store.log.append("schedule-paused", NO_STREAM, [defined("paused", 1_000, paused=True)])
        create_schedule(store, "gone", next_run_ms=1_000)
        store.log.append("schedule-gone", ANY_VERSION, [ScheduleDeleted("gone")])
        reads = store.reads
        assert [r.schedule_id for r in reads.due_schedules(60_000, 10)] == ["early", "late"]
        assert [r.schedule_id for r in reads.due_schedules(60_000, 1)] == ["early"]
        assert reads.earliest_due_at() == 10_000
        assert (reads.due_count(60_000), reads.due_count(9_999), reads.due_count(10**15)) == (
            2,
            0,
            3,
        )

    def test_schedules_page_to_the_end(self, store: Store) -> None:
        for n in range(5):
            create_schedule(store, f"s{n}")
        reads = store.reads
        first = reads.schedules_page(2, None)
        second = reads.schedules_page(2, first.next_cursor)
        third = reads.schedules_page(2, second.next_cursor)
        assert [r.schedule_id for r in first.items + second.items + third.items] == [
            "s0",
            "s1",
            "s2",
            "s3",
            "s4",
        ]
        assert third.next_cursor is None

    def test_the_list_is_in_code_point_order_on_every_backend(self, store: Store) -> None:
        """Not the database's collation: a language's would put `a-b` between `ab`
        and `ac`, and the two backends would page differently."""
        ids = ["b", "B", "ab", "a-b", "ac", "a", "é", "z", "bulk-10", "bulk-2", "~", "日本"]
        for schedule_id in ids:
            create_schedule(store, schedule_id)
        listed = _every_page(store.reads, None)
        assert listed == sorted(ids)
        assert store.reads.schedule_count() == len(ids)

    def test_a_search_lists_and_counts_the_ids_starting_with_it(self, store: Store) -> None:
        for n in range(13):
            create_schedule(store, f"bulk-{n}")
        for schedule_id in ("bulk", "bulk-1-gone", "Bulk-1", "other"):
            create_schedule(store, schedule_id)
        store.log.append("schedule-bulk-1-gone", 1, [ScheduleDeleted("bulk-1-gone")])
        reads = store.reads
        assert _every_page(reads, "bulk-1") == ["bulk-1", "bulk-10", "bulk-11", "bulk-12"]
        assert reads.schedule_count("bulk-1") == 4
        assert reads.schedule_count("bulk") == 14
        assert reads.schedule_count() == 16
        assert _every_page(reads, "") == _every_page(reads, None)
        assert reads.schedule_count("") == 16

    @pytest.mark.parametrize(
        ("search", "found"),
        [
            ("a%", ["a%b"]),
            ("a_", ["a_b"]),
            ("a\\", ["a\\b"]),
            ("a'", ["a'b"]),
            ("a*", []),
            ("\U0010ffff", ["\U0010ffff", "\U0010ffffz"]),
            ("a\U0010ffff", ["a\U0010ffff"]),
            ("\ud7ff", ["\ud7ffx"]),
            ("\x00", []),
            ("\ud800", []),
            ("a" * 10_000, []),
        ],
        ids=[
            "percent",
            "underscore",
            "backslash",
            "quote",
            "star",
            "highest-code-point",
            "highest-code-point-last",
            "before-surrogates",
            "nul",
            "lone-surrogate",
            "too-long",
        ],
    )
    def test_a_search_matches_its_text_literally_and_odd_text_matches_nothing(
        self, store: Store, search: str, found: list[str]
    ) -> None:
        ids = ["a%b", "a_b", "axb", "a\\b", "a'b", "\U0010ffff", "\U0010ffffz"]
        for schedule_id in [*ids, "a\U0010ffff", "\ud7ffx", "\ue000", "b"]:
            create_schedule(store, schedule_id)
        reads = store.reads
        assert _every_page(reads, search) == found
        assert reads.schedule_count(search) == len(found)

    def test_a_searchs_pages_follow_one_another_to_the_end(self, store: Store) -> None:
        for n in range(30):
            create_schedule(store, f"s-{n:02}")
        create_schedule(store, "t")
        reads = store.reads
        first = reads.schedules_page(20, None, "s-")
        second = reads.schedules_page(20, first.next_cursor, "s-")
        assert [r.schedule_id for r in first.items + second.items] == [
            f"s-{n:02}" for n in range(30)
        ]
        assert second.next_cursor is None
        assert reads.schedules_page(20, None, "s-2").next_cursor is None


def _every_page(reads: Reads, search: str | None) -> list[str]:
    listed: list[str] = []
    cursor = None
    while True:
        page = reads.schedules_page(3, cursor, search)
        listed += [row.schedule_id for row in page.items]
        if page.next_cursor is None:
            return listed
        cursor = page.next_cursor


class TestEnqueueHistory:
    def _record(self, store: Store, schedule_id: str, count: int) -> None:
        version = store.log.stream_version(f"schedule-{schedule_id}")
        store.log.append(
            f"schedule-{schedule_id}",
            version,
            [attempted(schedule_id, n * 1000) for n in range(1, count + 1)],
        )

    def test_keeps_the_newest_100_per_schedule(self, store: Store) -> None:
        create_schedule(store, "a")
        create_schedule(store, "b")
        self._record(store, "a", 60)
        self._record(store, "b", 3)
        self._record(store, "a", 45)  # 105 attempts at a
        page = store.reads.enqueue_history("a", 100, None)
        assert len(page.items) == 100 and page.next_cursor is None
        assert [r.tick_ms for r in page.items[:2]] == [45_000, 44_000]
        assert page.items[-1].tick_ms == 6_000  # the oldest 5 of the first 60 are gone
        assert len(store.reads.enqueue_history("b", 100, None).items) == 3

    def test_paging_newest_first(self, store: Store) -> None:
        create_schedule(store, "a")
        self._record(store, "a", 100)
        reads = store.reads
        cursor = None
        for _ in range(5):
            page = reads.enqueue_history("a", 10, cursor)
            cursor = page.next_cursor
        sixth = reads.enqueue_history("a", 10, cursor)
        # after the 50th newest: the 51st..60th newest, i.e. ticks 50..41
        assert [r.tick_ms // 1000 for r in sixth.items] == list(range(50, 40, -1))
        rest = reads.enqueue_history("a", 100, sixth.next_cursor)
        assert len(rest.items) == 40 and rest.next_cursor is None

    def test_records_carry_identity_outcome_and_reason_only(self, store: Store) -> None:
        create_schedule(store, "a")
        store.log.append(
            "schedule-a",
            1,
            [
                attempted(
                    "a", 5000, Outcome.FAILED, "store_unavailable", attempt=2, retry_at_ms=9000
                )
            ],
        )
        (row,) = store.reads.enqueue_history("a", 1, None).items
        assert (row.schedule_id, row.tick_ms, row.job_id, row.outcome, row.reason, row.attempt) == (
            "a",
            5000,
            "job-for-a-5000",
            "failed",
            "store_unavailable",
            2,
        )
        assert row.recorded_at_ms == store.clock.now_ms()
        assert row.event_id == 2

    def test_history_survives_schedule_deletion(self, store: Store) -> None:
        create_schedule(store, "a")
        fire_tick(store, "a", 60_000)
        store.log.append("schedule-a", ANY_VERSION, [ScheduleDeleted("a")])
        assert [r.tick_ms for r in store.reads.enqueue_history("a", 30, None).items] == [60_000]
        row = store.reads.schedule("a")
        assert row is not None and row.deleted

    @pytest.mark.parametrize("limit", [0, 101, -1])
    def test_limit_is_between_1_and_100(self, store: Store, limit: int) -> None:
        with pytest.raises(ValidationError, match="limit: must be an integer between 1 and 100"):
            store.reads.enqueue_history("a", limit, None)

    @pytest.mark.parametrize("cursor", ["garbage!", "", "eyJ4IjoxfQ", "WyJzY2hlZHVsZXMiLCJhIl0"])
    def test_malformed_or_foreign_cursors_are_rejected(self, store: Store, cursor: str) -> None:
        with pytest.raises(ValidationError, match="cursor: is not a cursor returned by this list"):
            store.reads.enqueue_history("a", 10, cursor)


def test_schedules_are_read_in_bulk_deleted_ones_included(store: Store) -> None:
    for n in range(1_100):  # more than one query's worth of ids
        create_schedule(store, f"s{n}", next_run_ms=60_000 + n)
    fire_tick(store, "s7", 60_007)
    store.log.append("schedule-s9", 1, [ScheduleDeleted("s9")])
    wanted = [f"s{n}" for n in range(1_100)] + ["missing", "bad\x00id", "x" * 300]
    with store.log.write() as transaction:
        rows = transaction.schedules(wanted)
        assert sorted(rows) == sorted(f"s{n}" for n in range(1_100))
        assert rows["s1099"].next_run_ms == 61_099
        assert rows["s9"].deleted and rows["s9"].version == 2
        assert rows["s7"] == transaction.schedule("s7") and rows["s7"].version == 2
        assert transaction.schedules([]) == {}
        # What it read is what an append is checked against: each stream's version.
        results = transaction.append_units(
            [
                [StreamAppend("schedule-s7", rows["s7"].version, (defined("s7"),))],
                [StreamAppend("schedule-missing", NO_STREAM, (defined("missing"),))],
                [StreamAppend("schedule-s1", NO_STREAM, (defined("s1"),))],
            ]
        )
        assert isinstance(results[0], list) and isinstance(results[1], list)
        assert isinstance(results[2], ConcurrencyConflict)
        # It sees the transaction's own appends.
        after = transaction.schedules(["s7", "missing"])
        assert after["s7"].version == 3 and after["missing"].version == 1
    assert store.reads.schedule("missing") is not None


def test_spec_counts_weigh_the_live_schedules_less_those_left_out(store: Store) -> None:
    """What the store-wide ceilings read: live schedules by spec (paused ones too;
    deleted and finished ones not), less the schedules a write will replace."""
    for schedule_id, spec, extra in (
        ("a", "@every:1000", {}),
        ("b", "@every:1000", {"paused": True}),
        ("c", "0 9 * * *", {}),
        ("gone", "@every:1000", {}),
        ("over", "@every:1000", {"end_at_ms": 1_000}),  # next run past its end: finished
    ):
        store.log.append(
            schedule_stream(schedule_id),
            NO_STREAM,
            [defined(schedule_id, 60_000, spec=spec, **extra)],
        )
    store.log.append("schedule-gone", ANY_VERSION, [ScheduleDeleted("gone")])
    assert store.reads.spec_counts() == {"@every:1000": 2, "0 9 * * *": 1}
    assert store.reads.spec_counts(excluding=["a", "c", "gone", "nobody", "x\x00"]) == {
        "@every:1000": 1
    }
