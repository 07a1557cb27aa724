"""Event bodies on disk are canonical JSON: the per-field encoder must produce
exactly the bytes `canonical_json` gives for the same fields, and read back."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from headgate._domain.events import (
    DomainEvent,
    EnqueueAttempted,
    JobFinished,
    JobState,
    ManualRunRequested,
    MissedRunPolicy,
    NextRunAdvanced,
    Outcome,
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
