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


@pytest.fixture
def goals(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/_goals.py``, imported from the checkout."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench._goals")


def test_goals_table_is_what_results_json_renders_to(
    runner: ModuleType, goals: ModuleType, results: dict[str, Any]
) -> None:
    """Issue 35's goals table is bench/results.json judged by bench/_goals.py: the figures
    and the verdicts come from the run.

    When it fails: ``python -m bench --render`` rewrites it from the stored results.
    """
    text = PAGE.read_text(encoding="utf-8")
    begin, end = text.index(runner.GOALS_BEGIN), text.index(runner.GOALS_END)
    shown = text[begin + len(runner.GOALS_BEGIN) : end].strip("\n") + "\n"
    assert shown == goals.render_goals(results)


def test_every_goal_reads_rows_the_full_run_has(goals: ModuleType, results: dict[str, Any]) -> None:
    """A goal whose row was renamed would show "not measured" for ever: every figure's rows
    are in the stored full run, but for those that say what they need (a package the
    README's set-up leaves out)."""
    rows = {(row["bench"], row["name"]): row for row in results["rows"]}
    for goal in goals.GOALS:
        for figure in (*goal.judged, *goal.beside):
            if figure.number(rows) is None:
                assert figure.needs, f"{goal.measure}: no row {figure.bench}/{figure.name!r}"


def _run_of(*rows: tuple[str, str, float, float | None]) -> dict[str, Any]:
    return {
        "commit": "abc1234",
        "date": "2026-12-06",
        "rows": [
            {"bench": b, "name": n, "value": v, "unit": "s", "ratio": r} for b, n, v, r in rows
        ],
    }


def test_a_goal_is_met_only_when_every_figure_is_within_it(goals: ModuleType) -> None:
    """Each judged figure counts: one over its goal fails the row, a figure's own goal
    overrides the row's, a missing row is "not measured", never "met"."""
    goal = goals.Goal(
        "m",
        1.5,
        (
            goals.Figure("a", "x", "row a"),
            goals.Figure("b", "x", "row b", goal=1.2),
            goals.Figure("c", "x", "row c", of="over", other="row a"),
        ),
    )
    within = {
        ("x", "row a"): {"value": 2.0, "ratio": 1.5},
        ("x", "row b"): {"value": 1, "ratio": 1.2},
    }
    within[("x", "row c")] = {"value": 3.0, "ratio": None}  # 3.0 / 2.0 = 1.5
    assert goals.judge(goal, within) == "met"
    over = {**within, ("x", "row b"): {"value": 1, "ratio": 1.25}}  # under 1.5, over its 1.2
    assert goals.judge(goal, over) == "not met"
    slower = {**within, ("x", "row c"): {"value": 3.2, "ratio": None}}
    assert goals.judge(goal, slower) == "not met"
    missing = {key: row for key, row in within.items() if key != ("x", "row c")}
    assert goals.judge(goal, missing) == "not measured"
    assert goals.judge(goal, {**missing, ("x", "row b"): {"value": 1, "ratio": 9.0}}) == "not met"


def test_the_goals_table_shows_each_figure_of_the_run(goals: ModuleType) -> None:
    """The rendered row holds the run's figures, the goal and the verdict with its reason."""
    name = "search p50, natural queries, 20,000 entries"
    table = goals.render_goals(_run_of(("postgres", name, 0.004, 1.62)))
    row = next(line for line in table.splitlines() if "PostgreSQL search p50" in line)
    assert "| 20,000: 1.62x | 1.5x | not met (2) |" in row
    assert "the backend alone, 20,000: not measured" in row
    assert "`abc1234`" in table


def test_render_from_unreadable_results_says_so_and_leaves_the_page(
    runner: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--render`` with a missing or damaged results file: one line naming the file, exit
    status 1, the page untouched."""
    page = PAGE.read_bytes()
    damaged = tmp_path / "results.json"
    damaged.write_text("{not json", encoding="utf-8")
    for output in (tmp_path / "missing.json", damaged):
        assert runner.main(["--render", "--output", str(output)]) == 1
        assert f"cannot read the results in {output}" in capsys.readouterr().err
    assert PAGE.read_bytes() == page
