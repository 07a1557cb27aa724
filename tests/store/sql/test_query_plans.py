"""The scheduler's reads stay bounded however many schedules and jobs there are.

The due read and the earliest-due read must be served by the partial due
index, and compaction's search for expired jobs by the finished-jobs index, on
both backends; a condition that does not match an index's predicate makes the
database scan every row on every sweep (or every compaction).

The write path's lookups by key must stay index probes on both backends, on
PostgreSQL even while its statistics lag a young or fast-growing table: asked
for a thousand keys at once (`= ANY(array)`), a planner that believes the
table small scanned every event or every pending job, making each tick ten
times dearer a few minutes into a burst. Each key is looked up on its own,
and a whole batch of ticks, checked in the plans PostgreSQL ran, touches the
growing tables only through their indexes (a hash join of the batch's updates
with every schedule cost four times the probes among 100,000 schedules).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Select, event
from sqlalchemy.engine import Connection

from headgate import Headgate
from headgate._domain.admission import AdmissionLimits
from headgate._domain.events import (
    ConcurrencyLimitSet,
    JobFinished,
    JobState,
    JobSucceeded,
    ManualRunRequested,
)
from headgate._domain.limits import EACH_PARTITION, scope_of
from headgate._domain.schedule_health import HealthState
from headgate._domain.streams import job_stream, limit_stream, manual_run_stream, schedule_stream
from headgate._runtime.tick_batch import TickProcessor
from headgate._store.port import (
    DAY_MS,
    NO_STREAM,
    CompactionPolicy,
    HealthFilter,
    JobFilter,
    StreamAppend,
)
from headgate._store.sql import claiming, job_reads, runs, schedule_reads
from headgate._store.sql import log_transaction as sql_log
from headgate._store.sql.compaction import compact, finished_jobs_query
from headgate._store.sql.job_reads import (
    job_counts_query,
    jobs_query,
    late_jobs_query,
    oldest_pending_query,
    state_count_query,
)
from headgate._store.sql.maintenance import rebuild
from headgate._store.sql.schedule_reads import (
    due_count_query,
    due_query,
    earliest_due_query,
    schedule_count_query,
    schedules_query,
)
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock, finish_job
from tests.store.builders import attempted, defined, enqueued


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (due_query(1_704_067_200_000, 500), "ix_headgate_schedules_due_order"),
        (earliest_due_query(), "ix_headgate_schedules_due_order"),
        (finished_jobs_query(1_704_067_200_000, 500), "ix_headgate_jobs_finished"),
        (due_count_query(1_704_067_200_000), "ix_headgate_schedules_due_order"),
        (job_counts_query(), "ix_headgate_jobs_queue_state"),
        (oldest_pending_query(), "ix_headgate_jobs_claimable"),
        (jobs_query(JobFilter(state="failed"), 50, None), "ix_headgate_jobs_state_created"),
        (jobs_query(JobFilter(schedule_id="s"), 50, None), "ix_headgate_jobs_schedule_created"),
        (jobs_query(JobFilter(run_now_schedule_id="s"), 50, None), "ix_headgate_jobs_run_now"),
        (jobs_query(JobFilter(kind="k", state="failed"), 50, None), "ix_headgate_jobs_kind_state"),
        (schedules_query(51, None, None), "ix_headgate_schedules_listed"),
        (schedules_query(51, "bulk-1", "bulk-"), "ix_headgate_schedules_listed"),
        (schedule_count_query(None), "ix_headgate_schedules_listed"),
        (schedule_count_query("bulk-1"), "ix_headgate_schedules_listed"),
    ],
    ids=[
        "due",
        "earliest",
        "finished-jobs",
        "due-count",
        "job-counts",
        "oldest-pending",
        "jobs-by-state",
        "jobs-by-schedule",
        "manual-runs",
        "jobs-by-kind-and-state",
        "schedules",
        "schedules-searched",
        "schedule-count",
        "schedule-count-searched",
    ],
)
def test_the_bounded_reads_use_their_index(
    store: SqlStore, query: Select[object] | None, index: str
) -> None:
    _assert_read_on(store, query, index)


@pytest.mark.parametrize("before", [None, 1_000])
def test_a_schedules_runs_are_read_on_their_index(store: SqlStore, before: int | None) -> None:
    _assert_read_on(
        store, runs.runs_page_query("nightly", 31, before), "ix_headgate_schedule_runs_schedule"
    )


@pytest.mark.parametrize(
    ("state", "runs_indexes"),
    [
        (HealthState.PAUSED, ()),
        (HealthState.MISSING, ()),
        (HealthState.FAILING, ("ix_headgate_schedule_runs_schedule",)),
        (
            HealthState.LATE,
            ("ix_headgate_schedule_runs_schedule", "ix_headgate_schedule_runs_waiting"),
        ),
        (
            HealthState.OK,
            ("ix_headgate_schedule_runs_schedule", "ix_headgate_schedule_runs_waiting"),
        ),
    ],
)
def test_the_health_filter_walks_the_listing_and_each_schedules_runs_on_their_indexes(
    store: SqlStore, state: HealthState, runs_indexes: tuple[str, ...]
) -> None:
    """Each state looks up only what it needs: a paused or missing schedule is told
    by its row; failing by its newest settled run; late by its waiting runs. No
    table is scanned whole (PostgreSQL may start a missing or late filter from
    the due or the waiting runs' index, the few rows they hold, and sort those)."""
    health = HealthFilter(state, 1_704_067_200_000, 10_000)
    for query in (schedules_query(51, None, None, health), schedule_count_query(None, health)):
        plan = _plan_text(store, query)
        for index in runs_indexes:
            assert index in plan, plan
        starts = ("ix_headgate_schedules_listed", "ix_headgate_schedules_due_order")
        assert any(index in plan for index in (*starts, "ix_headgate_schedule_runs_waiting"))
        assert "Seq Scan" not in plan, plan
        assert re.search(r"SCAN headgate_\w+(?! USING)( |$)", plan) is None, plan


def test_late_jobs_are_read_on_the_deadline_index(store: SqlStore) -> None:
    """What a worker expires before each claim: a read of the few late jobs, not
    of every pending one."""
    query = late_jobs_query(store.database.dialect, ["q", "r"], ["k"], 1_704_067_200_000, 500)
    _assert_read_on(store, query, "ix_headgate_jobs_start_by")


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (jobs_query(JobFilter(search="invoice-7"), 50, None), "ix_headgate_jobs_unique_key"),
        (jobs_query(JobFilter(search="k", made_by_schedule="s"), 50, None), None),
        (state_count_query(JobFilter(), "failed", 10_000), "ix_headgate_jobs_state_created"),
        (
            state_count_query(JobFilter(queue="q"), "completed", 10_000),
            None,
        ),
        (state_count_query(JobFilter(search="k"), "failed", 10_000), None),
        (state_count_query(JobFilter(made_by_schedule="s"), "failed", 10_000), None),
        (state_count_query(JobFilter(kind="k"), "failed", 10_000), "ix_headgate_jobs_kind_state"),
        (
            state_count_query(JobFilter(kind="k"), "completed", 10_000),
            "ix_headgate_jobs_kind_state",
        ),
        (jobs_query(JobFilter(kind="k"), 50, None), "ix_headgate_jobs_kind_state"),
    ],
    ids=[
        "search",
        "search-within-a-schedule",
        "count-by-state",
        "count-by-queue-and-state",
        "count-searched",
        "count-by-schedule",
        "count-by-kind",
        "count-by-kind-completed",
        "jobs-by-kind-each-state",
    ],
)
def test_the_jobs_lists_searches_and_counts_read_on_indexes(
    store: SqlStore, query: Select[Any] | None, index: str | None
) -> None:
    """Each branch of a search (a job id, a unique key) and each bounded count
    reads by index, never the whole table (which index, where two could serve,
    is the planner's to choose by the statistics); only the merged page of a
    search is sorted, a page or two of rows."""
    plan = _plan_text(store, query)
    if index is not None:
        assert index in plan, plan
    assert "INDEX" in plan or "Index" in plan, plan
    assert not re.search(r"\bSCAN headgate_jobs\b(?! USING)|Seq Scan on headgate_jobs", plan), plan


