"""One thread that runs the background maintenance ticks of many harnesses.

A :class:`~harnessmem.maintenance.MaintenanceScheduler` built with ``runner=`` joins the
runner when it starts instead of starting a thread of its own; the runner asks each of
its schedulers in turn (:meth:`~harnessmem.maintenance.MaintenanceScheduler.poll`)
whether a tick is due and runs the first that is, then moves that scheduler to the back
of the line. So a pool of a thousand tenants costs one thread, a tenant never has two
background ticks at once, and one busy tenant does not starve the others. It waits on a
condition (real seconds, at most a minute), woken when a scheduler is added, asks for a
tick or stops: tests move a fake clock and call :meth:`MaintenanceRunner.wake`.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harnessmem.maintenance import MaintenanceScheduler

__all__ = ["MaintenanceRunner"]

logger = logging.getLogger("harnessmem.maintenance")

_MAX_WAIT = 60.0  # seconds between looks at the clock (a stepped clock delays a tick so much)


class MaintenanceRunner:
    """Runs the background ticks of the schedulers added to it, one at a time, in turn."""

    def __init__(self, name: str = "harnessmem-maintenance-runner") -> None:
        self.name = name
        self._cond = threading.Condition()
        self._schedulers: deque[MaintenanceScheduler] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._woken = False
        #: Background ticks run so far, over every scheduler.
        self.ticks = 0

    @property
    def running(self) -> bool:
        """Whether the thread is alive (or not started yet) and not told to stop."""
        thread = self._thread
        return not self._stopping and (thread is None or thread.is_alive())

    def __len__(self) -> int:
        with self._cond:
            return len(self._schedulers)

    def add(self, scheduler: MaintenanceScheduler) -> None:
        """Work through ``scheduler``'s ticks too; starts the thread on first use."""
        with self._cond:
            if self._stopping:
                return
            self._schedulers.append(scheduler)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._woken = True
            self._cond.notify_all()

    def wake(self) -> None:
        """Look at every scheduler now (one asked for a tick, or a fake clock moved)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def on_runner_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def wait_for_ticks(self, count: int, timeout: float) -> bool:
        """Block until ``count`` ticks have run in all (or ``timeout`` seconds)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.ticks >= count, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """End the thread after the tick it runs, if any; True when it has ended in time."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    if self._stopping:
                        return
                    self._woken = False
                    line = list(self._schedulers)
                soonest = _MAX_WAIT
                for scheduler in line:
                    trigger, delay = scheduler.poll()
                    if delay is None:  # stopped, or its harness is gone
                        self._drop(scheduler)
                        continue
                    if trigger is not None:
                        self._to_the_back(scheduler)
                        scheduler.run_polled(trigger)
                        with self._cond:
                            self.ticks += 1
                            self._cond.notify_all()
                        break
                    soonest = min(soonest, max(delay, 0.0))
                else:
                    with self._cond:
                        if not self._woken and not self._stopping:
                            # Real seconds: a fake clock that never moves just means no tick.
                            self._cond.wait(soonest)
        except BaseException:  # pragma: no cover - a bug; say so instead of dying silently
            logger.exception("the maintenance runner %s stopped", self.name)

    def _drop(self, scheduler: MaintenanceScheduler) -> None:
        with self._cond:
            if scheduler in self._schedulers:
                self._schedulers.remove(scheduler)

    def _to_the_back(self, scheduler: MaintenanceScheduler) -> None:
        with self._cond:
            if scheduler in self._schedulers:
                self._schedulers.remove(scheduler)
                self._schedulers.append(scheduler)
