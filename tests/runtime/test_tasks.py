"""Task objects: the function's signature is its jobs' arguments, checked where
the job is enqueued; values beyond JSON reach the function as what was passed,
on every store; a job's result or failure comes back to whoever waits for it."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from time import monotonic
from typing import Any
from zoneinfo import ZoneInfo

import pydantic
import pytest
from structlog.testing import capture_logs

from headgate import (
    ArgumentsRefused,
    DuplicateJob,
    Headgate,
    JobContext,
    JobFailed,
    Retry,
    ValidationError,
)
from headgate.testing import eager
from tests.conftest import AND_MEMORY

WHEN = datetime(2026, 12, 5, 9, 30, tzinfo=ZoneInfo("Europe/Paris"))


class Tier(enum.Enum):
    FREE = "free"
    PRO = "pro"


@dataclasses.dataclass(frozen=True)
class Seat:
    row: int
    price: Decimal


@dataclasses.dataclass(frozen=True)
class Booking:
    id: uuid.UUID
    starts: datetime
    seats: tuple[Seat, ...]
    tier: Tier = Tier.FREE


class Invoice(pydantic.BaseModel):
    number: str
    total: Decimal
    due: date


def _refused(call: Any) -> ValidationError:
    with pytest.raises(ValidationError) as refused:
        call()
    return refused.value


def test_a_wrong_argument_is_refused_where_the_job_is_enqueued() -> None:
    with Headgate("memory://") as hg:

        @hg.task("email.send")
        def send(job: JobContext, to: str, when: datetime, *, cc: str = "") -> None:
            """Never runs here."""

        assert _refused(lambda: send.enqueue("ada@example.com")).field == "when"  # type: ignore[call-arg]
        unknown = _refused(lambda: send.enqueue("a", WHEN, c="b"))  # type: ignore[call-arg]
        assert unknown.field == "c" and "did you mean cc?" in unknown.rule
        assert _refused(lambda: send.enqueue("a", WHEN, "b")).field == "args"  # type: ignore[call-arg]
        assert _refused(lambda: send.enqueue("a", WHEN, to="b")).field == "to"  # type: ignore[call-arg]
        assert _refused(lambda: send.enqueue("a", WHEN, job=None)).field == "job"  # type: ignore[call-arg]
        naive = _refused(lambda: send.enqueue("a", datetime(2026, 1, 1)))
        assert naive.field == "when" and "aware" in naive.rule
        assert sum(hg.jobs.count().values()) == 0


def test_a_value_it_cannot_encode_is_refused_by_its_path() -> None:
    with Headgate("memory://") as hg:

        @hg.task("book")
        def book(booking: Booking, notes: list[Any]) -> None:
            """Never runs here."""

        seat = Seat(1, Decimal("9.50"))
        bad_field = Booking(uuid.uuid4(), WHEN, (seat, Seat(2, object())))  # type: ignore[arg-type]
        assert _refused(lambda: book.enqueue(bad_field, [])).field == "booking.seats[1].price"
        assert _refused(lambda: book.enqueue(Booking(uuid.uuid4(), WHEN, ()), [1, {2}])).field == (
            "notes[1]"
        )
        assert _refused(lambda: book.enqueue(Booking(uuid.uuid4(), WHEN, ()), [b"x"])).rule == (
            "Headgate cannot encode a bytes: it takes JSON values, aware datetimes, dates, "
            "times, UUIDs, Decimals, Enums, dataclasses and pydantic models"
        )
        assert sum(hg.jobs.count().values()) == 0


@AND_MEMORY
def test_rich_arguments_reach_the_function_as_they_were_passed(store_url: str) -> None:
    received: list[dict[str, Any]] = []
    with Headgate(store_url) as hg:

        @hg.task("rich")
        def rich(
            *,
            when: datetime,
            day: date,
            at: time,
            key: uuid.UUID,
            amount: Decimal,
            tier: Tier,
            booking: Booking,
            invoice: Invoice,
            pair: tuple[int, str],
            tagged: dict[str, Any],
            maybe: Tier | None = None,
        ) -> Booking:
            received.append(
                {
                    "when": when,
                    "day": day,
                    "at": at,
                    "key": key,
                    "amount": amount,
                    "tier": tier,
                    "booking": booking,
                    "invoice": invoice,
                    "pair": pair,
                    "tagged": tagged,
                    "maybe": maybe,
                }
            )
            return booking

        booking = Booking(uuid.uuid4(), WHEN, (Seat(3, Decimal("12.50")),), Tier.PRO)
        sent: dict[str, Any] = {
            "when": WHEN,
            "day": date(2026, 12, 5),
            "at": time(9, 30, tzinfo=UTC),
            "key": uuid.uuid4(),
            "amount": Decimal("0.10"),
            "tier": Tier.PRO,
            "booking": booking,
            "invoice": Invoice(number="F-7", total=Decimal("99.90"), due=date(2027, 1, 5)),
            "pair": (1, "one"),
            "tagged": {"$type": "not a tag", "n": 1},
            "maybe": None,
        }
        job = rich.enqueue(**sent)
        assert job.job.payload["when"] == {
            "$type": "datetime",
            "v": "2026-12-05T09:30:00+01:00",
            "tz": "Europe/Paris",
        }  # readable as it is stored, in the console and the API
        hg.drain()
        assert job.wait(timeout=5) == booking
    (got,) = received
    assert got == sent
    assert {name: type(value) for name, value in got.items()} == {
        name: type(value) for name, value in sent.items()
    }
    assert got["when"].tzinfo == ZoneInfo("Europe/Paris")
    assert type(got["booking"].seats[0].price) is Decimal


@AND_MEMORY
def test_a_job_enqueued_by_kind_as_json_runs_its_task(store_url: str) -> None:
    """What another language sends over HTTP: the arguments by name, tagged."""
    received: list[tuple[str, datetime]] = []
    with Headgate(store_url) as hg:

        @hg.task("email.send")
        def send(to: str, when: datetime) -> None:
            received.append((to, when))

        hg.enqueue(
            "email.send",
            {"to": "ada@example.com", "when": {"$type": "datetime", "v": "2026-12-05T08:30:00Z"}},
        )
        missing = _refused(lambda: hg.enqueue("email.send", {"to": "ada@example.com"}))
        assert (missing.field, missing.rule) == ("when", "is required by send(to, when)")
        assert _refused(lambda: hg.enqueue("email.send", ["ada"])).field == "payload"
        bad_time = {"to": "x", "when": {"$type": "datetime", "v": "noon"}}
        assert _refused(lambda: hg.enqueue("email.send", bad_time)).field == "when"
        hg.drain()
    assert received == [("ada@example.com", datetime(2026, 12, 5, 8, 30, tzinfo=UTC))]


def test_an_argument_of_another_kind_is_refused_at_enqueue_by_its_path() -> None:
    """Over HTTP or by kind, a value of another kind than the signature says is
    the caller's error when it is sent, not a job failing in a worker later."""
    with Headgate("memory://") as hg:

        @hg.task("invoice.send")
        def send(invoice_id: int, lines: list[float], note: str | None = None) -> None:
            """Never runs here."""

        cases = {
            "invoice_id: must be int, got str": {"invoice_id": "7", "lines": []},
            "invoice_id: must be int, got bool": {"invoice_id": True, "lines": []},
            "lines[1]: must be float, got str": {"invoice_id": 7, "lines": [1.5, "2"]},
            "lines: must be list, got dict": {"invoice_id": 7, "lines": {"a": 1}},
            "note: must be str or NoneType, got int": {"invoice_id": 7, "lines": [], "note": 3},
        }
        for said, payload in cases.items():
            refused = _refused(lambda payload=payload: hg.enqueue("invoice.send", payload))
            assert f"{refused.field}: {refused.rule}" == said
        hg.enqueue("invoice.send", {"invoice_id": 7, "lines": [1, 2.5], "note": None})
        summary = hg.drain()
        assert (summary.ran, summary.succeeded) == (1, 1), "only the fitting call was written"


