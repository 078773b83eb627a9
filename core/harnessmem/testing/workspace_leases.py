"""The lease tests of the workspace suite: a lease excludes other holders until it is
released or expires by the injected clock, renews, and ``lock()`` waits for it."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from harnessmem.errors import LeaseError
from harnessmem.testing._workspace_base import WorkspaceSuiteBase
from harnessmem.testing.clock import FakeClock
from harnessmem.workspace import Workspace

__all__ = ["WorkspaceLeaseTests"]


class WorkspaceLeaseTests(WorkspaceSuiteBase):
    """Leases held across instances of one storage."""

    __harnessmem_suite__: ClassVar[bool] = True

    def test_lease_excludes_other_holders(self, workspace: Workspace, clock: FakeClock) -> None:
        """A held lease refuses other holders in this and other instances until released.

        If this fails: the exclusive create (O_EXCL / If-None-Match) is not exclusive.
        """
        other = self._reopen(workspace, clock)
        lease = workspace.lock("maintenance", ttl=30)
        assert lease.held
        with pytest.raises(LeaseError, match=r"'maintenance' is held by .+ until "):
            other.lock("maintenance")
        assert other.try_lock("maintenance") is None
        assert workspace.try_lock("maintenance") is None
        with other.lock("something-else"):
            pass
        assert lease.release() is True
        assert not lease.held
        with other.lock("maintenance") as second:
            assert second.held
        assert workspace.try_lock("maintenance") is not None

    def test_lease_expiry_takeover_with_clock(self, workspace: Workspace, clock: FakeClock) -> None:
        """A lease past its expiry (by the injected clock) is taken over by another instance.

        If this fails: expiry is judged by the wall clock instead of the injected one, or
        the takeover is not a conditional replace.
        """
        other = self._reopen(workspace, clock)
        first = workspace.lock("maintenance", ttl=10)
        clock.advance(9)
        assert other.try_lock("maintenance") is None, "taken over before it expired"
        clock.advance(2)
        assert not first.held
        second = other.lock("maintenance", ttl=10)
        assert second.held
        with pytest.raises(LeaseError, match="lost"):
            first.renew()
        assert first.release() is False, "released a lease someone else holds"
        assert workspace.try_lock("maintenance") is None
        second.release()

    def test_lease_renew_and_release(self, workspace: Workspace, clock: FakeClock) -> None:
        """renew() extends the expiry; release() is idempotent; the context manager releases.

        If this fails: check the conditional write of renew and the token check of release.
        """
        other = self._reopen(workspace, clock)
        lease = workspace.lock("flush", ttl=10)
        clock.advance(8)
        lease.renew()
        assert lease.expires == clock.now + 10
        clock.advance(8)
        assert lease.held
        assert other.try_lock("flush") is None, "a renewed lease was taken over"
        assert lease.release() is True
        assert lease.release() is False
        with pytest.raises(LeaseError):
            lease.renew()
        with pytest.raises(RuntimeError), workspace.lock("flush"):
            raise RuntimeError("boom")
        assert other.try_lock("flush") is not None, "the context manager did not release"

    def test_lock_waits_for_release(self, workspace: Workspace, clock: FakeClock) -> None:
        """lock(timeout=...) keeps polling while the lease is held and gets it once released.

        If this fails: the polling loop gives up early or never re-reads the lease.
        """
        holder = workspace.lock("maintenance")
        attempts = threading.Semaphore(0)
        got: list[bool] = []

        def counting_clock() -> float:
            attempts.release()  # each acquisition attempt reads the clock once
            return clock()

        def wait_for_it() -> None:
            waiter_ws = Workspace.open(
                workspace.url, workspace.storage_options, clock=counting_clock
            )
            with waiter_ws.lock("maintenance", timeout=30) as lease:
                got.append(lease.held)

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        # Two clock reads: the first attempt has finished (and found the lease held).
        assert attempts.acquire(timeout=30)
        assert attempts.acquire(timeout=30)
        holder.release()
        waiter.join()
        assert got == [True]