def test_the_jobs_newest_attempts_are_read_on_the_attempts_index_on_postgresql(
    store: SqlStore,
) -> None:
    """The jobs list's duration column: each job's newest attempt, probed."""
    if store.backend.name != "postgresql":
        pytest.skip("auto_explain is PostgreSQL's; the statement is the same on SQLite")
    _store_outgrowing_its_statistics(store)
    plans = _plans_of(store, lambda: store.reads.latest_attempts(["j1", "j2"]))
    text = " ".join(plans)
    assert "ix_headgate_job_attempts_job" in text, text
    assert "Seq Scan" not in text, text


def _plan_text(store: SqlStore, query: Select[Any] | None) -> str:
    assert query is not None
    with store.engine.connect() as connection:
        compiled = query.compile(connection, compile_kwargs={"literal_binds": True})
        if store.backend.name == "postgresql":
            connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
            connection.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
            plan = [row[0] for row in connection.exec_driver_sql(f"EXPLAIN {compiled}")]
        else:
            plan = [row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")]
    return " ".join(plan)


def _assert_read_on(store: SqlStore, query: Select[Any] | None, index: str) -> None:
    text = _plan_text(store, query)
    assert index in text, text
    assert "TEMP B-TREE" not in text and "Sort" not in text, text


COUNT = 2_000
GROWING_TABLES = "headgate_events, headgate_schedules, headgate_jobs, headgate_enqueue_history"


def _store_outgrowing_its_statistics(store: SqlStore) -> None:
    """COUNT schedules, each with one tick's job and record, written after
    PostgreSQL last analysed the tables, when they held a handful of rows."""
    defining = [
        [StreamAppend(schedule_stream(f"s{n}"), NO_STREAM, (defined(f"s{n}"),))]
        for n in range(COUNT)
    ]
    store.log.append_units(defining[:10])
    if store.backend.name == "postgresql":
        with store.engine.begin() as connection:
            connection.exec_driver_sql(f"ANALYZE {GROWING_TABLES}")
            # Autovacuum would analyse them again mid-test: the statistics must lag.
            for table in GROWING_TABLES.split(", "):
                connection.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    store.log.append_units(defining[10:])
    store.log.append_units(
        [
            [
                StreamAppend(
                    job_stream(f"j{n}"),
                    NO_STREAM,
                    (enqueued(f"j{n}", "k", "q", {}, f"key-{n}", f"s{n}", 60_000),),
                ),
                StreamAppend(schedule_stream(f"s{n}"), 1, (attempted(f"s{n}", 60_000),)),
            ]
            for n in range(COUNT)
        ]
    )


def test_lookups_by_key_probe_the_index_whatever_the_statistics(store: SqlStore) -> None:
    _store_outgrowing_its_statistics(store)
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    wanted = range(0, COUNT, 2)
    with store.log.write() as transaction:
        event.listen(transaction.connection, "before_cursor_execute", capture)
        transaction.first_events(job_stream(f"next-{n}") for n in wanted)
        transaction.stream_versions(schedule_stream(f"s{n}") for n in wanted)
        job_reads.live_jobs_by_unique_key(transaction.connection, (f"key-{n}" for n in wanted))
        event.remove(transaction.connection, "before_cursor_execute", capture)
        lookups = [s for s in statements if any(w in s[0] for w in ("unnest", "json_each"))]
        # Statements built once run on the driver, unseen by the listener: as they run.
        dialect = store.database.dialect
        for prepared, name, streams in (
            (sql_log._first_events(dialect), "streams", [job_stream(f"next-{n}") for n in wanted]),
            (
                sql_log._latest_versions(dialect),
                "streams",
                [schedule_stream(f"s{n}") for n in wanted],
            ),
        ):
            compiled, parameters = prepared.bound(
                transaction.connection, **{name: dialect.batch_value(streams)}
            )
            lookups.append((compiled.sql, parameters))
        assert len(lookups) >= 3
        for statement, parameters in lookups:
            plan = _plan(transaction.connection, statement, parameters)
            assert "Seq Scan" not in plan and "SCAN headgate_events" not in plan, plan
            assert (
                "SCAN headgate_jobs" not in plan and "ix_headgate_jobs_queue_state" not in plan
            ), plan


def test_a_ticks_job_is_found_by_the_one_job_per_tick_index(store: SqlStore) -> None:
    """What an enqueue naming a periodic origin asks first, whatever the statistics."""
    _store_outgrowing_its_statistics(store)
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    with store.log.write() as transaction:
        event.listen(transaction.connection, "before_cursor_execute", capture)
        found = transaction.job_for_tick("s7", 60_000)
        event.remove(transaction.connection, "before_cursor_execute", capture)
        assert found is not None and found.job_id == "j7"
        ((statement, parameters),) = statements
        plan = _plan(transaction.connection, statement, parameters)
        assert "ux_headgate_jobs_periodic_origin" in plan, plan


def test_overlap_policies_find_a_schedules_live_tick_jobs_on_their_index(
    store: SqlStore,
) -> None:
    """What the gate asks of a schedule whose overlap policy is not allow (its
    pending and running tick jobs), whatever the statistics; and what a serial
    job's claim asks of the same index on SQLite, whose plan names it."""
    _store_outgrowing_its_statistics(store)
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    with store.log.write() as transaction:
        connection = transaction.connection
        event.listen(connection, "before_cursor_execute", capture)
        with store.database.dialect.probing_indexes(connection):
            live = job_reads.live_ticks(connection, ["s7", "s8"])
        event.remove(connection, "before_cursor_execute", capture)
        assert [job.job_id for job in live["s7"]] == ["j7"]
        (statement, parameters) = next(s for s in statements if "periodic_tick_ms" in s[0])
        with store.database.dialect.probing_indexes(connection):
            plan = _plan(connection, statement, parameters)
        assert "ix_headgate_jobs_live_ticks" in plan, plan
    if store.backend.name == "sqlite":
        claim = claiming._claim_statement(store.database.dialect, {"k": 60_000})
        with store.engine.connect() as connection:
            compiled = claim._compiled_for(connection)
            values = {"queue": "q", "limit": 10, "now": 0, "worker": "w"}
            bound = {**compiled.defaults, **values}
            assert compiled.order is not None
            rows = connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.sql}", tuple(bound[n] for n in compiled.order)
            ).all()
        text = " ".join(str(row[3]) for row in rows)
        assert "ix_headgate_jobs_live_ticks" in text, text


