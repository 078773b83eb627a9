"""Run every benchmark: ``python -m bench [--quick] [--only NAME] [--output FILE]``.

Each ``bench/bench_<name>.py`` exposes ``run(quick: bool) -> list[Row]``. The
results, with the machine, the commit and the command, go to
``bench/results.json`` (``bench/results-quick.json`` for ``--quick``).
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
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks.md"
BEGIN = "<!-- BEGIN RESULTS -->"
END = "<!-- END RESULTS -->"


def _modules() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


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


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
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
    return f"{value:.4g} {unit}".strip()


def render_markdown(result: dict[str, Any]) -> str:
    """The results table for docs/benchmarks.md."""
    machine = result["machine"]
    lines = [
        f"Run {result['date']} at commit `{result['commit']}` with `{result['command']}` "
        f"({result['seconds']} s); Python {machine['python']} on {machine['platform']}, "
        f"{machine['cpus']} CPUs.",
        "",
        "| bench | measurement | value | baseline (same run) | baseline value | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(
            f"| {row['bench']} | {row['name']} | {_format(row['value'], row['unit'])} "
            f"| {row['baseline'] or '-'} | {_format(row['baseline_value'], row['unit'])} "
            f"| {ratio} |"
        )
    if result["failures"]:
        lines += ["", "Failed: " + ", ".join(sorted(result["failures"]))]
    return "\n".join(lines) + "\n"


def _update_doc(result: dict[str, Any]) -> None:
    text = DOC.read_text() if DOC.exists() else ""
    if BEGIN not in text or END not in text:
        return
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{render_markdown(result)}{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    parser.add_argument("--only", action="append", choices=_modules(), help="run just these")
    parser.add_argument("--output", type=Path, help="results file (default bench/results.json)")
    args = parser.parse_args(argv)
    names = args.only or _modules()
    output = args.output or HERE / ("results-quick.json" if args.quick else "results.json")

    rows: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    started = time.perf_counter()
    for name in names:
        module = importlib.import_module(f"bench.bench_{name}")
        print(f"== {name}", flush=True)
        try:
            for row in module.run(args.quick):
                data = row.as_dict()
                rows.append(data)
                ratio = "" if data["ratio"] is None else f"  ratio {data['ratio']:.2f}x"
                baseline = ""
                if data["baseline"]:
                    shown = _format(data["baseline_value"], data["unit"])
                    baseline = f"  vs {data['baseline']}: {shown}"
                value = _format(data["value"], data["unit"])
                print(f"   {data['name']}: {value}{baseline}{ratio}", flush=True)
        except Exception:
            failures[name] = traceback.format_exc()
            print(failures[name], file=sys.stderr)
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench" + (" --quick" if args.quick else ""),
        "commit": _commit(),
        "machine": _machine(),
        "seconds": round(time.perf_counter() - started, 1),
        "rows": rows,
        "failures": failures,
    }
    tmp = output.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(output)
    print(f"wrote {output} in {result['seconds']} s")
    if not args.quick and not args.only and args.output is None:
        _update_doc(result)
        print(f"updated {DOC}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
