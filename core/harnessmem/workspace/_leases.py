"""Named leases over a workspace's conditional writes (private; see ``harnessmem.workspace``).

A lease is one small JSON object ``{name, owner, token, acquired, expires}``. Taking it is
a create-if-absent; taking over an expired one, renewing and releasing are compare-and-swap
operations against the version (ETag or content hash) last written or read, so two holders
can never both believe they won. The holder remembers the version of its own record, so a
renewal is one conditional PUT and a release one conditional DELETE, with no read first.
A conditional write that "lost" to exactly the record we sent lost to itself (an earlier
attempt of it landed) and counts as won. Expiry is judged by the workspace's injected
clock; waiting for a held lease uses a :class:`~harnessmem.workspace.waiter.Waiter` (real
time by default, because a fake clock may never move; tests inject one that records or
fails).

A record also names the process holding it (:mod:`harnessmem.workspace._holders`: host name, boot
id, pid namespace, pid and the pid's start time). A lease whose holder is a process of
this very machine that is no longer running is taken over at once, without waiting for
its expiry: a process killed while holding a lease no longer stalls the next one for the
ttl. A holder on another machine, or one we cannot judge, is waited for as before.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from harnessmem.errors import LeaseError
from harnessmem.lifetime import ClosesOnExit
from harnessmem.workspace._holders import Holder, this_process
from harnessmem.workspace.waiter import REAL_TIME, Waiter

__all__ = ["Lease", "LeaseStore", "acquire_lease"]

logger = logging.getLogger("harnessmem.workspace")


class LeaseStore(Protocol):
    """The conditional primitives a lease needs; paths are full storage paths."""

    url: str

    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        """Content and version of ``full``, or None when it does not exist."""
        ...

    def put_if(self, full: str, data: bytes, version: str | None) -> str | None:
        """Write when the current version is ``version`` (None: absent); the new version,
        or None when the condition did not hold."""
        ...

    def delete_if(self, full: str, version: str) -> bool:
        """Delete when the current version is ``version``; False when not."""
        ...


@dataclass(frozen=True)
class _Record:
    owner: str
    token: str
    acquired: float
    expires: float
    holder: Holder | None = None  # None: written by a version that did not record it

    def dumps(self, name: str) -> bytes:
        data: dict[str, Any] = {
            "name": name,
            "owner": self.owner,
            "token": self.token,
            "acquired": self.acquired,
            "expires": self.expires,
        }
        if self.holder is not None:
            data["holder"] = self.holder.to_json()
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def loads(cls, raw: bytes) -> _Record:
        try:
            data = json.loads(raw)
            owner, token = str(data["owner"]), str(data["token"])
            times = float(data["acquired"]), float(data["expires"])
        except (ValueError, KeyError, TypeError):
            # Writes are atomic, so garbage is not a half-written lease: treat it as
            # long expired so it can be taken over instead of blocking forever.
            return cls("<unreadable lease>", "", 0.0, 0.0)
        return cls(owner, token, *times, Holder.from_json(data.get("holder")))


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


class Lease(ClosesOnExit):
    """A named lease this process holds on a workspace; a context manager that releases it.

    ``held`` is the local view (not released and not expired by the clock); only
    :meth:`renew` checks the stored lease.
    """

    def __init__(
        self,
        store: LeaseStore,
        name: str,
        path: str,
        record: _Record,
        clock: Callable[[], float],
        version: str,
    ) -> None:
        self.name = name
        self.path = path
        self.ttl = record.expires - record.acquired
        self._store = store
        self._record = record
        self._clock = clock
        self._released = False
        # The version our record was written at: while the stored lease has it, the
        # lease is ours (every record carries a fresh token), so renewing and releasing
        # are one conditional request each, with no read first.
        self._version = version

    @property
    def owner(self) -> str:
        """Who holds the lease (host:pid:thread)."""
        return self._record.owner

    @property
    def token(self) -> str:
        """Random token that identifies this acquisition."""
        return self._record.token

    @property
    def expires(self) -> float:
        """Expiry time by the workspace clock (seconds since the epoch)."""
        return self._record.expires

    @property
    def held(self) -> bool:
        """True while not released and not expired by the workspace clock."""
        return not self._released and self._clock() <= self._record.expires

    def renew(self, ttl: float | None = None) -> None:
        """Extend the expiry to now + ``ttl`` (default: the ttl it was taken with).

        Works after the expiry too, as long as nobody has taken the lease over meanwhile;
        LeaseError when it was released or taken over.
        """
        if self._released:
            raise LeaseError(f"workspace lease {self.name!r} was released; take it again")
        ttl = self.ttl if ttl is None else ttl
        if ttl <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl!r}")
        record = dataclasses.replace(self._record, expires=self._clock() + ttl)
        data = record.dumps(self.name)
        version = self._store.put_if(self.path, data, self._version)
        if version is None:
            version = self._renew_from_store(data)
        self._record = record
        self._version = version

    def _renew_from_store(self, data: bytes) -> str:
        """Renew when the stored version is not the one we wrote: maybe a renewal whose
        answer was lost did land (our token, another expiry), maybe someone took over."""
        current = self._store.read_versioned(self.path)
        holder = _Record.loads(current[0]) if current else None
        if current is None or holder is None or holder.token != self.token:
            self._released = True
            who = f"taken over by {holder.owner}" if holder else "released by someone else"
            raise LeaseError(
                f"workspace lease {self.name!r} in {self._store.url} was lost: {who}",
                hint="its ttl was too short for the work; renew more often or raise the ttl",
            )
        if current[0] == data:
            return current[1]  # a repeat of this very write lost to it
        version = self._store.put_if(self.path, data, current[1])
        if version is None:
            now = self._store.read_versioned(self.path)
            if now is None or now[0] != data:  # (equal: a repeat of our write lost to it)
                self._released = True
                raise LeaseError(
                    f"workspace lease {self.name!r} in {self._store.url} was lost while renewing"
                )
            version = now[1]
        return version

    def release(self) -> bool:
        """Delete the stored lease if it is still ours; True when it was deleted.

        Idempotent; never deletes a lease that someone else has taken over. (On S3 a
        lease that is gone already also gives True: a conditional DELETE cannot tell
        that from an earlier attempt of itself that landed.)
        """
        if self._released:
            return False
        self._released = True
        # One conditional DELETE of the version we wrote: it holds our token.
        if self._store.delete_if(self.path, self._version):
            return True
        # Another version: someone else's lease, or ours from a renewal whose answer was lost.
        current = self._store.read_versioned(self.path)
        if current is None or _Record.loads(current[0]).token != self.token:
            return False
        return self._store.delete_if(self.path, current[1])

    def close(self) -> bool:
        """:meth:`release`, so that ``with lease:`` releases it on leaving the block."""
        return self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "not held"
        return f"<Lease {self.name!r} {state} by {self.owner} until {_when(self.expires)}>"


def _try_once(
    store: LeaseStore, name: str, path: str, ttl: float, clock: Callable[[], float]
) -> Lease | _Record:
    """One attempt: the Lease when taken, else the record of the current holder."""
    holder = _Record("<contended>", "", 0.0, clock())
    for _ in range(8):  # loops only when the lease changes between our read and our write
        now = clock()
        mine = _Record(_default_owner(), uuid.uuid4().hex, now, now + ttl, this_process())
        version = store.put_if(path, mine.dumps(name), None)
        if version is not None:
            return Lease(store, name, path, mine, clock, version)
        current = store.read_versioned(path)
        if current is None:
            continue  # released between our create and our read: create again
        holder = _Record.loads(current[0])
        if holder.token == mine.token:
            # Our create landed and a repeat of it (after a dropped connection) lost to it.
            return Lease(store, name, path, mine, clock, current[1])
        gone = holder.expires >= now and holder.holder is not None and holder.holder.is_gone()
        if holder.expires >= now and not gone:
            return holder
        version = store.put_if(path, mine.dumps(name), current[1])
        if version is not None:
            if gone:
                logger.warning(
                    "lease %r in %s was held by %s, a process of this machine that is no "
                    "longer running; taken over before its expiry %s",
                    name,
                    store.url,
                    holder.owner,
                    _when(holder.expires),
                )
            return Lease(store, name, path, mine, clock, version)
    return holder


def acquire_lease(
    store: LeaseStore,
    name: str,
    path: str,
    *,
    ttl: float,
    clock: Callable[[], float],
    timeout: float | None,
    required: bool,
    waiter: Waiter = REAL_TIME,
) -> Lease | None:
    """Take lease ``name`` stored at ``path``.

    ``timeout`` 0 tries once, a positive value polls with jittered backoff for that many
    seconds of ``waiter`` time, None waits forever. A holder that is a dead process of
    this machine is taken over at the first try. When it stays held: LeaseError naming
    the holder if ``required``, else None.
    """
    if ttl <= 0:
        raise ValueError(f"lease ttl must be positive, got {ttl!r}")
    deadline = None if timeout is None else waiter.monotonic() + timeout
    delay = 0.01
    while True:
        result = _try_once(store, name, path, ttl, clock)
        if isinstance(result, Lease):
            return result
        if deadline is not None and waiter.monotonic() >= deadline:
            break
        pause = random.uniform(delay / 2, delay)
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - waiter.monotonic()))
        waiter.sleep(pause)
        delay = min(delay * 1.5, 0.5)
    if not required:
        return None
    waited = "" if not timeout else f" after waiting {timeout:g}s"
    raise LeaseError(
        f"workspace lease {name!r} is held by {result.owner} until {_when(result.expires)}"
        f"{waited} (in {store.url})",
        hint="wait for it to be released or to expire, or pass a timeout to wait for it",
    )
