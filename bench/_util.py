"""Shared measuring helpers for the benchmarks.

Every figure is reported next to a raw baseline measured in the same run, so
results are ratios that survive a noisy machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Row:
    """One measurement and the raw operation it is compared against."""

    bench: str
    name: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    notes: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.baseline_value:
            return None
        return self.value / self.baseline_value

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


def median_seconds(fn: Callable[[], object], *, repeat: int = 7, number: int = 1) -> float:
    """Median wall time of ``number`` calls of ``fn``, over ``repeat`` runs, per call."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]
