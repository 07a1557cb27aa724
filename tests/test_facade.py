"""The shape of the object a host holds: a few verbs on `Headgate`, the rest by
noun in its namespaces, and every name it had before still answering, with a
DeprecationWarning naming what replaces it, for one minor version."""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import headgate
from headgate import Headgate
from headgate._deprecated import Deprecated, DeprecatedProperty, DeprecatedStatic
from headgate._facade.old_names import CALLED_NAMESPACES, OldNames
from headgate._facade.twins import Namespace
from headgate.testing import FakeClock

MAX_PUBLIC_MEMBERS = 25
EVERY_DAY = {
    # lifecycle
    "start",
    "stop",
    "close",
    "running",
    "clock",
    "config",
    "eager",
    # what runs jobs, and the jobs
    "handler",
    "task",
    "periodic",
    "add_hook",
    "enqueue",
    "enqueue_many",
    "aenqueue",
    "aenqueue_many",
    "drain",
    "fire_due_ticks",
    # the nouns
    "schedules",
    "jobs",
    "queues",
    "limits",
    "rates",
    "quarantine",
    "metrics",
    "runtime",
}
NOUNS = {"schedules", "jobs", "queues", "limits", "rates", "quarantine", "metrics", "runtime"}
OLD = (Deprecated, DeprecatedProperty, DeprecatedStatic)


@pytest.fixture
def hg() -> Iterator[Headgate]:
    with Headgate("memory://", clock=FakeClock()) as memory:
        yield memory


def public_members(hg: Headgate) -> set[str]:
    """What `dir()` shows of a Headgate, but the old names (going next minor)."""
    return {
        name
        for name in dir(hg)
        if not name.startswith("_") and not isinstance(inspect.getattr_static(hg, name), OLD)
    }


def test_the_object_keeps_what_a_host_calls_every_day(hg: Headgate) -> None:
    assert public_members(hg) == EVERY_DAY
    assert len(EVERY_DAY) <= MAX_PUBLIC_MEMBERS


def test_each_namespace_is_a_small_class_of_its_own_module(hg: Headgate) -> None:
    namespaces = [value for value in vars(hg).values() if isinstance(value, Namespace)]
    assert {space.name for space in namespaces} == NOUNS
    assert all(getattr(hg, space.name) is space for space in namespaces)
    modules = {type(space).__module__ for space in namespaces}
    assert len(modules) == len(namespaces), "one module per namespace"
    for space in namespaces:
        source = Path(inspect.getfile(type(space)))
        assert len(source.read_text().splitlines()) <= 400, source
        methods = [n for n in dir(space) if not n.startswith("_")]
        undocumented = [n for n in methods if not inspect.getdoc(getattr(type(space), n, None))]
        assert undocumented == [], f"hg.{space.name}: {undocumented}"


def _old_names() -> list[tuple[str, Any]]:
    return [(name, value) for name, value in vars(OldNames).items() if isinstance(value, OLD)]


def _calls(hg: Headgate) -> Iterator[tuple[str, Any, Any]]:
    """Each old name as called, what it must call, and what holds that."""
    for name, old in _old_names():
        if isinstance(old, Deprecated):
            yield name, old.receiver(hg), old.target
    for namespace, (_, method) in CALLED_NAMESPACES.items():
        yield namespace, getattr(hg, namespace), method


@pytest.mark.parametrize("name", [name for name, _ in _old_names()] + list(CALLED_NAMESPACES))
def test_every_old_name_warns_naming_its_replacement_and_calls_it(
    hg: Headgate, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[tuple[tuple[object, ...], dict[str, object]]] = []
    answer = object()

    def replacement(*args: object, **kwargs: object) -> object:
        called.append((args, kwargs))
        return answer

    old = inspect.getattr_static(hg, name)
    if isinstance(old, DeprecatedProperty):
        expected = getattr(old.receiver(hg), old.target)
        with pytest.warns(DeprecationWarning, match=re.escape(old.instead)) as caught:
            assert getattr(hg, name) is expected
        assert caught[0].filename == __file__, "the warning points at the caller"
        return
    if isinstance(old, DeprecatedStatic):
        with pytest.warns(DeprecationWarning, match=re.escape(old.instead)):
            assert Headgate.fingerprint("k", {"n": 1}) == hg.quarantine.fingerprint("k", {"n": 1})
        return
    receiver, target = next((r, t) for n, r, t in _calls(hg) if n == name)
    if isinstance(old, Deprecated):
        instead, args, kwargs = old.instead, ("a",), {"b": 2}
    else:  # a namespace called: with what its call requires
        instead, kwargs = f"hg.{name}.{target}()", {}
        required = inspect.signature(old.__call__).parameters.values()
        args = tuple(p.name for p in required if p.default is inspect.Parameter.empty)
    monkeypatch.setattr(receiver, target, replacement)
    with pytest.warns(DeprecationWarning, match=re.escape(instead)) as caught:
        assert getattr(hg, name)(*args, **kwargs) is answer or not isinstance(old, Deprecated)
    ((given, given_kwargs),) = called
    assert given[: len(args)] == args and given_kwargs == kwargs
    assert caught[0].filename == __file__, "the warning points at the caller"
    assert f"Headgate.{name}" in str(caught[0].message)


def test_the_old_names_do_what_the_new_ones_do(hg: Headgate) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert hg.put_schedule("s", spec="@every:60000", kind="k").id == "s"
        assert hg.get_schedule("s") == hg.schedules.get("s")
        job = hg.enqueue("k")
        assert hg.get_job(job.id) == hg.jobs.get(job.id)
        hg.pause_queue("default")
        assert [q.name for q in hg.queues() if q.paused] == ["default"]
        hg.quarantine(Headgate.fingerprint("k"), "by hand")
        assert hg.quarantine.get(hg.quarantine.fingerprint("k")) is not None
        assert hg.limits() == hg.limits.list()


def test_the_changelog_lists_every_old_name_with_its_replacement() -> None:
    changelog = (Path(headgate.__file__).parents[1] / "CHANGELOG.md").read_text()
    upgrading = changelog[changelog.index("### Upgrading") :]
    upgrading = upgrading[: upgrading.index("\n## ")]
    for name, old in _old_names():
        assert f"`hg.{name}`" in upgrading or f"`{name}`" in upgrading, name
        if not isinstance(old, Deprecated) or old.instead.startswith("hg."):
            assert f"`{old.instead}" in upgrading, (name, old.instead)
    for namespace, (call, method) in CALLED_NAMESPACES.items():
        assert f"`hg.{call}`" in upgrading and f"`hg.{namespace}.{method}()`" in upgrading