def test_a_client_without_the_tags_may_send_iso_text_for_a_datetime(store_url: str) -> None:
    """Another language sends a datetime, a UUID or a Decimal as its usual text;
    the function gets the value its signature names, and bad text is refused."""
    received: list[tuple[datetime, uuid.UUID, Decimal]] = []
    with Headgate(store_url) as hg:

        @hg.task("charge")
        def charge(at: datetime, order: uuid.UUID, amount: Decimal) -> None:
            received.append((at, order, amount))

        order = "0b6c5b6e-6f5c-4a55-9a57-2d6f1c7e9a10"
        hg.enqueue("charge", {"at": "2026-12-05T08:30:00+00:00", "order": order, "amount": "9.50"})
        naive = _refused(lambda: hg.enqueue("charge", {"at": "2026-12-05T08:30", "order": order}))
        assert naive.field == "at" and "aware" in naive.rule
        bad = _refused(lambda: hg.enqueue("charge", {"at": "noon", "order": order, "amount": 1}))
        assert bad.field == "at" and "not a datetime" in bad.rule
        hg.drain()
    assert received == [
        (datetime(2026, 12, 5, 8, 30, tzinfo=UTC), uuid.UUID(order), Decimal("9.50"))
    ]


def test_a_job_whose_payload_no_longer_fits_fails_without_retries() -> None:
    """A job written before its task's signature changed: its arguments are refused
    when it runs, once (the same payload would fail every time)."""
    with Headgate("memory://") as hg:
        job = hg.enqueue("resize", {"width": 10}, max_attempts=5)  # before the task was

        @hg.task("resize", max_attempts=5)
        def resize(width: int, height: int) -> None:
            """Never runs: its job lacks `height`."""

        hg.drain()
        done = hg.jobs.get(job.id)
        assert (done.state, done.attempts) == ("failed", 1)
        assert done.attempt_history[0].error_type == "headgate.ArgumentsRefused"
        assert "height: is required" in str(done.attempt_history[0].error_message)
        with pytest.raises(ArgumentsRefused):
            resize.call(FakeContext(payload={"width": 1}))


