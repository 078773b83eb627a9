"""``FakeClock``: an injectable clock that moves only when a test says so, for tests that
never sleep (lease expiry, back-off, maintenance intervals)."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A clock for lease expiry that moves only when told; call it for the time."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.now += seconds
