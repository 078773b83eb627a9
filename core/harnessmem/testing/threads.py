"""``run_at_once``: start several calls together, to race them against each other."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

__all__ = ["run_at_once"]


def run_at_once(
    calls: Sequence[Callable[[], object]], timeout: float = 60.0
) -> list[BaseException]:
    """Run every call in a thread of its own, all released by one barrier so that they
    start together; wait for them (each up to ``timeout`` seconds) and return what they
    raised, in no particular order. A thread still running after its wait is an error
    too, so a hung race fails the test instead of leaving a thread behind unnoticed."""
    start = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            start.wait(timeout)
            call()
        except BaseException as exc:  # handed to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,), daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            errors.append(TimeoutError(f"a call raced by run_at_once still ran after {timeout}s"))
    return errors
