"""Each projection, through the live append path, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from headgate._domain.decisions import Candidate, GateFacts
from headgate._domain.events import (
    FingerprintQuarantined,
    FingerprintReleased,
    JobFinished,
    JobState,
    NextRunAdvanced,
    Outcome,
    ScheduleDeleted,
)
from headgate._errors import ValidationError
from headgate._store.port import ANY_VERSION, NO_STREAM, Reads, Store
from tests.store.builders import attempted, create_schedule, defined, enqueued, fire_tick


def _reads(store: Store) -> Reads:
    return store.reads


class TestSchedules:
    def test_definition_creates_the_row(self, store: Store) -> None:
        create_schedule(store, "nightly", next_run_ms=60_000)
        row = _reads(store).schedule("nightly")
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
        row = _reads(store).schedule("nightly")
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
        row = _reads(store).schedule("nightly")
        assert row is not None
        assert (row.next_run_ms, row.due_at_ms, row.failures) == (60_000, 64_000, 3)
        store.log.append("schedule-nightly", 2, [NextRunAdvanced("nightly", 120_000, 60_000)])
        row = _reads(store).schedule("nightly")
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
        row = _reads(store).schedule("nightly")
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
        row = _reads(store).schedule("nightly")
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
        reads = _reads(store)
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
        listed = _every_page(_reads(store), None)
        assert listed == sorted(ids)
        assert _reads(store).schedule_count() == len(ids)

    def test_a_search_lists_and_counts_the_ids_starting_with_it(self, store: Store) -> None:
        for n in range(13):
            create_schedule(store, f"bulk-{n}")
        for schedule_id in ("bulk", "bulk-1-gone", "Bulk-1", "other"):
            create_schedule(store, schedule_id)
        store.log.append("schedule-bulk-1-gone", 1, [ScheduleDeleted("bulk-1-gone")])
        reads = _reads(store)
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
        reads = _reads(store)
        assert _every_page(reads, search) == found
        assert reads.schedule_count(search) == len(found)

    def test_a_searchs_pages_follow_one_another_to_the_end(self, store: Store) -> None:
        for n in range(30):
            create_schedule(store, f"s-{n:02}")
        create_schedule(store, "t")
        reads = _reads(store)
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


class TestJobs:
    def test_periodic_origin_is_stored(self, store: Store) -> None:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        job = _reads(store).job("job-for-nightly-60000")
        assert job is not None
        assert (job.periodic_schedule_id, job.periodic_tick_ms, job.state) == (
            "nightly",
            60_000,
            "pending",
        )

    def test_ordinary_job_has_no_origin_and_can_finish(self, store: Store) -> None:
        store.log.append("job-j1", NO_STREAM, [enqueued("j1", "email.send", "mail", {"to": "x"})])
        store.log.append("job-j1", 1, [JobFinished("j1", JobState.COMPLETED)])
        job = _reads(store).job("j1")
        assert job is not None
        assert (job.periodic_schedule_id, job.periodic_tick_ms, job.state, job.payload) == (
            None,
            None,
            "completed",
            '{"to":"x"}',
        )

    @pytest.mark.parametrize(("schedule_id", "tick_ms"), [("nightly", None), (None, 60_000)])
    def test_half_an_origin_is_rejected_before_anything_is_written(
        self, store: Store, schedule_id: str | None, tick_ms: int | None
    ) -> None:
        with pytest.raises(
            ValidationError, match="periodic_origin: needs both schedule_id and tick_ms"
        ):
            store.log.append(
                "job-j1", NO_STREAM, [enqueued("j1", "k", "q", {}, None, schedule_id, tick_ms)]
            )
        assert store.log.head() == 0

    def test_pending_counts_and_live_unique_keys(self, store: Store) -> None:
        store.log.append("job-a", NO_STREAM, [enqueued("a", "k", "q1", {}, "key-1")])
        store.log.append("job-b", NO_STREAM, [enqueued("b", "k", "q1", {}, "key-2")])
        store.log.append("job-b", 1, [JobFinished("b", JobState.COMPLETED)])
        facts = _gate_facts(
            store, [_candidate("c1", "key-1"), _candidate("c2", "key-2")], ["q1", "q2"]
        )
        assert facts.pending == {"q1": 1, "q2": 0}
        assert facts.unique_key_holders == {"key-1": "a"}


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
        page = _reads(store).enqueue_history("a", 100, None)
        assert len(page.items) == 100 and page.next_cursor is None
        assert [r.tick_ms for r in page.items[:2]] == [45_000, 44_000]
        assert page.items[-1].tick_ms == 6_000  # the oldest 5 of the first 60 are gone
        assert len(_reads(store).enqueue_history("b", 100, None).items) == 3

    def test_paging_newest_first(self, store: Store) -> None:
        create_schedule(store, "a")
        self._record(store, "a", 100)
        reads = _reads(store)
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
        (row,) = _reads(store).enqueue_history("a", 1, None).items
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
        assert [r.tick_ms for r in _reads(store).enqueue_history("a", 30, None).items] == [60_000]
        row = _reads(store).schedule("a")
        assert row is not None and row.deleted

    @pytest.mark.parametrize("limit", [0, 101, -1])
    def test_limit_is_between_1_and_100(self, store: Store, limit: int) -> None:
        with pytest.raises(ValidationError, match="limit: must be an integer between 1 and 100"):
            _reads(store).enqueue_history("a", limit, None)

    @pytest.mark.parametrize("cursor", ["garbage!", "", "eyJ4IjoxfQ", "WyJzY2hlZHVsZXMiLCJhIl0"])
    def test_malformed_or_foreign_cursors_are_rejected(self, store: Store, cursor: str) -> None:
        with pytest.raises(ValidationError, match="cursor: is not a cursor returned by this list"):
            _reads(store).enqueue_history("a", 10, cursor)


def test_quarantine_projection(store: Store) -> None:
    store.log.append("quarantine-f1", NO_STREAM, [FingerprintQuarantined("f1", "poison")])
    store.log.append("quarantine-f2", NO_STREAM, [FingerprintQuarantined("f2")])
    store.log.append("quarantine-f2", 1, [FingerprintReleased("f2")])
    candidates = [_candidate(f"c{n}", fingerprint=f"f{n}") for n in (1, 2, 3)]
    assert _gate_facts(store, candidates, []).quarantined == {"f1"}
    assert store.reads.quarantined_count() == 1


def _candidate(job_id: str, unique_key: str | None = None, fingerprint: str = "fp") -> Candidate:
    return Candidate(enqueued(job_id, "k", "q1", {}, unique_key), fingerprint, 2)


def _gate_facts(store: Store, candidates: list[Candidate], queues: list[str]) -> GateFacts:
    with store.log.write() as transaction:
        return transaction.gate_facts(candidates, queues)