def test_the_job_context_is_given_where_the_signature_asks_for_it() -> None:
    seen: list[tuple[int, str, int]] = []
    with Headgate("memory://") as hg:

        @hg.task("count", max_attempts=2, retry=Retry(intervals_s=[0]))
        def count(job: JobContext, n: int) -> int:
            seen.append((job.attempt, job.kind, n))
            if job.attempt == 1:
                raise RuntimeError("once")
            return n + 1

        handle = count.enqueue(41)
        hg.drain()
        assert handle.wait(timeout=5) == 42
        assert count(FakeContext(), 1) == 2  # still the plain function
    assert seen[:2] == [(1, "count", 41), (2, "count", 41)]


def FakeContext(payload: Any = None) -> JobContext:  # noqa: N802 (reads as the type it makes)
    return JobContext("id", "count", "default", payload, 2, 2, 0, None, 0)


def test_configure_gives_the_jobs_enqueue_options_and_leaves_the_task_as_it_was() -> None:
    with Headgate("memory://") as hg:

        @hg.task("report", queue="reports")
        def report(month: str) -> None:
            """Never runs here."""

        urgent = report.configure(priority=7, unique_key="report-2026-11")
        first = urgent.enqueue("2026-11").job
        assert (first.queue, first.priority, first.unique_key) == ("reports", 7, "report-2026-11")
        with pytest.raises(DuplicateJob):
            urgent.enqueue("2026-11")
        plain = report.enqueue("2026-12").job
        assert (plain.priority, plain.unique_key) == (0, None)
        assert _refused(lambda: report.configure(prority=1)).field == "prority"  # type: ignore[call-arg]
        later = report.configure(run_at_ms=hg.clock.now_ms() + 60_000, queue="slow").enqueue("x")
        assert (later.job.queue, later.job.state) == ("slow", "pending")


def test_enqueue_many_checks_every_call_before_writing_any() -> None:
    with Headgate("memory://") as hg:

        @hg.task("ping")
        def ping(host: str, at: datetime) -> str:
            return host

        refused = _refused(lambda: ping.enqueue_many([("a", WHEN), {"host": "b"}]))
        assert refused.field == "jobs[1].at"
        assert sum(hg.jobs.count().values()) == 0
        handles = ping.configure(priority=3).enqueue_many([("a", WHEN), {"host": "b", "at": WHEN}])
        assert [handle.job.priority for handle in handles] == [3, 3]
        hg.drain()
        assert [handle.wait(timeout=5) for handle in handles] == ["a", "b"]


