"""Whether a worker process of this machine is dead, for certain.

A heartbeat row names its worker's host and pid, and neither identifies a
process: host names repeat (`localhost`, an image's default, a restarted
container keeps its pod's), and pids are reused, by an unrelated process or,
in a restarted container's new pid namespace, even by the process asking. On
Linux three facts do identify a process while its machine runs, and a worker
records them in its heartbeat (`ProcessIdentity`):

* the kernel's boot id (/proc/sys/kernel/random/boot_id), random at each boot:
  this run of this machine;
* the pid namespace its pid is read in, and the time namespace its start
  time is read in (/proc/self/ns/pid and /proc/self/ns/time: the kernel
  shifts a process's start time by the reader's time namespace);
* its start time, in clock ticks since boot (/proc/PID/stat, field 22), which
  a later process given the same pid does not share.

A row whose identity names our boot id and our namespaces is of a dead
process when no process has its pid in our pid namespace (`kill(pid, 0)` says
so, whatever /proc's `hidepid` hides), or the one that has it started at
another time. Sharing a namespace's inode number means the same namespace, or
that the recorded one has been freed, which happens only once every process
in it has gone: either way the conclusion holds.

Anything less certain answers "not known dead", and the heartbeat TTL decides:
another machine, another boot, another pid namespace (a container restarted
with a namespace of its own cannot see its predecessor's pids), a row without
an identity (written by an earlier build, or on a system without /proc), a
/proc that shows another pid namespace than this process's own (its `NStgid`
lists more than one pid), a pid whose stat we may not read, and a process
with the recorded start time, even a zombie (exited but not yet reaped, it
still holds its pid; a process whose first thread exited before its others
looks the same).

Known limit: two machines restored from one memory snapshot (virtual machines
cloned live) run under one boot id, with the same namespaces.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from headgate._store.port import ProcessIdentity, WorkerRow

PROC: Final = Path("/proc")
MAX_BOOT_ID: Final = 64
MAX_NAMESPACES: Final = 128
"""The lengths the heartbeat row's columns hold."""


class LocalProcesses:
    """This process's identity, and what /proc says of other workers' processes.

    `proc` is where procfs is mounted (tests give it a directory of their own)."""

    def __init__(self, proc: Path = PROC) -> None:
        self._proc = proc
        self.here = self._identify()
        """This process's identity, or None where it cannot be known for certain."""

    def dead_among(self, rows: Iterable[WorkerRow]) -> list[WorkerRow]:
        """The rows whose process is certainly dead, as the module says."""
        return [row for row in rows if self.certainly_dead(row)]

    def certainly_dead(self, row: WorkerRow) -> bool:
        here, there = self.here, row.process
        if here is None or there is None or row.pid <= 0:
            return False
        if (there.boot_id, there.namespaces) != (here.boot_id, here.namespaces):
            return False
        try:
            os.kill(row.pid, 0)  # signal 0: is there a process with this pid?
        except ProcessLookupError:
            return True
        except OSError:  # EPERM (someone else's) or anything else: look at its start
            pass
        start_ticks = self._start_ticks(str(row.pid))
        if start_ticks is None:
            return False  # gone since, or hidden from us: next time, or the TTL
        # The same start is the same process: alive, or a zombie not yet reaped.
        return start_ticks != there.start_ticks

    def _identify(self) -> ProcessIdentity | None:
        pid = os.getpid()
        try:
            boot_id = (self._proc / "sys/kernel/random/boot_id").read_text().strip()
            namespaces = " ".join(
                os.readlink(self._proc / "self/ns" / kind) for kind in self._namespace_kinds()
            )
            status = (self._proc / "self/status").read_text()
        except (OSError, ValueError):
            return None
        if not _shows_own_pid_namespace(status, pid):
            return None
        start_ticks = self._start_ticks("self")
        if start_ticks is None or not 0 < len(boot_id) <= MAX_BOOT_ID:
            return None
        if len(namespaces) > MAX_NAMESPACES:
            return None
        return ProcessIdentity(boot_id, namespaces, start_ticks)

    def _namespace_kinds(self) -> list[str]:
        """pid, and time where the kernel has time namespaces (5.6 and later)."""
        kinds = ["pid"]
        if os.path.lexists(self._proc / "self/ns/time"):
            kinds.append("time")
        return kinds

    def _start_ticks(self, pid: str) -> int | None:
        """The start time in /proc/PID/stat, or None if it cannot be read."""
        try:
            text = (self._proc / pid / "stat").read_text()
        except (OSError, ValueError):
            return None
        return start_ticks_in(text)


def start_ticks_in(stat: str) -> int | None:
    """Field 22 of a /proc/PID/stat line. The process's name (field 2) may hold
    spaces and parentheses, so fields are counted after its last ')': the
    first of those is field 3, so field 22 is the 20th."""
    _, closing, rest = stat.rpartition(")")
    fields = rest.split()
    if not closing or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def _shows_own_pid_namespace(status: str, pid: int) -> bool:
    """Whether this /proc is our pid namespace's: `NStgid` lists our pid in each
    namespace from the one /proc was mounted for down to our own, so one entry,
    our own pid, says they are the same."""
    for line in status.splitlines():
        if line.startswith("NStgid:"):
            return line.split()[1:] == [str(pid)]
    return False  # a kernel before 4.1 does not say
