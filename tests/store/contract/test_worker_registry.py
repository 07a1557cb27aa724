"""The worker registry: heartbeats in store time, the rescuer's reads of the dead
and what it forgets, and the workers of one machine's namespaces."""

from __future__ import annotations

from headgate._store.port import ProcessIdentity, Store, WorkerBeat
from headgate.testing import FakeClock


def _beat(
    worker_id: str, running: int = 0, process: ProcessIdentity | None = None, started: int = 1
) -> WorkerBeat:
    return WorkerBeat(worker_id, "host", 1, {"q": 4}, started, running, 0, process)


def test_heartbeats_keep_a_worker_live_until_they_stop(store: Store, clock: FakeClock) -> None:
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    store.workers.beat(_beat("w2"), ttl_ms=1_000)
    clock.advance(600)
    store.workers.beat(_beat("w1", running=2), ttl_ms=1_000)
    clock.advance(600)  # w2 is 1,200 ms past its beat, w1 600
    assert [(w.worker_id, w.running) for w in store.workers.live(clock.now_ms())] == [("w1", 2)]
    with store.log.write() as transaction:
        expired = transaction.expired_workers(transaction.now_ms)
        assert [w.worker_id for w in expired] == ["w2"]
        transaction.forget_workers(expired)
        assert transaction.expired_workers(transaction.now_ms) == []
    store.workers.stop("w1")
    assert store.workers.live(clock.now_ms()) == []


def test_a_worker_that_beat_since_it_was_read_as_expired_is_not_forgotten(
    store: Store, clock: FakeClock
) -> None:
    """The rescuer forgets the rows it read; a worker that renewed meanwhile is alive,
    and its row is what gets its later jobs rescued should it die. (On PostgreSQL
    the renewal can land inside the rescuer's own transaction:
    tests/store/sql/test_interleaved_writes.py.)"""
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    clock.advance(1_200)
    with store.log.write() as transaction:
        expired = transaction.expired_workers(transaction.now_ms)
    assert [w.worker_id for w in expired] == ["w1"]
    store.workers.beat(_beat("w1"), ttl_ms=1_000)
    with store.log.write() as transaction:
        transaction.forget_workers(expired)
    assert [w.worker_id for w in store.workers.live(clock.now_ms())] == ["w1"]


BOOT = "3a5419f7-b5ea-4d8d-a96a-a99bcbb6c25c"


NAMESPACES = "pid:[4026531836] time:[4026531834]"


def test_workers_sharing_a_boot_and_namespaces_are_found_expired_or_not(
    store: Store, clock: FakeClock
) -> None:
    """What a worker needs to check its machine's other workers for death: their
    rows, with the identity each wrote, however stale their heartbeat."""
    here = ProcessIdentity(BOOT, NAMESPACES, 70_147)
    store.workers.beat(_beat("later", process=ProcessIdentity(BOOT, NAMESPACES, 9), started=5), 100)
    store.workers.beat(_beat("here", process=here), ttl_ms=100)
    store.workers.beat(_beat("other-boot", process=ProcessIdentity("b2", NAMESPACES, 1)), 100)
    store.workers.beat(_beat("other-ns", process=ProcessIdentity(BOOT, "pid:[1] time:[2]", 1)), 100)
    store.workers.beat(_beat("old-build"), ttl_ms=100)
    clock.advance(1_000)  # every heartbeat has expired
    store.workers.beat(_beat("here", running=3, process=here), ttl_ms=100)  # renewed
    found = store.workers.in_namespaces(BOOT, NAMESPACES)
    assert [(w.worker_id, w.process) for w in found] == [
        ("here", here),
        ("later", ProcessIdentity(BOOT, NAMESPACES, 9)),
    ]
    assert found[0].running == 3
    assert store.workers.in_namespaces(BOOT, "pid:[4026531836]") == []
    with store.log.write() as transaction:
        expired = {w.worker_id: w.process for w in transaction.expired_workers(transaction.now_ms)}
        assert expired["old-build"] is None and expired["later"] is not None
        transaction.forget_workers([found[0]])  # "here", as read
    assert [w.worker_id for w in store.workers.in_namespaces(BOOT, NAMESPACES)] == ["later"]
    assert store.workers.beat(_beat("again", process=here), ttl_ms=100).process == here
    assert [(w.worker_id, w.process) for w in store.workers.live(clock.now_ms())] == [
        ("again", here)
    ]


def test_a_worker_says_which_kinds_it_runs(store: Store, clock: FakeClock) -> None:
    beat = WorkerBeat("w1", "host", 1, {"q": 4}, 1, 0, 0, kinds=("report.build", "mail.send"))
    assert store.workers.beat(beat, ttl_ms=1_000).kinds == ("mail.send", "report.build")
    store.workers.beat(_beat("w2"), ttl_ms=1_000)
    rows = {row.worker_id: row.kinds for row in store.workers.live(clock.now_ms())}
    assert rows == {"w1": ("mail.send", "report.build"), "w2": None}