def test_waiting_for_a_failed_job_raises_its_error_and_traceback() -> None:
    class PaymentDeclined(Exception):
        """The host's own error."""

    with Headgate("memory://") as hg:

        @hg.task("charge", max_attempts=1)
        def charge(amount: Decimal) -> None:
            raise PaymentDeclined(f"declined {amount}")

        handle = charge.enqueue(Decimal("5"))
        with pytest.raises(TimeoutError):
            handle.wait(timeout=0.05)
        hg.drain()
        with pytest.raises(JobFailed) as failed:
            handle.wait(timeout=5)
    error = failed.value
    assert (error.job_id, error.state) == (handle.id, "failed")
    assert error.error_type is not None and error.error_type.endswith("PaymentDeclined")
    assert error.error_message == "declined 5"
    assert error.traceback is not None and 'raise PaymentDeclined(f"declined {amount}")' in (
        error.traceback
    )


def test_a_cancelled_job_is_a_failure_to_whoever_waits() -> None:
    with Headgate("memory://") as hg:

        @hg.task("slow")
        def slow() -> None:
            """Never runs: cancelled first."""

        handle = slow.enqueue()
        hg.jobs.cancel(handle.id)
        with pytest.raises(JobFailed) as failed:
            handle.wait(timeout=5)
    assert (failed.value.state, failed.value.error_type) == ("cancelled", None)


@AND_MEMORY
@pytest.mark.parametrize("bulk", [False, True], ids=["one", "bulk"])
def test_a_cancel_of_a_pending_job_wakes_its_waiter_at_once(store_url: str, bulk: bool) -> None:
    """Not at the wait's one-second re-read: the cancel announces the end."""
    with Headgate(store_url) as hg:

        @hg.task("later")
        def later() -> None:
            """Never runs: no worker here, and it is cancelled."""

        handle = later.enqueue()
        cancel = threading.Timer(
            0.1,
            (lambda: hg.jobs.cancel_many(state="pending", kind="later"))
            if bulk
            else (lambda: hg.jobs.cancel(handle.id)),
        )
        started = monotonic()
        cancel.start()
        with pytest.raises(JobFailed):
            handle.wait(timeout=10)
        assert monotonic() - started < 0.6
        cancel.join()


@AND_MEMORY
def test_a_waiter_is_woken_by_the_end_of_the_job(store_url: str) -> None:
    """A running worker's end wakes the waiter at once: not its one-second re-read."""
    with Headgate(store_url) as hg:

        @hg.task("double")
        async def double(n: int) -> int:
            await asyncio.sleep(0.2)
            return n * 2

        hg.start(scheduler=False)
        handle = double.enqueue(21)
        assert asyncio.run(handle.await_result(timeout=10)) == 42
        handle = double.enqueue(1)
        assert handle.wait(timeout=10) == 2
        done = hg.jobs.get(handle.id)
        assert done.state == "completed"


@AND_MEMORY
def test_eager_mode_runs_retries_and_records_attempts_as_a_worker(store_url: str) -> None:
    calls: list[int] = []
    with Headgate(store_url, eager=True) as hg:

        @hg.task("flaky", max_attempts=3)
        def flaky(n: int) -> int:
            calls.append(n)
            if len(calls) < 3:
                raise ConnectionError(f"try {len(calls)}")
            return n * 2

        @hg.task("hopeless", max_attempts=2, retry=Retry(fail_on=KeyError))
        def hopeless() -> None:
            raise KeyError("never retried")

        handle = flaky.enqueue(21)
        assert handle.job.state == "completed"  # ran before enqueue returned
        assert handle.wait(timeout=0) == 42
        job = hg.jobs.get(handle.id)
        assert [a.outcome for a in job.attempt_history] == ["succeeded", "failed", "failed"]
        assert [a.error_message for a in job.attempt_history] == [None, "try 2", "try 1"]
        assert all(a.worker_id for a in job.attempt_history)
        gave_up = hopeless.enqueue()
        assert (gave_up.job.state, gave_up.job.attempts) == ("failed", 1)
        later = flaky.configure(run_at_ms=hg.clock.now_ms() + 3_600_000).enqueue(1)
        assert later.job.state == "pending"  # due later: waits, as for a worker


