"""Event bodies on disk are canonical JSON: the per-field encoder must produce
exactly the bytes `canonical_json` gives for the same fields, and read back."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from headgate._domain.events import (
    DomainEvent,
    EnqueueAttempted,
    JobEnqueued,
    JobFinished,
    JobState,
    ManualRunRequested,
    MissedRunPolicy,
    NextRunAdvanced,
    Outcome,
    ScheduleDefined,
    ScheduleDeleted,
)
from headgate._json import canonical_json
from headgate._store.mapper import EVENT_TYPES, decode, encode
from tests.store.builders import enqueued, schedule_defined

texts = st.text()
ints = st.integers(-(2**70), 2**70)
optional_ints = st.none() | ints
json_values = st.recursive(
    st.none() | st.booleans() | ints | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
events = st.one_of(
    st.builds(
        schedule_defined,
        texts,
        texts,
        texts,
        texts,
        json_values,
        st.sampled_from(list(MissedRunPolicy)),
        ints,
        st.booleans(),
        ints,
        last_enqueued_ms=optional_ints,
        max_attempts=optional_ints,
    ),
    st.builds(
        EnqueueAttempted,
        texts,
        ints,
        texts,
        st.sampled_from(list(Outcome)),
        texts,
        ints,
        optional_ints,
        optional_ints,
        optional_ints,
    ),
    st.builds(NextRunAdvanced, texts, ints, optional_ints),
    st.builds(enqueued, texts, texts, texts, json_values, st.none() | texts)
    | st.builds(enqueued, texts, texts, texts, json_values, st.none() | texts, texts, ints),
    st.builds(JobFinished, texts, st.sampled_from(list(JobState))),
    st.builds(ManualRunRequested, texts, texts, texts),
)


@given(events)
def test_encoded_body_is_the_canonical_json_of_the_fields(event: DomainEvent) -> None:
    name, version, body = encode(event)
    assert body == canonical_json(dataclasses.asdict(event))
    assert EVENT_TYPES[name] is type(event)
    assert decode(name, version, body) == event


def test_a_field_added_to_a_definition_reads_as_its_default_in_older_events() -> None:
    """ScheduleDefined v4 from before schedules had a summary: the field's default
    is its upcast, so adding an option needs no upcaster of its own."""
    body = (
        '{"declared":null,"declared_by":null,"definition":{"backfill_limit":1,'
        '"end_at_ms":null,"jitter_ms":0,"job":{"max_attempts":null,"queue":"default",'
        '"run_at_ms":null,"timeout_ms":null,"unique_key":null},"kind":"k",'
        '"on_missed":"skip","paused":false,"payload":null,"spec":"@every:60000",'
        '"start_at_ms":null},"due_at_ms":null,"last_enqueued_ms":null,'
        '"next_run_ms":60000,"schedule_id":"s"}'
    )
    event = decode("ScheduleDefined", 4, body)
    assert isinstance(event, ScheduleDefined)
    assert event.definition.summary == ""
    assert event == schedule_defined(
        "s", "@every:60000", "k", "default", None, "skip", 1, False, 60000
    )


def test_a_job_enqueued_before_jobs_carried_a_trace_reads_with_none() -> None:
    """JobEnqueued v5, as stored before v6 added `trace_context`."""
    body = (
        '{"fair_turn":3,"job_id":"j","kind":"k","options":{"max_attempts":null,'
        '"partition_key":"p","priority":null,"queue":"default","rate_class":null,'
        '"run_at_ms":null,"start_within_ms":null,"timeout_ms":null,"unique_key":null},'
        '"payload":{"n":1},"periodic_schedule_id":null,"periodic_tick_ms":null,'
        '"run_now_schedule_id":null,"serial":false}'
    )
    event = decode("JobEnqueued", 5, body)
    assert isinstance(event, JobEnqueued)
    assert (event.trace_context, event.fair_turn, event.payload) == (None, 3, {"n": 1})
    assert event.options.partition_key == "p"
    assert encode(event)[1] == 6


def test_a_definition_stored_before_it_said_who_made_it_reads_as_unknown() -> None:
    """ScheduleDefined v4 and ScheduleDeleted v1, as stored before `changed_by`:
    who made those changes is unknown (None), not guessed."""
    body = (
        '{"declared":null,"declared_by":"app","definition":{"backfill_limit":1,'
        '"end_at_ms":null,"jitter_ms":0,"job":{"max_attempts":null,"queue":"default",'
        '"run_at_ms":null,"timeout_ms":null,"unique_key":null},"kind":"k",'
        '"on_missed":"skip","paused":false,"payload":null,"spec":"@every:60000",'
        '"start_at_ms":null},"due_at_ms":null,"last_enqueued_ms":null,'
        '"next_run_ms":60000,"schedule_id":"s"}'
    )
    defined = decode("ScheduleDefined", 4, body)
    assert isinstance(defined, ScheduleDefined)
    assert (defined.changed_by, defined.declared_by) == (None, "app")
    assert encode(defined)[1] == ScheduleDefined.schema_version
    deleted = decode("ScheduleDeleted", 1, '{"schedule_id":"s"}')
    assert deleted == ScheduleDeleted("s", changed_by=None)
    assert encode(ScheduleDeleted("s", "operator:cli")) == (
        "ScheduleDeleted",
        2,
        '{"changed_by":"operator:cli","schedule_id":"s"}',
    )
