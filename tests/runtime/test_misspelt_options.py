"""A misspelt option is a ValidationError naming it and the option it is closest
to, on every call that takes options as keywords or as a bulk item's keys (one
rule, `options.refuse_unknown`, as put_schedule had): not a TypeError from
inside JobOptions, and nothing is written."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from headgate import Headgate, JobContext, ValidationError

SPEC = "@every:60000"


def _work(job: JobContext) -> None:
    """A handler."""


CALLS: dict[str, tuple[Callable[[Headgate], object], str]] = {
    "enqueue": (lambda hg: hg.enqueue("k", {}, prority=1), "prority"),  # type: ignore[call-arg]
    "enqueue_many": (lambda hg: hg.enqueue_many([{"kind": "k", "prority": 1}]), "jobs[0].prority"),
    "handler": (lambda hg: hg.handler("k", prority=1)(_work), "prority"),  # type: ignore[call-arg]
    "periodic": (
        lambda hg: hg.periodic("p", spec=SPEC, prority=1)(_work),  # type: ignore[call-arg]
        "prority",
    ),
    "put_schedule": (
        lambda hg: hg.schedules.put("s", spec=SPEC, kind="k", prority=1),  # type: ignore[call-arg]
        "prority",
    ),
    "update_schedule": (
        lambda hg: hg.schedules.update("s0", prority=1),  # type: ignore[call-arg]
        "prority",
    ),
    "put_schedules": (
        lambda hg: hg.schedules.put_many(
            [{"schedule_id": "s", "spec": SPEC, "kind": "k", "prority": 1}]
        ),
        "schedules[0].prority",
    ),
    "aenqueue": (
        lambda hg: asyncio.run(hg.aenqueue("k", {}, prority=1)),  # type: ignore[call-arg]
        "prority",
    ),
    "aenqueue_many": (
        lambda hg: asyncio.run(hg.aenqueue_many([{"kind": "k", "prority": 1}])),
        "jobs[0].prority",
    ),
    "aput_schedule": (
        lambda hg: asyncio.run(
            hg.schedules.aput("s", spec=SPEC, kind="k", prority=1)  # type: ignore[call-arg]
        ),
        "prority",
    ),
    "aupdate_schedule": (
        lambda hg: asyncio.run(hg.schedules.aupdate("s0", prority=1)),  # type: ignore[call-arg]
        "prority",
    ),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_misspelt_option_is_named_with_the_one_meant(call: str, store_url: str) -> None:
    calling, field = CALLS[call]
    with Headgate(store_url) as hg:
        hg.schedules.put("s0", spec=SPEC, kind="k", paused=True)
        with pytest.raises(ValidationError) as refused:
            calling(hg)
        assert str(refused.value) == f"{field}: is not a known option (did you mean priority?)"
        assert refused.value.field == field
        assert hg.jobs.list().jobs == []
        assert [s.id for s in hg.schedules.list().schedules] == ["s0"]
        assert hg.schedules.get("s0").definition.job.priority is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"timout_s": 3}, "timout_s: is not a known option (did you mean timeout_s?)"),
        ({"max_atempts": 3}, "max_atempts: is not a known option (did you mean max_attempts?)"),
        ({"colour": "red"}, "colour: is not a known option"),
    ],
)
def test_the_closest_option_is_named_if_one_is_close(given: dict[str, object], said: str) -> None:
    with Headgate("memory://") as hg:
        for calling in (
            lambda: hg.enqueue("k", {}, **given),  # type: ignore[arg-type]
            lambda: hg.handler("k", **given),  # type: ignore[arg-type]
            lambda: hg.schedules.put("s", spec=SPEC, kind="k", **given),  # type: ignore[arg-type]
        ):
            with pytest.raises(ValidationError, match=f"^{re.escape(said)}$"):
                calling()