def test_the_testing_helper_is_eager_for_a_block_only() -> None:
    with Headgate("memory://") as hg:

        @hg.task("add")
        def add(a: int, b: int) -> int:
            return a + b

        with eager(hg):
            inside = add.enqueue(1, 2)
            by_kind = hg.enqueue("add", {"a": 2, "b": 2})
        outside = add.enqueue(3, 4)
        assert (inside.job.state, by_kind.state, outside.job.state) == (
            "completed",
            "completed",
            "pending",
        )
        assert inside.wait(timeout=0) == 3


def test_an_eager_task_that_enqueues_runs_what_it_enqueued_inside_its_attempt() -> None:
    order: list[str] = []
    with Headgate("memory://", eager=True) as hg:

        @hg.task("child")
        def child(name: str) -> None:
            order.append(f"child {name}")

        @hg.task("parent")
        def parent() -> None:
            order.append("parent starts")
            child.enqueue("a")
            order.append("parent ends")

        parent.enqueue()
    assert order == ["parent starts", "child a", "parent ends"]


def test_a_kind_no_handler_declares_is_written_with_a_warning_naming_the_closest() -> None:
    with Headgate("memory://") as hg:

        @hg.task("email.send")
        def send(to: str) -> None:
            """Declared at start, never run."""

        hg.start(workers=False, scheduler=False)
        hg.stop()
        with capture_logs() as logs:
            first = hg.enqueue("email.sned")
            hg.enqueue("email.sned")
        warned = [e for e in logs if e["event"] == "job enqueued of a kind no handler declares"]
        assert [e["closest"] for e in warned] == ["email.send"]  # once per kind
        assert hg.jobs.get(first.id).state == "pending"


def test_nothing_is_checked_while_no_handler_is_declared() -> None:
    with Headgate("memory://", undeclared_kinds="refuse") as hg:
        assert hg.enqueue("anything.goes").kind == "anything.goes"


def test_a_strict_headgate_refuses_an_undeclared_kind(store_url: str) -> None:
    with Headgate(store_url) as declaring:

        @declaring.task("email.send")
        def send(to: str) -> None:
            """Declared at start, never run."""

        declaring.start(workers=False, scheduler=False)
        declaring.stop()
    with Headgate(store_url, undeclared_kinds="refuse") as strict:
        refused = _refused(lambda: strict.enqueue("email.sned", {"to": "x"}))
        assert refused.field == "kind" and "did you mean email.send?" in refused.rule
        assert strict.enqueue("email.send", {"to": "x"}).kind == "email.send"
    with pytest.raises(ValidationError, match="undeclared_kinds"):
        Headgate("memory://", undeclared_kinds="strict")  # type: ignore[arg-type]


@pytest.mark.processes
def test_a_process_task_runs_in_its_child() -> None:
    """`executor="process"` pickles the task by name: its child imports it."""
    with Headgate("memory://") as hg:
        registered = hg.task("tasks.square", executor="process")(square)
        handle = registered.enqueue(7)
        hg.drain()
        assert handle.wait(timeout=5) == 49


def square(n: int) -> int:
    return n * n


def test_a_date_in_a_different_zone_is_the_same_instant() -> None:
    with Headgate("memory://", eager=True) as hg:

        @hg.task("echo")
        def echo(when: datetime) -> datetime:
            return when + timedelta(hours=1)

        assert echo.enqueue(WHEN).wait(timeout=0) == WHEN + timedelta(hours=1)


@dataclasses.dataclass
class Node:
    name: str
    child: Node | None = None