def _plan(connection: Connection, statement: str, parameters: Any) -> str:
    if connection.dialect.name == "postgresql":
        return "\n".join(connection.exec_driver_sql("EXPLAIN " + statement, parameters).scalars())
    rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
    return "\n".join(row[3] for row in rows)


def test_every_statement_of_a_tick_batch_probes_indexes_on_postgresql(
    store: SqlStore, clock: FakeClock
) -> None:
    """Plans as PostgreSQL ran them (auto_explain), for every statement a batch
    of ticks sends, those the driver sends directly (COPY, UPDATE ... FROM)
    included, while the statistics say the tables hold ten rows."""
    if store.backend.name != "postgresql":
        pytest.skip("SQLite has no statistics to lag; its lookups are checked above")
    _store_outgrowing_its_statistics(store)
    with store.engine.connect() as connection:
        due = schedule_reads.due_schedules(connection, clock.now_ms(), COUNT // 2)
    # With a queue limit, so the pending count (backpressure) is read too.
    limits = AdmissionLimits(default_queue_limit=1_000_000)
    processor = TickProcessor(store.log, clock, limits=limits)
    plans = _plans_of(store, lambda: processor.fire(due, fence=None))
    assert any("Update on headgate_schedules" in plan for plan in plans), plans
    assert any("ix_headgate_jobs_queue_state" in plan for plan in plans), plans
    _assert_every_plan_probes(plans)


def test_a_workers_claims_and_ends_probe_indexes(store: SqlStore, clock: FakeClock) -> None:
    """The claim walks the claim index in its order on both backends; on
    PostgreSQL every statement of a worker's turn (the claim, then the ends'
    events, rows and history) probes indexes while the statistics lag."""
    _store_outgrowing_its_statistics(store)
    timeouts = {"k": 60_000}
    if store.backend.name == "sqlite":
        statement = claiming._claim_statement(store.database.dialect, timeouts)
        with store.engine.connect() as connection:
            compiled = statement._compiled_for(connection)
            values = {"queue": "q", "limit": 10, "now": clock.now_ms(), "worker": "w"}
            bound = {**compiled.defaults, **values}
            assert compiled.order is not None
            plan = connection.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.sql}", tuple(bound[n] for n in compiled.order)
            ).all()
        text = " ".join(str(row[3]) for row in plan)
        assert "ix_headgate_jobs_claimable" in text and "TEMP B-TREE" not in text, text
        return

    def a_turn() -> None:
        with store.log.write() as transaction:
            claimed = transaction.claim({"q": 10}, timeouts, "w", clock.now_ms())
        with store.log.write() as transaction:
            transaction.append_units(
                [
                    [
                        StreamAppend(
                            job_stream(row.job_id),
                            row.version,
                            (JobSucceeded(row.job_id, 1, "w", clock.now_ms(), None),),
                        )
                    ]
                    for row in claimed
                ]
            )

    plans = _plans_of(store, a_turn)
    assert any("ix_headgate_jobs_claimable" in plan for plan in plans), plans
    assert any("Insert on headgate_job_attempts" in plan for plan in plans), plans
    _assert_every_plan_probes(plans)


