"""The inspector's charts: inline SVG bars with labelled axes, no script."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bar_chart", "compaction_chart", "upkeep_chart"]


def bar_chart(
    bars: Sequence[tuple[str, int, str]], *, what: str, along: str, width: int = 640
) -> str:
    """An inline SVG bar chart with labelled axes: one bar per ``(label, value, title)``,
    ``what`` the values (the y axis), ``along`` the bars (the x axis)."""
    from markupsafe import Markup, escape

    if not bars:
        return Markup("")
    height, left, bottom, top_pad = 170, 64, 34, 16
    plot_w, plot_h = width - left - 8, height - bottom - top_pad
    top = max(value for _, value, _ in bars) or 1
    step = plot_w / len(bars)
    every = max(1, len(bars) // 12)  # at most a dozen labels under the bars
    parts = [
        f'<line class="axis" x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{top_pad + plot_h}" x2="{width - 8}" '
        f'y2="{top_pad + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{top_pad + 4}" text-anchor="end">{top:,}</text>',
        f'<text class="tick" x="{left - 6}" y="{top_pad + plot_h}" text-anchor="end">0</text>',
        f'<text class="axis-label" x="12" y="{top_pad + plot_h / 2:.0f}" '
        f'transform="rotate(-90 12 {top_pad + plot_h / 2:.0f})" text-anchor="middle">'
        f"{escape(what)}</text>",
        f'<text class="axis-label" x="{left + plot_w / 2:.0f}" y="{height - 2}" '
        f'text-anchor="middle">{escape(along)}</text>',
    ]
    for i, (label, value, title) in enumerate(bars):
        tall = max(1.0, plot_h * value / top)
        x = left + i * step + step * 0.15
        parts.append(
            f'<rect x="{x:.1f}" y="{top_pad + plot_h - tall:.1f}" width="{step * 0.7:.1f}" '
            f'height="{tall:.1f}"><title>{escape(title)}</title></rect>'
        )
        if i % every == 0:
            parts.append(
                f'<text class="tick" x="{x + step * 0.35:.1f}" y="{top_pad + plot_h + 14}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(what)} by {escape(along)}">{"".join(parts)}</svg>'
    )


def compaction_chart(rows: Sequence[Mapping[str, Any]]) -> str:
    """The tokens each compaction of a session moved out of the context, as bars."""
    bars = [
        (
            str(number),
            int(row["tokens"]),
            f"{row['when']}: {row['messages']} messages, {row['tokens']:,} tokens",
        )
        for number, row in enumerate(rows, 1)
    ]
    return bar_chart(bars, what="tokens moved out", along="compaction")


def upkeep_chart(per_day: Mapping[str, Any]) -> str:
    """The tokens memory upkeep sent to its models each day, as bars."""
    bars = [
        (day[5:], int(totals.total_tokens), f"{day}: {totals.calls:,} calls, "
         f"{totals.total_tokens:,} tokens")
        for day, totals in per_day.items()
    ]  # fmt: skip
    return bar_chart(bars, what="upkeep tokens", along="day")
