"""Pictures of the curves a benchmark run recorded (``Series`` in results.json).

A full ``python -m bench`` calls ``draw`` for every series of the run, so each picture in
``docs/img`` comes from the same run as the table beside it. ``python -m bench._plot
bench/results.json`` (see ``main``) redraws them from a results file without re-running.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "img"
# A colour-blind-safe palette (Okabe-Ito): grey first, for the baseline curve.
_COLOURS = ["#7f7f7f", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00"]


def draw(series: dict[str, Any], folder: Path = IMAGES, *, subtitle: str = "") -> Path:
    """Draw one series (as stored in results.json) to ``folder/<slug>.png``; the path."""
    import matplotlib

    matplotlib.use("Agg")  # no display, and no GUI toolkit needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    zoom = int(series.get("zoom") or 0)
    panels = 2 if zoom else 1
    figure, axes = plt.subplots(
        1,
        panels,
        figsize=(6.2 * panels, 4.4),
        squeeze=False,
        gridspec_kw={"width_ratios": [3, 2][:panels]},
    )
    thousands = FuncFormatter(lambda value, _: f"{value:,.0f}")
    for column, ax in enumerate(axes[0]):
        zoomed = column == 1
        for index, (label, values) in enumerate(series["lines"].items()):
            shown = values[:zoom] if zoomed else values
            ax.plot(
                range(1, len(shown) + 1),
                shown,
                label=label,
                color=_COLOURS[index % len(_COLOURS)],
                linewidth=(1.4 if zoomed else 0.9) if index else 2.0,
                linestyle="--" if index == 0 else "-",
            )
        ax.set_xlabel(series["x_label"])
        ax.grid(True, which="major", alpha=0.3)
        ax.xaxis.set_major_formatter(thousands)
        if zoomed:
            ax.set_title(f"first {zoom} calls, linear scale", fontsize=10)
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(thousands)
        else:
            ax.set_ylabel(series["y_label"])
            if series.get("log_y"):
                ax.set_yscale("log")
                ax.set_title("all calls, log scale" if zoom else "", fontsize=10)
            ax.yaxis.set_major_formatter(thousands)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=9)
    title = series["title"] + (f"\n{subtitle}" if subtitle else "")
    figure.suptitle(title, fontsize=11)
    # Room at the bottom for the legend, one row per three curves.
    figure.tight_layout(rect=(0, 0.06 * -(-len(labels) // 3), 1, 1))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{series['slug']}.png"
    tmp = path.with_suffix(".png.tmp")
    # No software/date metadata, so a redraw of the same figures gives the same bytes.
    figure.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(figure)
    tmp.replace(path)
    return path


def subtitle_of(result: dict[str, Any]) -> str:
    """The run a picture comes from, in one line."""
    return f"{result['command']}, {result['date'][:10]}, commit {result['commit']}"


def main(argv: Sequence[str] | None = None) -> int:
    """Redraw every series of a results file."""
    parser = argparse.ArgumentParser(prog="python -m bench._plot", description=__doc__)
    parser.add_argument("results", type=Path, nargs="?", default=IMAGES.parent.parent / "bench")
    parser.add_argument("--folder", type=Path, default=IMAGES)
    args = parser.parse_args(argv)
    source = args.results / "results.json" if args.results.is_dir() else args.results
    result = json.loads(source.read_text(encoding="utf-8"))
    for series in result.get("series", []):
        print(draw(series, args.folder, subtitle=subtitle_of(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
