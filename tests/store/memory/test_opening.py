"""`memory://`: a new store in this process's memory for `Headgate`, refused in
one line by everything that opens a store from outside the process."""

from __future__ import annotations

import pytest

from headgate import Headgate, ops
from headgate._errors import ValidationError
from headgate._store.memory import MemoryStore
from headgate.cli._main import EXIT_USAGE, main
from headgate.testing import FakeClock

REFUSED = "memory:// is a store inside one process"


def test_each_headgate_on_memory_gets_a_store_of_its_own() -> None:
    clock = FakeClock()
    with Headgate("memory://", clock=clock) as first, Headgate("memory://", clock=clock) as second:
        assert isinstance(first._core.store, MemoryStore)
        first.schedules.put("pulse", spec="@every:60000", kind="ping")
        assert first.schedules.get("pulse").kind == "ping"
        assert second.schedules.list().schedules == []
        assert repr(first) == "<Headgate on MemoryStore('memory://')>"
        assert first.runtime.readiness().ready


@pytest.mark.parametrize("url", ["memory://shared", "memory:", "memory:///x"])
def test_a_memory_url_names_nothing_more(url: str) -> None:
    with pytest.raises(ValidationError, match="a memory store takes nothing after memory://"):
        Headgate(url, clock=FakeClock())


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "list"],
        ["schedules", "list"],
        ["events", "show"],
        ["projections", "rebuild"],
        ["events", "replay", "--to", "sqlite:///replay.db"],
    ],
)
def test_operator_commands_refuse_memory_in_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--db", "memory://"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and REFUSED in error


def test_ops_refuse_memory() -> None:
    with pytest.raises(ValidationError, match=REFUSED):
        ops.verify("memory://")
    with pytest.raises(ValidationError, match=REFUSED):
        ops.compact("memory://")
