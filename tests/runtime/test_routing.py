"""Enqueue routes a kind it has no handler for by its handler's declaration,
as the store keeps it, never by which workers are alive (a store shared by
Headgates as processes share it: SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from headgate import (
    DeclaredHandler,
    Headgate,
    JobOptions,
    RuntimeConfig,
    ValidationError,
    WorkerConfig,
)
from headgate._operator import operator_of
from headgate._routing import REFRESH_MS
from headgate.testing import FakeClock


def _declaring(
    make_headgate: Callable[..., Headgate], kind: str, group: str = "default", **options: Any
) -> Headgate:
    """A process whose code has a handler of `kind`: started (which records it)
    and stopped again, so no worker of it is alive."""
    other = make_headgate(RuntimeConfig(lease_ttl_ms=60_000, declarations_group=group))
    other.handler(kind, **options)(lambda job: None)
    other.start(workers=False, scheduler=False)
    other.stop()
    return other


def test_a_job_goes_to_its_handlers_queue_while_no_worker_is_alive(
    hg: Headgate, make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    _declaring(make_headgate, "pdf.render", queue="pdf", priority=7, start_within_ms=60_000)
    assert hg.runtime.workers() == []
    job = hg.enqueue("pdf.render", {"doc": 1})
    assert (job.queue, job.priority, job.start_within_ms) == ("pdf", 7, 60_000)
    assert [j.queue for j in hg.enqueue_many([{"kind": "pdf.render"}] * 2)] == ["pdf", "pdf"]
    with pytest.raises(ValidationError, match="payload"):
        operator_of(hg).check_job("pdf.render", {"big": "x" * 10_000_000}, JobOptions())
    named = hg.enqueue("pdf.render", queue="default")
    assert (named.queue, named.priority) == ("default", 7), "as its handler here would give"
    assert hg.enqueue("mail.send").queue == "default", "a kind nobody declared: as before"


def test_a_worker_serving_other_queues_too_does_not_make_its_kinds_ambiguous(
    hg: Headgate, make_headgate: Callable[..., Headgate]
) -> None:
    """Workers claim a kind on every queue they serve: routing by them refused a
    kind whose worker also served `default` ("name the queue")."""
    worker = make_headgate()
    worker.handler("pdf.render", queue="pdf")(lambda job: None)
    worker.start(WorkerConfig(queues={"pdf": 1, "default": 1}), scheduler=False)
    deadline = time.monotonic() + 10
    while not worker.runtime.workers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.runtime.workers(), "the worker never beat"
    assert hg.enqueue("pdf.render").queue == "pdf"


def test_groups_that_declare_a_kind_on_different_queues_are_named_in_the_refusal(
    hg: Headgate, make_headgate: Callable[..., Headgate]
) -> None:
    _declaring(make_headgate, "pdf.render", "web", queue="pdf", priority=1)
    _declaring(make_headgate, "pdf.render", "batch", queue="pdf-batch", priority=9)
    with pytest.raises(ValidationError) as raised:
        hg.enqueue("pdf.render")
    assert raised.value.field == "queue"
    assert "'pdf.render'" in raised.value.rule
    assert "pdf (group web), pdf-batch (group batch)" in raised.value.rule
    assert "name the queue" in raised.value.rule
    with pytest.raises(ValidationError) as raised:
        hg.enqueue_many([{"kind": "pdf.render"}])
    assert raised.value.field == "jobs[0].queue"
    named = hg.enqueue("pdf.render", queue="pdf-batch")
    assert (named.queue, named.priority) == ("pdf-batch", 9), "that queue's declaration"


def test_a_groups_newest_start_replaces_its_declaration(
    hg: Headgate, make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """A deploy that moves a handler to another queue routes its jobs there from
    its first start on (after a producer's read of them expires)."""
    _declaring(make_headgate, "pdf.render", queue="pdf")
    assert hg.enqueue("pdf.render").queue == "pdf"
    clock.advance(1_000)
    _declaring(make_headgate, "pdf.render", queue="render")
    clock.advance(REFRESH_MS)
    assert hg.enqueue("pdf.render").queue == "render"
    [shown] = hg.runtime.declared_handlers()
    assert shown == DeclaredHandler(
        "pdf.render",
        "render",
        0,
        None,
        None,
        None,
        "default",
        shown.host,
        clock.now_ms() - REFRESH_MS,
    )
    assert shown.host.endswith(f":{os.getpid()}")
