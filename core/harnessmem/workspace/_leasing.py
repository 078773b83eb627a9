"""The leases of a workspace (:meth:`Workspace.lock`, :meth:`Workspace.try_lock`): the part
of :class:`~harnessmem.workspace.Workspace` that excludes other holders across threads,
processes and replicas (the records themselves: :mod:`harnessmem.workspace._leases`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from harnessmem.layout import lease_path
from harnessmem.workspace._leases import Lease, acquire_lease
from harnessmem.workspace.waiter import Waiter

if TYPE_CHECKING:
    from harnessmem.workspace.store import WorkspaceStore

__all__ = ["Leasing"]


class Leasing:
    """Named leases on the workspace's store, timed by the workspace clock."""

    _store: WorkspaceStore
    clock: Callable[[], float]
    lease_waiter: Waiter

    def _lease_path(self, name: str) -> str:
        return self._store.join(lease_path(name))

    def lock(self, name: str, ttl: float = 60.0, *, timeout: float | None = 0) -> Lease:
        """Take the named lease, excluding other holders across threads, processes, replicas.

        Acquired on call; use as ``with ws.lock("maintenance"):`` to release on exit.
        ``timeout`` 0 tries once, a positive value waits that many seconds, None waits
        forever; LeaseError (naming the holder and its expiry) when still held. A lease
        whose expiry has passed by the workspace clock is taken over, and so is one held
        by a process of this machine that is no longer running (see ``_holders``).
        """
        lease = acquire_lease(
            self._store,
            name,
            self._lease_path(name),
            ttl=ttl,
            clock=self.clock,
            timeout=timeout,
            required=True,
            waiter=self.lease_waiter,
        )
        assert lease is not None
        return lease

    def try_lock(self, name: str, ttl: float = 60.0) -> Lease | None:
        """Take the named lease if it is free (or expired); None when someone holds it."""
        return acquire_lease(
            self._store,
            name,
            self._lease_path(name),
            ttl=ttl,
            clock=self.clock,
            timeout=0,
            required=False,
        )
