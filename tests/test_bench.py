"""Meta-tests that keep docs/benchmarks.md honest: its results come from a run, not a hand.

The benchmarks themselves run in CI as ``python -m bench --quick`` (see ``.ci/run``); these
tests only check that the page, ``bench/results.json`` and ``docs/img`` agree.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "bench" / "results.json"


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/__main__.py``, imported from the checkout (bench/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench.__main__")


@pytest.fixture
def results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return data


def _section(text: str, runner: ModuleType) -> str:
    begin, end = text.index(runner.BEGIN), text.index(runner.END)
    return text[begin + len(runner.BEGIN) : end].strip("\n") + "\n"


def test_results_section_is_what_results_json_renders_to(
    runner: ModuleType, results: dict[str, Any]
) -> None:
    """The page's results are bench/results.json rendered; nothing typed by hand.

    When it fails: run ``python -m bench`` (a full run rewrites both), or, after changing
    ``render_markdown``, rerun it so that the page and the file come from one run.
    """
    assert _section(PAGE.read_text(encoding="utf-8"), runner) == runner.render_markdown(results)


def test_results_json_holds_a_clean_full_run(results: dict[str, Any]) -> None:
    """bench/results.json is a full run (not --quick, --only or --output) without failures."""
    assert results["command"] == "python -m bench"
    assert results["failures"] == {}
    assert results["rows"], "a full run with no rows"
    for key in ("python", "platform", "processor", "cpus"):
        assert results["machine"].get(key), f"the machine's {key} is not recorded"


def test_every_picture_of_the_run_exists_and_is_on_the_page(results: dict[str, Any]) -> None:
    """Each curve of the run was drawn to docs/img and the page shows it."""
    text = PAGE.read_text(encoding="utf-8")
    assert results["series"], "the full run recorded no curve (the tau-bench replay draws one)"
    for series in results["series"]:
        image = ROOT / "docs" / "img" / f"{series['slug']}.png"
        assert image.read_bytes().startswith(b"\x89PNG"), f"{image} is not a PNG"
        assert f"(img/{series['slug']}.png)" in text


def test_every_bench_module_is_explained_on_the_page(runner: ModuleType) -> None:
    """Each bench/bench_<name>.py has its paragraph in "What each figure means".

    When it fails: add a paragraph naming the module's file to docs/benchmarks.md that says
    what each of its figures measures and what its baseline is.
    """
    text = PAGE.read_text(encoding="utf-8")
    explained = set(re.findall(r"`bench/bench_(\w+)\.py`", text.partition("## What each")[2]))
    missing = sorted(set(runner._modules()) - explained)
    assert not missing, f"docs/benchmarks.md does not explain: {missing}"


def test_table_cells_cannot_break_the_table(runner: ModuleType) -> None:
    """A ``|`` or a newline in a name or a note stays inside its cell."""
    row = {
        "bench": "b",
        "name": "a | b",
        "value": 1.0,
        "unit": "s",
        "baseline": "x\ny",
        "baseline_value": 2.0,
        "ratio": 0.5,
        "notes": "n|m",
    }
    result = {
        "date": "d",
        "command": "c",
        "commit": "k",
        "machine": {"processor": "p", "cpus": 2, "python": "3", "platform": "l"},
        "seconds": 1.0,
        "rows": [row],
        "failures": {},
    }
    table_row = runner.render_markdown(result).splitlines()[-1]
    assert table_row.count(" | ") == 5  # six cells
    assert "a \\| b" in table_row
