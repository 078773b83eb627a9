"""Run every benchmark: ``python -m bench [--quick] [--only NAME] [--output FILE] [--render]``.

Each ``bench/bench_<name>.py`` exposes ``run(quick: bool) -> list[Row | Series]``; a
new module is picked up by its file name. The results, with the machine, the commit,
the command and each module's wall time, go to ``bench/results.json``
(``bench/results-quick.json`` for ``--quick``). A full run of every module with the
default output also draws each ``Series`` to ``docs/img/<slug>.png`` and rewrites the
results section of ``docs/benchmarks.md`` and its table of issue 35's goals
(:mod:`bench._goals`), so no figure on that page is typed by hand; ``--render`` rewrites
those two from the stored results without running anything.
The exit status is 1 when any module failed (an exception, including on import).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import _goals, _plot
from bench._util import Row, Series

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks.md"
BEGIN = "<!-- BEGIN RESULTS -->"
END = "<!-- END RESULTS -->"
GOALS_BEGIN = "<!-- BEGIN GOALS -->"
GOALS_END = "<!-- END GOALS -->"


# The headline measurements first (the order of the page); any other module follows by name.
ORDER = [
    "import",
    "turn",
    "tokens",
    "compaction",
    "upkeep",
    "extractive",
    "facts",
    "probes",
    "locomo",
    "memorybank",
    "recall",
    "index",
    "postgres",
    "tenants",
    "s3",
    "fleet",
    "workspace",
    "eviction",
    "observability",
]


def _modules() -> list[str]:
    """The bench/bench_<name>.py modules, in the order of ORDER, then by name."""
    found = {p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True, check=True
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _proc_field(path: str, key: str) -> str | None:
    """The value of ``key:`` in a /proc file (Linux), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == key:
                    return value.strip()
    except OSError:
        pass
    return None


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _machine(load_at_start: float | None = None) -> dict[str, Any]:
    cpu = _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()
    memory = _proc_field("/proc/meminfo", "MemTotal")  # "24684096 kB"
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
        # Other processes skew timings (less so their ratios): one-minute load averages.
        "load_average": [load_at_start, _load()] if load_at_start is not None else None,
    }


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.1f} µs"
        if value < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.2f} s"
    if abs(value) >= 10_000:
        return f"{value:,.0f} {unit}".strip()
    return f"{value:.4g} {unit}".strip()


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if ratio >= 10:
        return f"{ratio:.1f}x"
    if ratio >= 0.1:
        return f"{ratio:.2f}x"
    return f"{ratio:.2g}x"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: dict[str, Any], images: str = "img") -> str:
    """The results section of docs/benchmarks.md: the run, then a table per module.

    Each module's pictures follow its table; ``images`` is their folder relative to the page.
    """
    machine = result["machine"]
    memory = f", {machine['memory_gib']} GiB" if machine.get("memory_gib") else ""
    load = machine.get("load_average")
    timings = result.get("timings", {})
    per_module = ", ".join(f"{name} {seconds} s" for name, seconds in timings.items())
    lines = [
        f"- **Command:** `{result['command']}`",
        f"- **Date:** {result['date']}",
        f"- **Commit:** `{result['commit']}`",
        f"- **Machine:** {machine['processor']}, {machine['cpus']} CPUs{memory}; "
        f"Python {machine['python']} on {machine['platform']}"
        + (f"; load average {load[0]} / {load[1]} (start / end of the run)" if load else ""),
        f"- **Wall time:** {result['seconds']} s" + (f" ({per_module})" if per_module else ""),
    ]
    if result.get("empty"):
        lines.append(f"- **No rows** (skipped: see the run's output): {', '.join(result['empty'])}")
    if result["failures"]:
        lines.append(f"- **Failed:** {', '.join(sorted(result['failures']))}")
    benches = list(dict.fromkeys(row["bench"] for row in result["rows"]))
    pictures = result.get("series", [])
    for bench in benches:
        lines += [
            "",
            f"#### {bench}",
            "",
            "| measurement | value | baseline (same run) | baseline value | ratio | notes |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in result["rows"]:
            if row["bench"] != bench:
                continue
            lines.append(
                f"| {_cell(row['name'])} | {_format(row['value'], row['unit'])} "
                f"| {_cell(row['baseline'] or '-')} "
                f"| {_format(row['baseline_value'], row['unit'])} "
                f"| {_ratio(row['ratio'])} | {_cell(row.get('notes') or '')} |"
            )
        for series in pictures:
            if series["bench"] == bench:
                lines += _picture(series, images)
    for series in pictures:
        if series["bench"] not in benches:
            lines += _picture(series, images)
    return "\n".join(lines) + "\n"


def _picture(series: dict[str, Any], images: str) -> list[str]:
    return [
        "",
        f"![{series['title']}]({images}/{series['slug']}.png)",
        "",
        f"*{series['title']}.* {series['notes']}".rstrip(),
    ]


def _update_doc(result: dict[str, Any]) -> None:
    """Rewrite the results section and the goals table of docs/benchmarks.md from ``result``."""
    text = DOC.read_text() if DOC.exists() else ""
    text = _replaced(text, BEGIN, END, render_markdown(result))
    text = _replaced(text, GOALS_BEGIN, GOALS_END, _goals.render_goals(result))
    DOC.write_text(text)


def _replaced(text: str, begin: str, end: str, section: str) -> str:
    """``text`` with what lies between ``begin`` and ``end`` replaced (unchanged without them)."""
    if begin not in text or end not in text:
        return text
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{section}{end}{tail}"


def _render(output: Path) -> int:
    """``--render``: the page's sections again from the stored results of a full run."""
    try:
        result = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        reason = f"cannot read the results in {output}: {exc}"
        print(f"--render: {reason}; page unchanged", file=sys.stderr)
        return 1
    if result.get("command") != "python -m bench":
        shown = result.get("command")
        print(f"{output} holds no full run ({shown!r}); page unchanged", file=sys.stderr)
        return 1
    _update_doc(result)
    print(f"updated {DOC} from {output} ({result['commit']}, {result['date']})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    parser.add_argument("--only", action="append", choices=_modules(), help="run just these")
    parser.add_argument("--output", type=Path, help="results file (default bench/results.json)")
    parser.add_argument(
        "--render",
        action="store_true",
        help="run nothing: rewrite the results and goals sections of docs/benchmarks.md from "
        "the stored results of the last full run (after changing how they are rendered)",
    )
    args = parser.parse_args(argv)
    if args.render:
        return _render(args.output or HERE / "results.json")
    names = args.only or _modules()
    output = args.output or HERE / ("results-quick.json" if args.quick else "results.json")

    rows: list[dict[str, Any]] = []
    series: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    timings: dict[str, float] = {}
    empty: list[str] = []
    started = time.perf_counter()
    load_at_start = _load()
    for name in names:
        print(f"== {name}", flush=True)
        module_started = time.perf_counter()
        count = 0
        try:
            module = importlib.import_module(f"bench.bench_{name}")
            for item in module.run(args.quick):
                if isinstance(item, Series):
                    series.append(item.as_dict())
                    print(f"   series {item.slug}: {item.title}", flush=True)
                    continue
                count += 1
                rows.append(_report(item))
        except Exception:
            failures[name] = traceback.format_exc()
            print(failures[name], file=sys.stderr)
        else:
            if not count:
                empty.append(name)
        timings[name] = round(time.perf_counter() - module_started, 1)
        print(f"   ({timings[name]} s)", flush=True)
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": _command(args),
        "commit": _commit(),
        "machine": _machine(load_at_start),
        "seconds": round(time.perf_counter() - started, 1),
        "timings": timings,
        "rows": rows,
        "series": series,
        "empty": empty,
        "failures": failures,
    }
    full = not args.quick and not args.only and args.output is None
    with tempfile.TemporaryDirectory(prefix="bench-img-") as scratch:
        # Only a full run replaces docs/img; other runs draw to a scratch folder, so that
        # a broken plot still fails the smoke run.
        folder = _plot.IMAGES if full else Path(scratch)
        for curve in series:
            try:
                drawn = _plot.draw(curve, folder, subtitle=_plot.subtitle_of(result))
                print(f"drew {drawn}" if full else f"drew {curve['slug']} (not kept)")
            except Exception:
                failures[f"plot {curve['slug']}"] = traceback.format_exc()
                print(failures[f"plot {curve['slug']}"], file=sys.stderr)
    tmp = output.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(output)
    print(f"wrote {output} in {result['seconds']} s")
    if full:
        _update_doc(result)
        print(f"updated {DOC}")
    if empty:
        print(f"no rows from: {', '.join(empty)} (skipped; see above)")
    if failures:
        print(f"FAILED: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run."""
    parts = ["python -m bench"]
    if args.quick:
        parts.append("--quick")
    parts += [f"--only {name}" for name in args.only or ()]
    if args.output is not None:
        parts.append(f"--output {args.output}")
    return " ".join(parts)


def _report(row: Row) -> dict[str, Any]:
    """The row as stored, after printing it."""
    data = row.as_dict()
    ratio = "" if data["ratio"] is None else f"  ratio {_ratio(data['ratio'])}"
    baseline = ""
    if data["baseline"]:
        shown = _format(data["baseline_value"], data["unit"])
        baseline = f"  vs {data['baseline']}: {shown}"
    value = _format(data["value"], data["unit"])
    print(f"   {data['name']}: {value}{baseline}{ratio}", flush=True)
    return data


if __name__ == "__main__":
    sys.exit(main())
