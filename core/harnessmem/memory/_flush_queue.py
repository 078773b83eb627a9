"""The background flush queue of ``flush.mode = "background"`` (private).

A bounded queue served by one worker thread. ``after_call`` puts a snapshot of the
messages on it and returns; a full queue makes the caller wait instead of dropping work.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessmem.memory._flush_result import FlushResult

if TYPE_CHECKING:
    from harnessmem.memory.flush import MemoryFlusher

__all__ = ["BackgroundFlushes"]

logger = logging.getLogger("harnessmem.memory.flush")

Message = dict[str, Any]


@dataclass
class _Job:
    session_id: str
    messages: list[Message]
    error: str | None = None
    #: The context of the call that queued it: the flush's span nests under the caller's
    #: span, and its audit record names the caller, as a synchronous flush would.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)


class BackgroundFlushes:
    """A bounded queue and one worker thread; failures are retried, then parked.

    A parked job is not lost: its messages stay behind the session's high-water mark, so
    the next successful flush of the session covers them (and unparks the job); drain()
    retries what is still parked once more and logs what still fails.
    """

    def __init__(self, flusher: MemoryFlusher) -> None:
        self.flusher = flusher
        self.settings = flusher.kernel.settings.flush
        self._jobs: list[_Job] = []
        self._parked: list[_Job] = []
        self._busy = False
        self._draining = threading.Event()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="harnessmem-flush", daemon=True)
        self._thread.start()

    def put(self, session_id: str, messages: list[Message]) -> bool:
        """Queue a job; False once close() started draining (the caller flushes itself)."""
        with self._cond:
            # Backpressure instead of dropping: the caller waits for room.
            while len(self._jobs) >= self.settings.queue_size and not self._draining.is_set():
                self._cond.wait()
            if self._draining.is_set():
                return False
            self._jobs.append(_Job(session_id, messages))
            self._cond.notify_all()
            return True

    def covered(self, session_id: str) -> None:
        with self._cond:
            self._parked = [job for job in self._parked if job.session_id != session_id]

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._draining.is_set():
                    self._cond.wait()
                if not self._jobs:
                    return
                job = self._jobs.pop(0)
                self._busy = True
                self._cond.notify_all()
            try:
                job.context.run(self._run, job)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _run(self, job: _Job) -> None:
        delay = self.settings.retry_delay
        for attempt in range(self.settings.retries + 1):
            try:
                self.flusher.flush(job.messages, session_id=job.session_id, batch=True)
                return
            except Exception as exc:
                job.error = f"{type(exc).__name__}: {exc}"
                logger.warning(
                    "background flush of session %r failed (attempt %d of %d): %s",
                    job.session_id,
                    attempt + 1,
                    self.settings.retries + 1,
                    job.error,
                )
            if attempt < self.settings.retries:
                # Draining does not wait out the back-off: close() should not take minutes.
                self._draining.wait(delay)
                delay *= 2
        with self._cond:
            self._parked.append(job)

    def drain(self, timeout: float | None) -> list[FlushResult]:
        with self._cond:
            self._draining.set()
            self._cond.notify_all()
            done = self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout)
            left = list(self._jobs)
            parked, self._parked = self._parked, []
        self._thread.join(timeout)
        if not done:
            logger.error(
                "close(): %d queued memory flushes did not finish in time (sessions %s); "
                "their messages stay unflushed",
                len(left),
                sorted({job.session_id for job in left}),
            )
        results = []
        for job in parked:
            try:
                results.append(
                    job.context.run(self.flusher.flush, job.messages, session_id=job.session_id)
                )
            except Exception as exc:
                logger.error(
                    "memory flush of session %r failed again at close (%s: %s; first error: "
                    "%s); its messages were not written to the daily log",
                    job.session_id,
                    type(exc).__name__,
                    exc,
                    job.error,
                )
                results.append(FlushResult(job.session_id, "failed", error=str(exc)))
        return results