def test_a_value_that_contains_itself_is_refused_by_its_path() -> None:
    """A cycle or a nesting too deep is the caller's error, named, not a RecursionError."""
    with Headgate("memory://") as hg:

        @hg.task("tree")
        def tree(node: Node, notes: Any = None) -> None:
            """Never runs here."""

        loop = Node("a")
        loop.child = loop
        refused = _refused(lambda: tree.enqueue(loop))
        assert refused.field.startswith("node.child.child")
        assert "nests deeper than" in refused.rule
        itself: list[Any] = []
        itself.append(itself)
        assert _refused(lambda: tree.enqueue(Node("b"), itself)).field.startswith("notes[0][0]")
        deep: Any = None
        for _ in range(5000):
            deep = {"in": deep}
        by_kind = _refused(lambda: hg.enqueue("tree", {"node": {"name": "c"}, "notes": deep}))
        assert by_kind.field.startswith("notes.in.in") and "nests deeper than" in by_kind.rule
        assert sum(hg.jobs.count().values()) == 0


def test_a_naive_datetime_given_as_json_is_refused_as_one_given_in_python() -> None:
    """Another language's payload follows the Python caller's rule: a datetime is aware."""
    with Headgate("memory://") as hg:
        naive = {"when": {"$type": "datetime", "v": "2026-12-05T09:30:00"}}
        job = hg.enqueue("remind", naive)  # before the task was: nothing to check it by

        @hg.task("remind")
        def remind(when: datetime) -> None:
            """Never runs here."""

        refused = _refused(lambda: hg.enqueue("remind", naive))
        assert refused.field == "when" and "aware" in refused.rule
        hg.drain()
        attempt = hg.jobs.get(job.id).attempt_history[0]
        assert attempt.error_type == "headgate.ArgumentsRefused"
        assert "aware" in str(attempt.error_message)


@pytest.mark.parametrize("timeout", [float("nan"), -1, "1", True])
def test_a_wait_refuses_a_timeout_that_is_not_seconds(timeout: Any) -> None:
    """A NaN timeout waited for ever, a string raised a TypeError from inside."""
    with Headgate("memory://") as hg:

        @hg.task("later")
        def later() -> None:
            """Never runs: no worker."""

        handle = later.enqueue()
        refused = _refused(lambda: handle.wait(timeout=timeout))
        assert refused.field == "timeout" and "seconds" in refused.rule
        refused = _refused(lambda: asyncio.run(handle.await_result(timeout=timeout)))
        assert refused.field == "timeout"


def test_an_eager_async_task_enqueued_inside_an_event_loop_runs() -> None:
    """A sync enqueue (or drain) in a coroutine: the task runs on a loop of its own
    rather than failing on the caller's and leaving its job running for ever."""
    with Headgate("memory://", eager=True) as hg:

        @hg.task("double")
        async def double(n: int) -> int:
            await asyncio.sleep(0)
            return n * 2

        async def caller() -> tuple[int, str]:
            handle = double.enqueue(21)
            return handle.wait(timeout=0), handle.refresh().state

        assert asyncio.run(caller()) == (42, "completed")
    with Headgate("memory://") as hg:
        hg.handler("ping")(_async_ping)
        job = hg.enqueue("ping", {})

        async def drains() -> int:
            return hg.drain().succeeded

        assert asyncio.run(drains()) == 1
        assert hg.jobs.get(job.id).state == "completed"


async def _async_ping(job: JobContext) -> None:
    await asyncio.sleep(0)


class Leaf(pydantic.BaseModel):
    weight: float
    parent: Leaf | None = None
    extra: object = None


def test_a_pydantic_model_that_cannot_be_stored_is_refused_by_its_path() -> None:
    """Its own dump's errors (a cycle, a value pydantic cannot serialize) and a NaN
    in it are the caller's, named: not a pydantic exception from inside."""
    with Headgate("memory://") as hg:

        @hg.task("grow")
        def grow(leaf: Leaf) -> None:
            """Never runs here."""

        cycle = Leaf(weight=1)
        cycle.parent = cycle
        refused = _refused(lambda: grow.enqueue(cycle))
        assert refused.field == "leaf" and "cannot dump the Leaf model" in refused.rule
        assert _refused(lambda: grow.enqueue(Leaf(weight=1, extra=object()))).field == "leaf"
        nan = _refused(lambda: grow.enqueue(Leaf(weight=1, parent=Leaf(weight=float("nan")))))
        assert (nan.field, nan.rule) == ("leaf.parent.weight", "must be a finite number, got nan")
        assert sum(hg.jobs.count().values()) == 0
