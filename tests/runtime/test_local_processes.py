"""Telling, from this machine's /proc, that a worker's process is dead for certain,
and answering "not known" whenever it cannot be certain (the TTL then decides).

Real processes on the real /proc: a child alive, killed and reaped, exited and
not yet reaped; rows naming another boot, another pid namespace, another start
time, or no identity at all. A /proc of our own making stands for systems where
this process cannot be identified.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from headgate._runtime.local_processes import LocalProcesses, start_ticks_in
from headgate._store.port import ProcessIdentity, WorkerRow

HERE = LocalProcesses()
pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(HERE.here is None, reason="needs Linux's /proc"),
]


def _row(pid: int, process: ProcessIdentity | None) -> WorkerRow:
    return WorkerRow("localhost:1:abc", "localhost", pid, {"q": 1}, 0, 0, 0, 0, 0, process)


def _identity_of(pid: int) -> ProcessIdentity:
    """What the process at `pid` would have written in its heartbeat."""
    assert HERE.here is not None
    start_ticks = start_ticks_in(Path(f"/proc/{pid}/stat").read_text())
    assert start_ticks is not None
    return dataclasses.replace(HERE.here, start_ticks=start_ticks)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait(timeout=30)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_this_process_is_identified_by_boot_namespaces_and_start() -> None:
    here = HERE.here
    assert here is not None
    assert here.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert here.namespaces.startswith(os.readlink("/proc/self/ns/pid"))
    assert here == _identity_of(os.getpid())
    assert not HERE.certainly_dead(_row(os.getpid(), here)), "this process is alive"


def test_a_live_process_is_not_dead(child: subprocess.Popen[bytes]) -> None:
    assert not HERE.certainly_dead(_row(child.pid, _identity_of(child.pid)))


def test_a_killed_and_reaped_process_is_dead(child: subprocess.Popen[bytes]) -> None:
    row = _row(child.pid, _identity_of(child.pid))
    child.kill()
    child.wait(timeout=30)
    assert HERE.certainly_dead(row)
    assert HERE.dead_among([row, _row(os.getpid(), HERE.here)]) == [row]


def test_an_exited_process_not_yet_reaped_is_not_known_dead_until_it_is(
    child: subprocess.Popen[bytes],
) -> None:
    """A zombie still holds its pid, and looks like a process whose first thread
    exited while others run: it waits until its parent reaps it."""
    row = _row(child.pid, _identity_of(child.pid))
    os.kill(child.pid, 9)
    deadline = time.monotonic() + 10
    while _state(child.pid) != "Z":
        assert time.monotonic() < deadline, "the child never became a zombie"
        time.sleep(0.01)
    assert not HERE.certainly_dead(row)
    child.wait(timeout=30)
    assert HERE.certainly_dead(row)


def test_a_pid_taken_by_another_process_is_dead(child: subprocess.Popen[bytes]) -> None:
    """The pid is in use, by a process that started at another time: the one
    recorded has gone (an unrelated process took its pid, or this one did)."""
    earlier = _identity_of(child.pid)
    earlier = dataclasses.replace(earlier, start_ticks=earlier.start_ticks - 1)
    assert HERE.certainly_dead(_row(child.pid, earlier))
    assert HERE.here is not None
    ours = dataclasses.replace(HERE.here, start_ticks=HERE.here.start_ticks - 1)
    assert HERE.certainly_dead(_row(os.getpid(), ours))


@pytest.mark.parametrize(
    "other",
    [
        {"boot_id": "00000000-0000-4000-8000-000000000000"},
        {"namespaces": "pid:[1] time:[2]"},
    ],
    ids=["another boot", "another pid namespace"],
)
def test_a_dead_pid_under_another_boot_or_namespace_is_not_known_dead(
    child: subprocess.Popen[bytes], other: dict[str, str]
) -> None:
    """Its pid means nothing here: another machine (or this one before a reboot),
    or a pid namespace whose pids this process cannot see."""
    identity = dataclasses.replace(_identity_of(child.pid), **other)
    child.kill()
    child.wait(timeout=30)
    assert not HERE.certainly_dead(_row(child.pid, identity))


def test_a_row_without_an_identity_is_not_known_dead(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait(timeout=30)
    assert not HERE.certainly_dead(_row(child.pid, None))


@pytest.mark.parametrize("pid", [0, -1])
def test_a_pid_that_names_a_group_is_never_signalled(pid: int) -> None:
    """kill(0, 0) and kill(-1, 0) ask about process groups, not a process."""
    assert not HERE.certainly_dead(_row(pid, HERE.here))


def _fake_proc(root: Path, *, nstgid: str) -> Path:
    (root / "sys/kernel/random").mkdir(parents=True)
    (root / "sys/kernel/random/boot_id").write_text("3a5419f7-b5ea-4d8d-a96a-a99bcbb6c25c\n")
    (root / "self/ns").mkdir(parents=True)
    os.symlink("pid:[4026531836]", root / "self/ns/pid")
    os.symlink("time:[4026531834]", root / "self/ns/time")
    (root / "self/status").write_text(f"Name:\tpython\nNStgid:\t{nstgid}\n")
    name = "(py thon) (x)"
    fields = ["S", *["0"] * 18, "70147", "0"]
    (root / "self/stat").write_text(f"{os.getpid()} {name} {' '.join(fields)}\n")
    return root


def test_a_proc_of_our_own_pid_namespace_identifies_this_process(tmp_path: Path) -> None:
    processes = LocalProcesses(_fake_proc(tmp_path, nstgid=str(os.getpid())))
    assert processes.here == ProcessIdentity(
        "3a5419f7-b5ea-4d8d-a96a-a99bcbb6c25c", "pid:[4026531836] time:[4026531834]", 70147
    )


@pytest.mark.parametrize(
    "proc",
    ["none", "another namespace", "an old kernel"],
)
def test_where_this_process_cannot_be_identified_nothing_is_known_dead(
    tmp_path: Path, child: subprocess.Popen[bytes], proc: str
) -> None:
    """No /proc (not Linux); a /proc mounted for another pid namespace, whose pids
    are not ours (NStgid lists our pid there and in our own); a kernel that
    does not say (no NStgid, before 4.1)."""
    root = tmp_path / "proc"
    if proc == "another namespace":
        _fake_proc(root, nstgid=f"{os.getpid() + 1000} {os.getpid()}")
    elif proc == "an old kernel":
        _fake_proc(root, nstgid="")
        (root / "self/status").write_text("Name:\tpython\n")
    processes = LocalProcesses(root)
    assert processes.here is None
    row = _row(child.pid, _identity_of(child.pid))
    child.kill()
    child.wait(timeout=30)
    assert not processes.certainly_dead(row)


def test_a_stat_line_is_read_past_a_name_with_spaces_and_parentheses() -> None:
    fields = " ".join(["R", *[str(n) for n in range(4, 22)], "123456", "99"])
    assert start_ticks_in(f"42 (a) b (c)) {fields}") == 123456
    assert start_ticks_in("42 (truncated) R 1 2") is None
    assert start_ticks_in("no name at all") is None
