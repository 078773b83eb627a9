"""How a workspace passes time while it waits: for a held lease, and between two
conditional writes that lost to another writer.

Real time by default (:data:`REAL_TIME`), also when the workspace's clock is a fake one,
which may never move. A test sets ``Workspace.lease_waiter`` to a :class:`Waiter` of its own
that records each pause, or moves a fake clock, instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["REAL_TIME", "Waiter"]


@dataclass(frozen=True)
class Waiter:
    """``monotonic`` reads the time a wait is measured in; ``sleep`` waits that long."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


#: The waiter of every workspace unless one is set: the process's clock and sleep.
REAL_TIME = Waiter()
