"""The temporal benchmark's reading of LoCoMo answers and of memory lines."""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def temporal(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/bench_temporal.py``, imported from the checkout (bench/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.bench_temporal")


def _days(spans: list[object]) -> list[tuple[str, str]]:
    return [(s.first.isoformat(), s.last.isoformat()) for s in spans]  # type: ignore[attr-defined]


def test_answers_name_days_months_years_and_relative_days(temporal: ModuleType) -> None:
    spans = temporal.answer_spans
    assert _days(spans("7 May 2023")) == [("2023-05-07", "2023-05-07")]
    assert _days(spans("May 7th, 2023")) == [("2023-05-07", "2023-05-07")]
    assert _days(spans("June 2023")) == [("2023-06-01", "2023-06-30")]
    assert _days(spans("2022")) == [("2022-01-01", "2022-12-31")]
    # Sunday before Thursday 25 May 2023 is 21 May; the week before 9 June is 29 May-4 June.
    assert _days(spans("The sunday before 25 May 2023")) == [
        ("2023-05-25", "2023-05-25"),
        ("2023-05-21", "2023-05-21"),
    ]
    assert ("2023-05-29", "2023-06-04") in _days(spans("The week before 9 June 2023"))
    assert spans("4 years") == []
    assert spans("10 years ago") == []


def test_a_line_holds_a_date_in_any_spelling(temporal: ModuleType) -> None:
    day = temporal.Span(dt.date(2023, 5, 7), dt.date(2023, 5, 7))
    assert day.held_by("- Caroline went to a support group on 2023-05-07.")
    assert day.held_by("Caroline went there on 7 May 2023")
    assert day.held_by("on May 7, 2023")
    assert not day.held_by("on 2023-05-08 (2023-05-17)")
    month = temporal.Span(dt.date(2023, 6, 1), dt.date(2023, 6, 30))
    assert month.held_by("camping in June 2023")
    assert month.held_by("camping on 2023-06-11")
    assert not month.held_by("camping in July 2023")
    year = temporal.Span(dt.date(2022, 1, 1), dt.date(2022, 12, 31))
    assert year.held_by("painted it in 2022")
    assert not year.held_by("room 20221 is free")


def test_the_fact_must_be_named_on_the_line(temporal: ModuleType) -> None:
    wanted = temporal.content_words("When did Melanie paint a sunrise?", {"Melanie"})
    assert wanted == {"paint", "sunri"}
    assert temporal.with_fact("- Melanie painted the lake sunrise in 2022.", wanted)
    assert not temporal.with_fact("- Melanie ran a charity race in 2022.", wanted)


DAY_FIRST = (
    "## 2026-12-03\n- Staging runs on port 5433.\n\n"
    "### Decisions\n- We decided to pin the fixtures.\n\n"
    "## 2026-12-05\n- We ship on Thursday.\n"
)
SECTION_FIRST = (
    "## Facts\n\n### 2026-12-03\n- Staging runs on port 5433.\n\n### 2026-12-05\n"
    "- We ship on Thursday.\n\n## Decisions\n\n### 2026-12-03\n- We decided to pin the fixtures.\n"
)


@pytest.mark.parametrize("layout", [DAY_FIRST, SECTION_FIRST])
def test_the_dates_cost_is_counted_against_the_undated_layout(
    temporal: ModuleType, tmp_path: Path, layout: str
) -> None:
    """Either layout dates every bullet, and its baseline is the same undated text."""
    from harnessmem.tokens import TokenCounter

    (tmp_path / "MEMORY.md").write_text(layout, encoding="utf-8")
    undated = (
        "## Facts\n- Staging runs on port 5433.\n- We ship on Thursday.\n\n"
        "## Decisions\n- We decided to pin the fixtures.\n"
    )
    dated, bare = temporal.date_tokens(tmp_path)
    assert (dated, bare) == (TokenCounter().count_text(layout), TokenCounter().count_text(undated))
    assert temporal.dated_share(temporal.memory_lines(tmp_path)[1]) == 1.0
