"""Exponential back-off for an upkeep model that keeps failing.

A summariser or flush model that fails (an error, or an answer the harness rejects) is
not asked again on the very next occasion: after the n-th failure in a row the next
``min(2 ** (n - 1), cap)`` occasions skip it (1, 2, 4, ... up to ``cap``), then it is
asked once more. A success resets the count. Occasions, not seconds, are counted, so the
back-off needs no clock and behaves the same in a replay as in a live session.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffState"]


@dataclass(frozen=True)
class BackoffState:
    """A snapshot: ``failures`` in a row, ``skipping`` occasions left before the next try,
    ``last_error`` of the latest failure ("" after a success)."""

    failures: int = 0
    skipping: int = 0
    last_error: str = ""

    def describe(self) -> str:
        if not self.failures:
            return "ok"
        wait = f"; skipped for the next {self.skipping}" if self.skipping else "; asked next time"
        return f"{self.failures} failure(s) in a row{wait} (last: {self.last_error})"


class Backoff:
    """The back-off of one model job (one session's summaries, say); thread-safe."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._state = BackoffState()
        self._lock = threading.Lock()

    @property
    def state(self) -> BackoffState:
        return self._state

    def ready(self) -> bool:
        """Whether to ask the model on this occasion; a skipped occasion is counted."""
        with self._lock:
            state = self._state
            if state.skipping <= 0:
                return True
            self._state = BackoffState(state.failures, state.skipping - 1, state.last_error)
            return False

    def failed(self, error: str) -> BackoffState:
        """Record a failure; the next occasions skip the model (none when ``cap`` is 0)."""
        with self._lock:
            failures = self._state.failures + 1
            skip = min(2 ** min(failures - 1, 30), self.cap) if self.cap > 0 else 0
            self._state = BackoffState(failures, skip, error[:300])
            return self._state

    def succeeded(self) -> None:
        with self._lock:
            self._state = BackoffState()