def test_a_claim_under_limits_reads_its_candidates_on_the_claim_index(
    store: SqlStore, clock: FakeClock
) -> None:
    """With a per-partition limit, the claim reads its candidates in claim order
    from the claim index (full partitions left out by bound lists), then claims
    them by id: on both backends, while PostgreSQL's statistics lag."""
    _store_outgrowing_its_statistics(store)
    store.log.append(
        limit_stream(scope_of(None, None, EACH_PARTITION)),
        NO_STREAM,
        [ConcurrencyLimitSet(None, None, EACH_PARTITION, 2)],
    )
    timeouts = {"k": 60_000}
    if store.backend.name == "sqlite":
        dialect = store.database.dialect
        statement = claiming._candidates(dialect, list(timeouts))
        with store.engine.connect() as connection:
            compiled = statement._compiled_for(connection)
            values = {
                "queue": "q",
                "now": clock.now_ms(),
                "window": 28,
                "full_kinds": "[]",
                "full_partitions": '["a"]',
                "keyed_full": False,
                "used_up": "[]",
                "seen": "[]",
            }
            bound = {**compiled.defaults, **values}
            assert compiled.order is not None
            plan = _plan(connection, compiled.sql, tuple(bound[n] for n in compiled.order))
        assert "ix_headgate_jobs_claimable" in plan and "TEMP B-TREE" not in plan, plan
        return

    def a_claim() -> None:
        with store.log.write() as transaction:
            transaction.claim({"q": 10}, timeouts, "w", clock.now_ms())

    plans = _plans_of(store, a_claim)
    assert any("ix_headgate_jobs_claimable" in plan for plan in plans), plans
    updates = [plan for plan in plans if "Update on headgate_jobs" in plan]
    assert updates and all("headgate_jobs_pkey" in plan for plan in updates), updates
    _assert_every_plan_probes(plans)


