"""enqueue_many from Python, with a fake clock, on every store: checked whole
before anything is written, written in chunks through the admission gate."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headgate import (
    AdmissionRejected,
    DuplicateJob,
    Headgate,
    JobContext,
    RuntimeConfig,
    ValidationError,
)
from headgate._domain.admission import AdmissionLimits
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY

pytestmark = AND_MEMORY


def test_many_jobs_are_enqueued_in_order_with_their_handlers_defaults(hg: Headgate) -> None:
    ran: list[int] = []

    @hg.handler("import.row", queue="imports", priority=3)
    def import_row(job: JobContext) -> None:
        assert isinstance(job.payload, dict)
        ran.append(int(str(job.payload["row"])))

    jobs = hg.enqueue_many(
        [{"kind": "import.row", "payload": {"row": n}} for n in range(1_200)]
        + [{"kind": "import.row", "payload": {"row": -1}, "priority": 9, "unique_key": "last"}]
    )
    assert len(jobs) == 1_201
    assert {(job.queue, job.priority) for job in jobs[:-1]} == {("imports", 3)}
    assert (jobs[-1].priority, jobs[-1].unique_key) == (9, "last")
    assert len({job.id for job in jobs}) == 1_201
    assert hg.drain().succeeded == 1_201
    assert ran[0] == -1, "the higher priority first"
    assert ran[1:] == list(range(1_200)), "then in the order given"


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"kind": "k"}, {"payload": 1}], "jobs[1].kind"),
        ([{"kind": "k", "priority": "high"}], "jobs[0].priority"),
        ([{"kind": "k", "colour": "red"}], "jobs[0].colour"),
        ([{"kind": "k"}, "k"], "jobs[1]"),
        ([{"kind": "k", "payload": {1, 2}}], "jobs[0].payload"),
        (
            [{"kind": "k", "unique_key": "a"}, {"kind": "k", "unique_key": "a"}],
            "jobs[1].unique_key",
        ),
        ([{"kind": "k", "timeout_s": 1, "timeout_ms": 5}], "jobs[0].timeout_s"),
    ],
)
def test_a_bad_item_is_named_and_nothing_is_written(
    hg: Headgate, items: list[object], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        hg.enqueue_many([{"kind": "fine"}, *items])  # type: ignore[list-item]
    assert raised.value.field == _shifted(field)
    assert hg.jobs.list().jobs == []


def _shifted(field: str) -> str:
    """The field's name once a good item is put before the others."""
    index = int(field.split("[")[1].split("]", maxsplit=1)[0])
    return field.replace(f"jobs[{index}]", f"jobs[{index + 1}]", 1)


def test_a_refused_job_fails_its_chunk_and_says_which(hg: Headgate) -> None:
    held = hg.enqueue("k", unique_key="taken")
    with pytest.raises(DuplicateJob) as raised:
        hg.enqueue_many([{"kind": "k"}, {"kind": "k", "unique_key": "taken"}])
    assert raised.value.job_id == held.id
    assert any("enqueue_many: refused job" in note for note in raised.value.__notes__)
    assert [job.id for job in hg.jobs.list().jobs] == [held.id], "the chunk wrote nothing"


def test_a_chunk_written_before_a_refusal_stays_and_the_note_says_so(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.enqueue("k", unique_key="taken")
    items: list[dict[str, object]] = [{"kind": "k"} for _ in range(500)]
    items.append({"kind": "k", "unique_key": "taken"})
    with pytest.raises(DuplicateJob) as raised:
        hg.enqueue_many(items)
    assert any("jobs[0:500] of 501 were enqueued" in note for note in raised.value.__notes__)
    hg.handler("k")(lambda job: None)
    assert hg.drain().succeeded == 501, "the first 500 and the key's holder"


def test_a_full_queue_refuses_what_does_not_fit(
    make_headgate: Callable[..., Headgate],
) -> None:
    config = RuntimeConfig(lease_ttl_ms=60_000, limits=AdmissionLimits(queue_limits={"default": 3}))
    hg = make_headgate(config)
    with pytest.raises(AdmissionRejected) as raised:
        hg.enqueue_many([{"kind": "k"} for _ in range(4)])
    assert raised.value.reason == "backpressure"
    assert hg.jobs.list().jobs == []
    assert len(hg.enqueue_many([{"kind": "k"} for _ in range(3)])) == 3
