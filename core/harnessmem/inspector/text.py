"""How the inspector shows text: Markdown without raw HTML, a diff's rows, the query's
words marked, a message's text with its tool calls."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["diff_rows", "marked", "message_text", "render_markdown"]


def render_markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    # commonmark without raw HTML: memory text is shown, never run; markdown-it's link
    # check drops javascript:, vbscript:, file: and data: (but image) links.
    return str(MarkdownIt("commonmark", {"html": False}).render(text))


def diff_rows(old: str, new: str) -> list[tuple[str, str, str]]:
    """(kind, sign, text) of a unified diff: kind is ``add``, ``del``, ``hunk`` or
    ``same``; the sign (``+``, a minus sign U+2212, or a space) apart from the line's
    own text, so that it never runs into a bullet's ``-``."""
    rows = []
    for line in difflib.unified_diff(
        old.splitlines(), new.splitlines(), "older", "newer", lineterm="", n=2
    ):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        if kind == "hunk":
            rows.append((kind, "", line))
        else:
            rows.append((kind, {"add": "+", "del": "\u2212"}.get(kind, " "), line[1:]))
    return rows


def marked(text: str, query: str) -> str:
    """``text`` escaped, with the query's words wrapped in ``<mark>``."""
    from markupsafe import Markup, escape

    words = sorted({w for w in re.findall(r"\w+", query) if len(w) > 1}, key=len, reverse=True)
    escaped = str(escape(text))
    if not words:
        return Markup(escaped)
    pattern = re.compile("|".join(re.escape(str(escape(w))) for w in words), re.IGNORECASE)
    return Markup(pattern.sub(lambda m: f"<mark>{m[0]}</mark>", escaped))


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\n→ {function.get('name', '?')}({function.get('arguments', '')})"
    return text.strip()
