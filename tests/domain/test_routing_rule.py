"""The routing rule (`headgate._domain.routing`): the defaults a job of a kind
with no handler in its process takes from its handler's declarations."""

from __future__ import annotations

import pytest

from headgate._domain.options import JobOptions
from headgate._domain.routing import UNDECLARED, Declared, declared_defaults
from headgate._errors import ValidationError


def _declared(group: str, queue: str, at_ms: int = 0, **defaults: object) -> Declared:
    options = JobOptions.restored(**{"queue": queue, "priority": 0, **defaults})
    return Declared(group, options, at_ms)


def test_a_kind_nobody_declared_takes_headgates_defaults() -> None:
    assert declared_defaults("k", [], None) == UNDECLARED
    assert UNDECLARED.queue == "default" and UNDECLARED.priority == 0
    named = declared_defaults("k", [], "urgent")
    assert (named.queue, named.priority) == ("urgent", 0)


def test_one_declaration_gives_every_default_it_has() -> None:
    pdf = _declared("web", "pdf", priority=5, rate_class="render", partition_key="tenant")
    assert declared_defaults("pdf.render", [pdf], None) == pdf.defaults
    assert declared_defaults("pdf.render", [pdf], "pdf") == pdf.defaults


def test_a_job_naming_another_queue_keeps_it_with_its_handlers_other_defaults() -> None:
    """As a job enqueued where its handler is registered does."""
    pdf = _declared("web", "pdf", priority=5, rate_class="render")
    chosen = declared_defaults("pdf.render", [pdf], "default")
    assert (chosen.queue, chosen.priority, chosen.rate_class) == ("default", 5, "render")


def test_groups_agreeing_on_the_queue_route_there_with_the_newest_defaults() -> None:
    older, newer = _declared("a", "pdf", 1, priority=1), _declared("b", "pdf", 2, priority=2)
    assert declared_defaults("pdf.render", [newer, older], None) == newer.defaults
    assert declared_defaults("pdf.render", [older, newer], None) == newer.defaults


def test_groups_disagreeing_on_the_queue_are_refused_unless_the_job_names_one() -> None:
    web, batch = _declared("web", "pdf", priority=1), _declared("batch", "bulk", priority=9)
    with pytest.raises(ValidationError) as raised:
        declared_defaults("pdf.render", [web, batch], None)
    assert raised.value.field == "queue"
    rule = raised.value.rule
    assert "'pdf.render'" in rule and "bulk (group batch), pdf (group web)" in rule
    assert "name the queue" in rule and "one queue in every declarations group" in rule
    assert declared_defaults("pdf.render", [web, batch], "bulk") == batch.defaults
    assert declared_defaults("pdf.render", [web, batch], "pdf") == web.defaults
    elsewhere = declared_defaults(
        "pdf.render", [web, _declared("batch", "bulk", 1, priority=9)], "x"
    )
    assert (elsewhere.queue, elsewhere.priority) == ("x", 9), "the newest declaration's"
