"""Who holds a lease: enough about a process to tell, on its own machine, that it is gone.

A lease records its :class:`Holder`: host name, boot id, pid namespace, pid and the pid's
start time. Another process judges the holder gone only when all of this holds:

- it runs on the same machine, in the same boot and pid namespace (same host name alone
  is not enough: containers sharing a host name, or a host network, can see each other's
  leases while their pids mean different processes);
- the pid is not running, is a zombie, or now names a process started at another time
  (the pid was reused).

Anything it cannot judge counts as alive, so the lease is waited for until it expires,
as before: a holder on another host, a record from an older version (no holder), a
system without ``/proc`` (boot id and pid namespace are read there; elsewhere,
including macOS and Windows, early takeover is off).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Holder", "this_process"]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_cached: tuple[int, Holder] | None = None


@dataclass(frozen=True)
class Holder:
    """The process that wrote a lease record; fields None where they could not be read."""

    host: str
    boot: str | None
    pidns: str | None
    pid: int
    started: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "boot": self.boot,
            "pidns": self.pidns,
            "pid": self.pid,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: object) -> Holder | None:
        """The holder of a stored record; None when absent or not understood."""
        if not isinstance(data, dict):
            return None
        host, pid = data.get("host"), data.get("pid")
        if not isinstance(host, str) or not isinstance(pid, int) or isinstance(pid, bool):
            return None

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(host, text("boot"), text("pidns"), pid, text("started"))

    def is_gone(self) -> bool:
        """Whether this holder is a process of this machine that is no longer running."""
        here = this_process()
        if here.boot is None or here.pidns is None or self.boot is None or self.pidns is None:
            return False
        if (self.host, self.boot, self.pidns) != (here.host, here.boot, here.pidns):
            return False
        if self.pid == here.pid:
            return self.started is not None and self.started != here.started
        return not _running(self.pid, self.started)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read().strip() or None
    except OSError:
        return None


def _stat(pid: int | str) -> tuple[str, str] | None:
    """``(state, start time)`` of a process from ``/proc/<pid>/stat``; None if unreadable."""
    line = _read(f"/proc/{pid}/stat")
    if line is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = line.rsplit(")", 1)[-1].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def _running(pid: int, started: str | None) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return True  # cannot tell: alive
    stat = _stat(pid)
    if stat is None:
        return True  # exists, but /proc hides it (hidepid): alive
    state, start = stat
    if state in ("Z", "X"):
        return False  # killed and not reaped yet
    return started is None or start == started


def this_process() -> Holder:
    """The :class:`Holder` of this process (read once per pid: a fork gets its own)."""
    global _cached
    pid = os.getpid()
    if _cached is not None and _cached[0] == pid:
        return _cached[1]
    boot = pidns = started = None
    if sys.platform.startswith("linux"):
        boot = _read(_BOOT_ID)
        try:
            pidns = os.readlink("/proc/self/ns/pid")
        except OSError:
            pidns = None
        stat = _stat("self")
        started = stat[1] if stat is not None else None
    holder = Holder(socket.gethostname(), boot, pidns, pid, started)
    _cached = (pid, holder)
    return holder