def _plans_of(store: SqlStore, work: Callable[[], object]) -> list[str]:
    """The plan of every statement `work` runs on new connections of the store's engines."""
    plans: list[str] = []

    def explain_everything(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.add_notice_handler(
            lambda notice: plans.append(notice.message_primary or "")
        )
        dbapi_connection.execute("LOAD 'auto_explain'")
        dbapi_connection.execute("SET auto_explain.log_min_duration = 0")
        dbapi_connection.execute("SET client_min_messages = log")
        dbapi_connection.commit()

    engines = {store.engine, store.database.write_engine}  # the read pool and the writer
    for engine in engines:
        engine.dispose()
        event.listen(engine, "connect", explain_everything)
    try:
        work()
    finally:
        for engine in engines:
            event.remove(engine, "connect", explain_everything)
            engine.dispose()
    return [plan for plan in plans if "plan:" in plan]


def test_compaction_probes_indexes_on_postgresql(store: SqlStore, clock: FakeClock) -> None:
    """Every statement of a compaction that trims attempts, removes finished jobs
    and expires manual keys, on tables grown long after they were analysed."""
    if store.backend.name != "postgresql":
        pytest.skip("SQLite has no statistics to lag; compaction's index is checked above")
    _store_outgrowing_its_statistics(store)
    compact(
        store.database, store.log
    )  # examining the whole log, it may read all of it; the next run may not
    store.log.append_units(
        [
            [StreamAppend(job_stream(f"j{n}"), 1, (JobFinished(f"j{n}", JobState.COMPLETED),))]
            for n in range(0, COUNT, 2)
        ]
        + [
            [
                StreamAppend(
                    manual_run_stream(f"s{n}", "key"),
                    NO_STREAM,
                    (ManualRunRequested(f"s{n}", "key", f"manual-{n}"),),
                )
            ]
            for n in range(0, COUNT, 2)
        ]
    )
    store.log.append_units(
        [
            [StreamAppend(schedule_stream("s0"), version, (attempted("s0", version * 60_000),))]
            for version in range(2, 120)
        ]
    )
    clock.advance(8 * DAY_MS)
    policy = CompactionPolicy(finished_job_retention_ms=DAY_MS)
    plans = _plans_of(store, lambda: compact(store.database, store.log, policy))
    assert any("Delete on headgate_enqueue_history" in plan for plan in plans), plans
    _assert_every_plan_probes(plans)


def test_the_api_reads_and_writes_probe_indexes_on_postgresql(
    store_url: str, clock: FakeClock
) -> None:
    """Each operation of the Python API (the control API and console call the
    same), on tables grown long after they were analysed."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has no statistics to lag")
    hg = Headgate(store_url, clock=clock)
    try:
        _store_outgrowing_its_statistics(hg._core.store)

        def every_operation() -> None:
            hg.schedules.put("s1", spec="@every:1000", kind="report.build")
            hg.schedules.put("new", spec="@every:1000", kind="report.build")
            hg.schedules.get("s2")
            hg.schedules.health("s2")
            hg.schedules.health_of(hg.schedules.list(limit=50).schedules)
            hg.schedules.enqueue_events("s3", limit=30)
            job_id, _ = hg.schedules.enqueue_now("s4", idempotency_key="k-1")
            hg.jobs.get(job_id)
            hg.schedules.manual_runs("s4")
            hg.jobs.list(state="pending", limit=50)
            hg.jobs.list(schedule_id="s5", kind="k")
            hg.schedules.pause("s7")
            hg.schedules.resume("s7")
            finish_job(hg, hg.enqueue(kind="email.send", payload={"to": "x"}).id)
            finish_job(hg, "j5", "failed")
            hg.schedules.delete("s6")

        plans = _plans_of(hg._core.store, every_operation)
    finally:
        hg.close()
    assert any("Update on headgate_jobs" in plan for plan in plans), plans
    _assert_every_plan_probes(plans)


def _assert_every_plan_probes(plans: list[str]) -> None:
    """No plan reads a growing table whole: no sequential scan of one, and no
    hash or merge join (either reads all of one side)."""
    for plan in plans:
        scanned = [t for t in GROWING_TABLES.split(", ") if f"Seq Scan on {t} " in plan]
        assert not scanned and not re.search(r"(Hash|Merge)( \w+)* Join", plan), plan


def test_probing_indexes_gives_the_switches_back_as_the_host_had_them(store: SqlStore) -> None:
    if store.backend.name != "postgresql":
        pytest.skip("the planner switches are PostgreSQL's")
    switches = "SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin'), "
    switches += "current_setting('enable_mergejoin')"
    with store.engine.begin() as connection:
        connection.exec_driver_sql("SET enable_hashjoin = off")
        connection.exec_driver_sql("SET LOCAL enable_mergejoin = off")
        with store.backend.dialect.probing_indexes(connection):
            inside = tuple(connection.exec_driver_sql(switches).one())
            with store.backend.dialect.probing_indexes(connection):
                pass
            still_inside = tuple(connection.exec_driver_sql(switches).one())
        after = tuple(connection.exec_driver_sql(switches).one())
        connection.exec_driver_sql("RESET enable_hashjoin")
    assert inside == still_inside == ("off", "off", "off")
    assert after == ("on", "off", "off")


def test_a_writes_planner_settings_end_with_its_transaction(store: SqlStore) -> None:
    """They are the transaction's own: the writer's session, which a pooler in
    transaction mode may hand to anyone next, keeps the server's settings."""
    if store.backend.name != "postgresql":
        pytest.skip("the planner switches are PostgreSQL's")
    settings = "SELECT current_setting('enable_seqscan'), current_setting('plan_cache_mode')"
    with store.log.write() as transaction:
        inside = transaction.connection.exec_driver_sql(settings).one()
    with store.database.write_engine.connect() as connection:
        after = connection.exec_driver_sql(settings).one()
    assert tuple(inside) == ("off", "auto")
    assert tuple(after) == ("on", "force_custom_plan")


def test_a_rebuild_loads_rows_by_index_probes_on_postgresql(store: SqlStore) -> None:
    """A rebuild folds the log in batches into emptied tables whose statistics
    describe them as they were; each batch loads the rows it touches (500 keys at
    a time), which without index probes read the whole table every time."""
    if store.backend.name != "postgresql":
        pytest.skip("SQLite has no statistics to lag")
    _store_outgrowing_its_statistics(store)
    store.log.append_units(
        [
            [StreamAppend(job_stream(f"j{n}"), 1, (JobFinished(f"j{n}", JobState.COMPLETED),))]
            for n in range(0, COUNT, 2)
        ]
    )
    plans = _plans_of(store, lambda: rebuild(store))
    emptying = re.compile(r"Query Text: DELETE FROM \w+\n")  # a rebuild empties them first
    loads = [plan for plan in plans if "Query Text: SELECT headgate_jobs." in plan]
    assert loads, plans
    _assert_every_plan_probes([plan for plan in plans if not emptying.search(plan)])
