"""Shared measuring helpers for the benchmarks.

Every figure is reported next to a raw baseline measured in the same run, so
results are ratios that survive a noisy machine.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
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
        """``value / baseline_value``; None without a baseline."""
        if not self.baseline_value:
            return None
        return self.value / self.baseline_value

    def as_dict(self) -> dict[str, Any]:
        """The row as stored in results.json (with its ratio)."""
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


@dataclass
class Series:
    """Curves a benchmark recorded step by step; a full run draws them to ``docs/img``.

    A ``run()`` may return these among its rows. ``slug`` names the picture
    (``docs/img/<slug>.png``); ``lines`` maps each curve's label to its y values
    (x is the step number, from 1); ``log_y`` draws the full run on a log scale;
    ``zoom`` > 0 adds a second panel with the first ``zoom`` steps on a linear scale.
    """

    bench: str
    slug: str
    title: str
    x_label: str
    y_label: str
    lines: dict[str, list[float]] = field(default_factory=dict)
    log_y: bool = False
    zoom: int = 0
    notes: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The series as stored in results.json."""
        return asdict(self)


_WORD = re.compile(r"\w+")


def fts5_or_query(text: str) -> str | None:
    """The plain FTS5 baseline's query: the words of ``text``, lower-cased, each once, quoted
    and OR-ed (None when ``text`` has no word)."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
    return " OR ".join(f'"{w}"' for w in words) or None


def median_seconds(fn: Callable[[], object], *, repeat: int = 7, number: int = 1) -> float:
    """Median wall time of ``number`` calls of ``fn``, over ``repeat`` runs, per call."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def paired_medians(
    fn: Callable[[], object],
    baseline: Callable[[], object],
    *,
    repeat: int = 7,
    number: int = 1,
) -> tuple[float, float]:
    """Median per-call times of ``fn`` and ``baseline``, sampled in alternation.

    Taking one sample of each in turn means a burst of load (another process, a slow
    fsync) hits both sides alike, so their ratio is steadier than with two separate runs.
    """
    ours: list[float] = []
    raw: list[float] = []
    for _ in range(repeat):
        for fn_, samples in ((fn, ours), (baseline, raw)):
            start = time.perf_counter()
            for _ in range(number):
                fn_()
            samples.append((time.perf_counter() - start) / number)
    return statistics.median(ours), statistics.median(raw)


def interleaved_times(
    ours: Callable[[str], object],
    raw: Callable[[str], object],
    queries: list[str],
    rounds: int,
) -> tuple[list[float], list[float]]:
    """Per-query wall times of ``ours`` and ``raw``, each query run by one then the other,
    ``rounds`` times over the list, so a burst of load hits both sides alike."""
    ours_times: list[float] = []
    raw_times: list[float] = []
    for _ in range(rounds):
        for query in queries:
            for fn, samples in ((ours, ours_times), (raw, raw_times)):
                started = time.perf_counter()
                fn(query)
                samples.append(time.perf_counter() - started)
    return ours_times, raw_times


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by nearest rank."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def search_rows(
    bench: str, what: str, ours: list[float], raw: list[float], *, baseline: str, notes: str
) -> list[Row]:
    """The p50 and p95 rows (``search p50, <what>``) of per-query times against the raw ones."""
    return [
        Row(
            bench=bench,
            name=f"search {name}, {what}",
            value=percentile(ours, q),
            unit="s",
            baseline=baseline,
            baseline_value=percentile(raw, q),
            notes=notes,
        )
        for name, q in (("p50", 0.5), ("p95", 0.95))
    ]
