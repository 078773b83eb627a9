"""Turn pydantic validation errors into one line per problem with a dotted path; validate
a backend's or a plugin's options with its own model."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")

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


def parse_options(
    model: type[M], raw: Mapping[str, Any] | BaseModel | None, *, where: str, owner: str
) -> M:
    """``raw`` validated with ``model``; else a ``ConfigError`` with one line per problem.

    ``where`` is the dotted setting that holds the options (``index.options``,
    ``plugins.settings.wordfilter``); ``owner`` names what they are for in the message
    (``SQLiteIndex``, ``plugin 'wordfilter'``). A misspelt key gets a did-you-mean with
    its dotted path; the hint lists the valid keys.
    """
    from pydantic import ValidationError

    from harnessmem.errors import ConfigError

    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as exc:
        problems = problem_lines(exc, where)
        known = list(model.model_fields)
        for number, item in enumerate(exc.errors(include_url=False)):
            loc = item.get("loc", ())
            if item.get("type") == "extra_forbidden" and len(loc) == 1:
                close = difflib.get_close_matches(str(loc[0]), known, n=1)
                if close:
                    problems[number] += f"; did you mean '{where}.{close[0]}'?"
        raise ConfigError(
            f"invalid options for {owner} ({where}): " + "; ".join(problems),
            hint=f"the options of {owner} are: {', '.join(known) or 'none'}",
            problems=problems,
        ) from None
