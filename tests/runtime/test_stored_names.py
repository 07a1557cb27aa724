"""Names through the Python API, on both backends: every call that introduces a
name refuses one the naming rules refuse, naming the field and storing
nothing; a name an earlier build stored (before the rules) stays readable,
deletable and running."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from headgate import Headgate, JobContext, NotFound, ValidationError
from headgate._domain.events import (
    FingerprintQuarantined,
)
from headgate._domain.streams import job_stream, quarantine_stream, schedule_stream
from headgate._store.port import NO_STREAM
from headgate.testing import FakeClock
from tests.runtime.conftest import START_MS, fire, jobs_for
from tests.store.builders import defined, enqueued

MINUTE = 60_000
NEWLINE = "U+000A (a control character) at index 3"


def _head(hg: Headgate) -> int:
    return hg._core.store.log.head()


def _refused(hg: Headgate, call: Callable[[], object], message: str) -> None:
    before = _head(hg)
    with pytest.raises(ValidationError) as caught:
        call()
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)
    assert _head(hg) == before, "a refused call wrote to the log"


class TestEveryPathRefuses:
    def test_put_schedule(self, hg: Headgate) -> None:
        _refused(hg, lambda: hg.schedules.put("abc\n", spec="@every:60000", kind="k"), "id: may")
        _refused(
            hg,
            lambda: hg.schedules.put("s", spec="@every:60000", kind="k", queue="q\n"),
            "queue: may contain only",
        )
        _refused(
            hg,
            lambda: hg.schedules.put("s", spec="@every:60000", kind="k "),
            "kind: must not start or end with a space",
        )
        _refused(
            hg,
            lambda: hg.schedules.put("s", spec="@every:60000", kind="k\u2028"),
            "kind: must not contain control or invisible characters; found U+2028",
        )
        assert hg.schedules.list().schedules == []

    def test_put_schedule_names_the_newline(self, hg: Headgate) -> None:
        with pytest.raises(ValidationError, match=re.escape(f"found {NEWLINE}")):
            hg.schedules.put("abc\n", spec="@every:60000", kind="k")

    def test_put_schedules_names_the_item(self, hg: Headgate) -> None:
        items = [
            {"schedule_id": "fine", "spec": "@every:60000", "kind": "k"},
            {"schedule_id": "abc\n", "spec": "@every:60000", "kind": "k"},
        ]
        _refused(hg, lambda: hg.schedules.put_many(items), "schedules[1].schedule_id: may contain")
        queue = [{"schedule_id": "s", "spec": "@every:60000", "kind": "k", "queue": " q"}]
        _refused(hg, lambda: hg.schedules.put_many(queue), "schedules[0].queue: may contain")
        assert hg.schedules.list().schedules == []

    def test_periodic_and_handler_declarations(self, hg: Headgate) -> None:
        def handle(job: JobContext) -> None:
            del job

        with pytest.raises(ValidationError, match=r"^id: may contain only"):
            hg.periodic("abc\n", spec="@every:60000", kind="k")(handle)
        with pytest.raises(ValidationError, match=r"^kind: must not start or end with a space"):
            hg.handler("mail.send ")(handle)
        with pytest.raises(ValidationError, match=r"^queue: may contain only"):
            hg.handler("mail.send", queue="mail\n")(handle)

    def test_enqueue(self, hg: Headgate) -> None:
        _refused(hg, lambda: hg.enqueue("k", queue="q\n"), "queue: may contain only")
        _refused(hg, lambda: hg.enqueue("\u200bk"), "kind: must not contain control or invisible")
        _refused(hg, lambda: hg.enqueue("k", unique_key="u "), "unique_key: must not start or end")
        _refused(
            hg,
            lambda: hg.enqueue("k", unique_key="u\n"),
            "unique_key: must not contain control or invisible characters; found U+000A",
        )
        assert hg.jobs.list().jobs == []

    def test_run_now_keys(self, hg: Headgate) -> None:
        hg.schedules.put("s", spec="@every:60000", kind="k")
        for key in ("k ", " k", "k\n", "k\u00a0"):
            _refused(
                hg, lambda key=key: hg.schedules.enqueue_now("s", key), "Idempotency-Key: must not"
            )
        assert hg.jobs.list().jobs == []

    def test_quarantine_takes_only_a_fingerprint_headgate_makes(self, hg: Headgate) -> None:
        for wrong in ("abc", "zzz", "zzz\n", hg.quarantine.fingerprint("k").upper()):
            _refused(
                hg,
                lambda wrong=wrong: hg.quarantine.add(wrong, "x"),
                "fingerprint: must be 32 lowercase hexadecimal digits",
            )
            with pytest.raises(ValidationError, match=r"^fingerprint: must be 32 lowercase"):
                hg.quarantine.release(wrong)
        assert hg.quarantine.list().entries == []
        hg.quarantine.add(hg.quarantine.fingerprint("k"), "by hand")
        assert [e.fingerprint for e in hg.quarantine.list().entries] == [
            hg.quarantine.fingerprint("k")
        ]


class TestNamesStoredBeforeTheRules:
    """What an earlier build let in stays readable and deletable; nothing is lost."""

    def _store_schedule(self, hg: Headgate, schedule_id: str, **fields: object) -> None:
        definition = {
            "spec": "@every:60000",
            "kind": "k",
            "queue": "default",
            "payload": None,
            "on_missed": "skip",
            "backfill_max": 1,
            "paused": False,
            **fields,
        }
        event = defined(schedule_id, START_MS + MINUTE, **definition)
        hg._core.store.log.append(schedule_stream(schedule_id), NO_STREAM, [event])

    def test_a_schedule_id_with_a_newline_reads_pauses_runs_and_deletes(
        self, hg: Headgate, clock: FakeClock
    ) -> None:
        self._store_schedule(hg, "abc\n", queue="q\n")
        hg.schedules.put("abc", spec="@every:60000", kind="k")
        assert hg.schedules.get("abc\n").queue == "q\n"
        assert {s.id for s in hg.schedules.list().schedules} == {"abc", "abc\n"}
        clock.advance(MINUTE)
        fire(hg)
        assert jobs_for(hg, "abc\n") == [START_MS + MINUTE]
        assert [j.queue for j in hg.jobs.list(schedule_id="abc\n").jobs] == ["q\n"]
        assert [j.queue for j in hg.jobs.list(queue="q\n").jobs] == ["q\n"]
        assert hg.schedules.enqueue_events("abc\n").events[0].outcome == "enqueued"
        assert hg.schedules.upcoming("abc\n", 1)[0].tick_ms == START_MS + 2 * MINUTE
        assert hg.schedules.pause("abc\n").paused and not hg.schedules.resume("abc\n").paused
        manual = hg.schedules.enqueue_now("abc\n", "click-1")
        assert hg.jobs.get(manual.job_id).run_now_schedule_id == "abc\n"
        credited = hg.enqueue("k", periodic_origin=("abc\n", START_MS))  # a passed tick
        assert credited.periodic_origin == ("abc\n", START_MS)
        hg.schedules.delete("abc\n")
        with pytest.raises(NotFound, match=r"no schedule 'abc\\n'"):
            hg.schedules.get("abc\n")
        assert hg.schedules.get("abc").id == "abc"  # its neighbour untouched

    def test_a_kind_with_a_trailing_space_keeps_ticking_and_running_now(
        self, hg: Headgate, clock: FakeClock
    ) -> None:
        self._store_schedule(hg, "legacy", kind="report ")
        clock.advance(MINUTE)
        fire(hg)
        assert hg.schedules.enqueue_events("legacy").events[0].outcome == "enqueued"
        assert hg.schedules.enqueue_now("legacy", "click-1").replayed is False
        assert {j.kind for j in hg.jobs.list(kind="report ").jobs} == {"report "}
        fingerprint = hg.quarantine.fingerprint("report ", None)
        assert {j.fingerprint for j in hg.jobs.list().jobs} == {fingerprint}

    def test_a_job_with_a_legacy_queue_and_unique_key_is_cancelled_and_retried(
        self, hg: Headgate
    ) -> None:
        job = enqueued("legacy-job", "k", "q\n", None, "key ")
        hg._core.store.log.append(job_stream("legacy-job"), NO_STREAM, [job])
        assert hg.jobs.get("legacy-job").unique_key == "key "
        assert hg.jobs.cancel("legacy-job").state == "cancelled"
        assert hg.jobs.retry("legacy-job").state == "pending"

    def test_a_malformed_quarantined_fingerprint_is_listed_and_released(self, hg: Headgate) -> None:
        for fingerprint in ("zzz", "zzz\n"):
            event = FingerprintQuarantined(fingerprint, "by hand, before the rule")
            hg._core.store.log.append(quarantine_stream(fingerprint), NO_STREAM, [event])
        assert {e.fingerprint for e in hg.quarantine.list().entries} == {"zzz", "zzz\n"}
        assert hg.quarantine.get("zzz\n") is not None
        hg.quarantine.release("zzz\n")
        hg.quarantine.release("zzz")
        assert hg.quarantine.list().entries == []
        with pytest.raises(ValidationError, match=r"^fingerprint: must be 32 lowercase"):
            hg.quarantine.release("zzz")  # released now: no longer something to release
