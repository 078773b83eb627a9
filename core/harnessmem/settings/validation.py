"""Turn pydantic validation errors into one line per problem with a dotted path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

_MAX_VALUE_CHARS = 80


def _show(value: Any) -> str:
    text = repr(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + "..."
    return text


def problem_lines(error: ValidationError, prefix: str = "") -> list[str]:
    """One readable line per problem: ``dotted.path: message (got value)``."""
    lines = []
    for item in error.errors(include_url=False):
        parts = [prefix] if prefix else []
        parts.extend(str(p) for p in item.get("loc", ()))
        where = ".".join(p for p in parts if p) or "<root>"
        kind = item.get("type", "")
        if kind == "extra_forbidden":
            message = "unknown setting"
        elif kind == "missing":
            message = "required setting is missing"
        else:
            message = str(item.get("msg", "invalid value"))
            # pydantic prefixes messages of custom validators; the path already says where.
            message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        line = f"{where}: {message}"
        if kind != "missing":
            line += f" (got {_show(item.get('input'))})"
        lines.append(line)
    return lines
