"""Admission facts: what the gate decides on (existing jobs, live unique keys,
quarantine, pending counts), crash blame, and the quarantine's listing."""

from __future__ import annotations

import pytest

from headgate._domain.decisions import Candidate, GateFacts
from headgate._domain.events import (
    FingerprintBlameCleared,
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    FingerprintReleased,
    JobEnqueued,
    JobFinished,
    JobState,
)
from headgate._errors import ValidationError
from headgate._store.port import ANY_VERSION, NO_STREAM, Store
from headgate.testing import FakeClock
from tests.store.builders import enqueued


def _job(job_id: str, unique_key: str | None = None, queue: str = "q") -> JobEnqueued:
    return enqueued(job_id, "k", queue, {"n": 1}, unique_key)


def _candidate(job_id: str, unique_key: str | None = None, fingerprint: str = "fp") -> Candidate:
    return Candidate(enqueued(job_id, "k", "q1", {}, unique_key), fingerprint, 2)


def _gate_facts(store: Store, candidates: list[Candidate], queues: list[str]) -> GateFacts:
    with store.log.write() as transaction:
        return transaction.gate_facts(candidates, queues)


def test_gate_facts_answer_for_every_candidate_in_bulk(store: Store) -> None:
    store.log.append("job-held", NO_STREAM, [_job("held", unique_key="key-1")])
    store.log.append("job-done", NO_STREAM, [_job("done", unique_key="key-2")])
    store.log.append("job-done", 1, [JobFinished("done", JobState.COMPLETED)])
    store.log.append("job-other", NO_STREAM, [_job("other", queue="busy")])
    store.log.append("quarantine-bad", NO_STREAM, [FingerprintQuarantined("bad", "poison")])
    candidates = [
        Candidate(_job("held", unique_key="key-1"), "fine", 7),  # the same job, again
        Candidate(_job("new-1", unique_key="key-1"), "fine", 7),  # its key is held
        Candidate(_job("new-2", unique_key="key-2"), "bad", 7),  # key free, quarantined
    ]
    with store.log.write() as transaction:
        facts = transaction.gate_facts(candidates, ["busy", "idle"])
    assert facts.existing_jobs == {"held": _job("held", unique_key="key-1")}
    assert facts.unique_key_holders == {"key-1": "held"}
    assert facts.quarantined == frozenset({"bad"})
    assert facts.pending == {"busy": 1, "idle": 0}


def test_gate_facts_of_nothing_are_empty(store: Store) -> None:
    with store.log.write() as transaction:
        facts = transaction.gate_facts([], [])
    assert (facts.existing_jobs, facts.unique_key_holders, facts.quarantined, facts.pending) == (
        {},
        {},
        frozenset(),
        {},
    )


def test_pending_counts_and_live_unique_keys(store: Store) -> None:
    store.log.append("job-a", NO_STREAM, [enqueued("a", "k", "q1", {}, "key-1")])
    store.log.append("job-b", NO_STREAM, [enqueued("b", "k", "q1", {}, "key-2")])
    store.log.append("job-b", 1, [JobFinished("b", JobState.COMPLETED)])
    facts = _gate_facts(store, [_candidate("c1", "key-1"), _candidate("c2", "key-2")], ["q1", "q2"])
    assert facts.pending == {"q1": 1, "q2": 0}
    assert facts.unique_key_holders == {"key-1": "a"}


def test_crash_blame_carries_the_total_and_a_release_forgets_it(store: Store) -> None:
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "a", 500)])
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "b", 1_500)])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp", "other"]) == {"fp": 1_500, "other": 0}
        assert transaction.quarantined(["fp"]) == frozenset()
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintQuarantined("fp", "crash limit")])
    with store.log.write() as transaction:
        assert transaction.quarantined(["fp", "other"]) == frozenset({"fp"})
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintReleased("fp")])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 0}
        assert transaction.quarantined(["fp"]) == frozenset()


def test_a_completed_job_clears_its_fingerprints_blame(store: Store) -> None:
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "a", 2_000)])
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintBlameCleared("fp", "b")])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 0}
    store.log.append("quarantine-fp", ANY_VERSION, [FingerprintCrashBlamed("fp", "c", 500)])
    with store.log.write() as transaction:
        assert transaction.crash_blame(["fp"]) == {"fp": 500}


def test_quarantine_projection(store: Store) -> None:
    store.log.append("quarantine-f1", NO_STREAM, [FingerprintQuarantined("f1", "poison")])
    store.log.append("quarantine-f2", NO_STREAM, [FingerprintQuarantined("f2")])
    store.log.append("quarantine-f2", 1, [FingerprintReleased("f2")])
    candidates = [_candidate(f"c{n}", fingerprint=f"f{n}") for n in (1, 2, 3)]
    assert _gate_facts(store, candidates, []).quarantined == {"f1"}
    assert store.reads.quarantined_count() == 1


def test_quarantine_lists_newest_first_with_why_and_when_in_pages(
    store: Store, clock: FakeClock
) -> None:
    for fingerprint, note in (("fp-a", "crash limit: job a"), ("fp-b", ""), ("fp-c", "by hand")):
        store.log.append(
            f"q-{fingerprint}", ANY_VERSION, [FingerprintQuarantined(fingerprint, note)]
        )
        clock.advance(1_000)
    store.log.append("q-fp-b", ANY_VERSION, [FingerprintReleased("fp-b")])

    first = store.reads.quarantine_page(1, None)
    assert [(row.fingerprint, row.note) for row in first.items] == [("fp-c", "by hand")]
    assert first.next_cursor is not None
    rest = store.reads.quarantine_page(10, first.next_cursor)
    assert [row.fingerprint for row in rest.items] == ["fp-a"]
    assert rest.next_cursor is None
    entry = store.reads.quarantine_entry("fp-a")
    assert entry is not None and entry.note == "crash limit: job a"
    assert entry.quarantined_at_ms == rest.items[0].quarantined_at_ms
    assert first.items[0].quarantined_at_ms - entry.quarantined_at_ms == 2_000
    assert store.reads.quarantine_entry("fp-b") is None
    assert store.reads.quarantine_entry("\x00") is None
    with pytest.raises(ValidationError, match="cursor"):
        store.reads.quarantine_page(10, "not-a-cursor")
    with pytest.raises(ValidationError, match="limit"):
        store.reads.quarantine_page(0, None)
