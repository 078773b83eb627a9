"""Closing within a deadline: the one helper the harness, the pool and leases share.

Closing several things (queued flushes, a maintenance tick, backends, the harnesses of a
pool) follows one rule: everything gets its turn even when one of them fails, each wait
takes only the time left of one overall budget, and the first failure is raised afterwards
with the others logged. :class:`Deadline` holds the budget, :class:`Closer` (and
:func:`close_all`) applies the rule, and :class:`ClosesOnExit` gives a ``with`` block that
closes on leaving.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Self

from harnessmem.errors import HarnessMemError

__all__ = ["Closer", "ClosesOnExit", "Deadline", "close_all"]

logger = logging.getLogger("harnessmem.lifetime")

#: The clock of every deadline (seconds, monotonic); tests replace it.
monotonic: Callable[[], float] = time.monotonic


class Deadline:
    """The seconds left of a budget that started when this was made (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = monotonic() + seconds

    def left(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self._end - monotonic())


class Closer:
    """Runs the steps of a close, each even when an earlier one failed; :meth:`finish`
    raises ``HarnessMemError("closing {what} failed: ...")`` from the first failure (the
    others are logged)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.errors: list[Exception] = []

    def run(self, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:  # the other steps still run; finish() reports it
            self.errors.append(exc)

    def finish(self) -> None:
        for later in self.errors[1:]:
            logger.warning("closing %s: another failure: %s", self.what, later)
        if self.errors:
            first = self.errors[0]
            raise HarnessMemError(f"closing {self.what} failed: {first}") from first


def close_all(steps: Iterable[Callable[[], object]], what: str) -> None:
    """Run every step with a :class:`Closer`, then raise the first failure."""
    closer = Closer(what)
    for step in steps:
        closer.run(step)
    closer.finish()


class ClosesOnExit:
    """``with thing:`` calls ``thing.close()`` on leaving the block, error or not."""

    def close(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
