"""The handlers behind the memory tools: arguments checked, the kernel asked, the answer
bounded (see :mod:`harnessmem.tools` for what each tool does and how errors come back).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from harnessmem.backends.base import SearchHit, SearchMode, SearchTimeout, check_dates
from harnessmem.errors import ForgetError, MessageFormatError, ModelError, PathNotAllowed
from harnessmem.messages import check_messages
from harnessmem.tools.schemas import (
    DEFAULT_LIMIT,
    FLUSH_SESSION,
    FORGET_LIMIT,
    FORGET_TOOL,
    GET_DEFAULT_LINES,
    GET_MAX_CHARS,
    GET_MAX_LINES,
    HIT_CHARS,
    LIMIT_MAX,
    OUTPUT_CHARS,
    QUERY_MAX_CHARS,
    SAVE_MAX_CHARS,
    ToolResult,
)

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel

__all__ = ["call_tool", "format_hits", "run_tool"]

_SINGULAR = {"memories": "memory", "messages": "message"}
_MODES: dict[str, SearchMode] = {"any": "any", "all": "all", "phrase": "phrase"}


class _ArgumentError(ValueError):
    """An argument the model should correct; its message goes back to the model."""


class _Refusal(Exception):
    """A call the tool cannot serve as asked; its message is the whole ``Error: ...`` text."""


def _text(
    args: Mapping[str, Any], key: str, *, required: bool = True, max_chars: int | None = None
) -> str | None:
    value = args.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _ArgumentError(f"'{key}' is required and must be a non-empty string")
        return None
    if not isinstance(value, str):
        raise _ArgumentError(f"'{key}' must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise _ArgumentError(
            f"'{key}' is {len(value):,} characters long; at most {max_chars:,} are taken"
        )
    return value


def _integer(
    args: Mapping[str, Any], key: str, default: int, low: int, high: int, *, most: int | None = None
) -> int:
    """An integer argument: ``default`` when absent; below ``low``, or above the schema's
    declared maximum ``most``, an error; within them, at most ``high`` (a setting may
    serve fewer than the schema allows)."""
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ArgumentError(f"'{key}' must be an integer, got {value!r}")
    if value < low:
        raise _ArgumentError(f"'{key}' must be at least {low}, got {value}")
    if most is not None and value > most:
        raise _ArgumentError(f"'{key}' must be at most {most}, got {value}")
    return min(value, high)


def _location(hit: SearchHit) -> str:
    lines = str(hit.start_line)
    if hit.end_line != hit.start_line:
        lines += f"-{hit.end_line}"
    about = " · ".join(part for part in (hit.date, hit.context) if part)
    also = f"\n(also in {', '.join(hit.also[:3])}{' …' if len(hit.also) > 3 else ''})"
    return f"{hit.path}:{lines}" + (f" · {about}" if about else "") + (also if hit.also else "")


def format_hits(hits: list[SearchHit], query: str, *, what: str, hint: str) -> str:
    """Hits as numbered blocks for a model, within ``OUTPUT_CHARS``."""
    shown = query if len(query) <= 80 else query[:77] + "..."
    if not hits:
        return f'No {what} match "{shown}".' + (f" {hint}" if hint else "")
    if len(hits) == 1:
        noun, _, rest = what.partition(" ")
        what = " ".join(filter(None, (_SINGULAR.get(noun, noun), rest)))
    parts = [f'{len(hits)} {what} for "{shown}", best first:']
    used = len(parts[0])
    for number, hit in enumerate(hits, 1):
        text = hit.content if len(hit.content) <= HIT_CHARS else hit.content[:HIT_CHARS] + " …"
        block = f"\n[{number}] {_location(hit)}\n{text}"
        if used + len(block) > OUTPUT_CHARS - 200:
            parts.append(f"\n({len(hits) - number + 1} more not shown: ask for fewer results)")
            break
        parts.append(block)
        used += len(block)
    return "\n".join(parts)


def _memory_search(kernel: Kernel, args: Mapping[str, Any]) -> str:
    query = _text(args, "query", max_chars=QUERY_MAX_CHARS)
    assert query is not None
    limit = _integer(
        args, "limit", DEFAULT_LIMIT, 1, kernel.settings.index.max_results, most=LIMIT_MAX
    )
    mode = args.get("mode") or "any"
    if mode not in _MODES:
        raise _ArgumentError(f"'mode' must be 'any', 'all' or 'phrase', got {mode!r}")
    since = _text(args, "since", required=False, max_chars=40)
    until = _text(args, "until", required=False, max_chars=40)
    try:
        check_dates(since, until)
    except ValueError as exc:
        raise _ArgumentError(str(exc)) from None
    hits = kernel.searcher.search(
        query, limit, mode=_MODES[mode], since=since, until=until, via="memory_search"
    )
    if not hits and (since or until):
        span = f"{since or '...'} to {until or '...'}"
        return (
            f"No memories match {query!r} dated {span}. Try without the dates, or other keywords."
        )
    return format_hits(
        hits,
        query,
        what="memories",
        hint="Try other or fewer keywords, or session_search for the raw conversations.",
    )


def _session_search(kernel: Kernel, args: Mapping[str, Any]) -> str:
    query = _text(args, "query", max_chars=QUERY_MAX_CHARS)
    assert query is not None
    session_id = _text(args, "session_id", required=False)
    limit = _integer(
        args, "limit", DEFAULT_LIMIT, 1, kernel.settings.index.max_results, most=LIMIT_MAX
    )
    hits = kernel.searcher.search(
        query, limit, source="sessions", session_id=session_id, via="session_search"
    )
    where = f" in session {session_id}" if session_id else ""
    return format_hits(
        hits,
        query,
        what=f"messages{where}",
        hint="Try other or fewer keywords" + (", or all sessions." if session_id else "."),
    )


def _memory_get(kernel: Kernel, args: Mapping[str, Any]) -> str:
    raw_path = _text(args, "path")
    assert raw_path is not None
    path = posixpath.normpath(raw_path) if "\x00" not in raw_path else raw_path
    start = _integer(args, "start_line", 1, 1, 10**9)
    count = _integer(args, "lines", GET_DEFAULT_LINES, 1, GET_MAX_LINES, most=GET_MAX_LINES)
    try:
        # One line more than asked says whether the file goes on.
        rows = kernel.searcher.get(path, start_line=start, lines=count + 1).splitlines()
    except FileNotFoundError:
        raise _Refusal(
            f"Error: {path} does not exist. Use a path exactly as memory_search printed it."
        ) from None
    if not rows:
        total = len(kernel.searcher.get(path).splitlines())
        return f"{path} has {total} lines; start_line {start} is past its end."
    more = len(rows) > count
    out: list[str] = []
    used = 0
    for number, line in enumerate(rows[:count], start):
        row = f"{number}| {line}"
        if out and used + len(row) > GET_MAX_CHARS:
            more = True
            break
        out.append(row if len(row) <= GET_MAX_CHARS else row[:GET_MAX_CHARS] + " …")
        used += len(row) + 1
    last = start + len(out) - 1
    header = f"{path} lines {start}-{last}"
    if more:
        header += f" (more follows: memory_get path={path!r} start_line={last + 1})"
    else:
        header += " (end of file)"
    return header + ":\n" + "\n".join(out)


def _memory_save(kernel: Kernel, args: Mapping[str, Any]) -> str:
    text = _text(args, "text", max_chars=SAVE_MAX_CHARS)
    assert text is not None
    result = kernel.consolidator.save(text)
    message = getattr(result, "message", None)
    if getattr(result, "saved", True) is False and isinstance(message, str):
        return message  # e.g. "Already in MEMORY.md: nothing new to save"
    described = f" ({result})" if result is not None else ""
    note = getattr(result, "left_out_note", "")
    return f"Saved to MEMORY.md{described}." + (f" {note}" if note else "")


def _memory_flush(kernel: Kernel, args: Mapping[str, Any]) -> str:
    messages = args.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _ArgumentError(
            "'messages' is required: the conversation as a non-empty list of chat messages "
            "such as {'role': 'user', 'content': '...'}"
        )
    session_id = _text(args, "session_id", required=False) or FLUSH_SESSION
    try:
        checked = check_messages(messages, "memory_flush")
    except MessageFormatError as exc:
        raise _ArgumentError(exc.message) from None
    try:
        result = kernel.flusher.flush(checked, session_id=session_id)
    except ModelError as exc:
        raise _Refusal(
            f"Error: memory_flush: the model that extracts facts failed ({exc.message}); "
            "nothing was written. Hand the messages over again later."
        ) from None
    if not result.ok:
        raise _Refusal(f"Error: memory_flush {result.status}: {result.error or 'try again'}.")
    counts = (
        f"{result.messages} new message(s) read, {len(result.entries)} fact(s) written, "
        f"{result.duplicates} already on file"
    )
    where = f" to {result.path}" if result.written and result.path else ""
    return f"Flushed session {session_id!r} ({result.status}){where}: {counts}."


def _memory_forget(kernel: Kernel, args: Mapping[str, Any]) -> str:
    if not kernel.settings.tools.forget:
        return (
            f"Error: {FORGET_TOOL} is not available here (tools.forget is off); tell the "
            "user to run `harnessmem forget` instead."
        )
    query = _text(args, "query")
    assert query is not None
    dry_run = args.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise _ArgumentError(f"'dry_run' must be true or false, got {dry_run!r}")

    try:
        result = kernel.eraser.forget(query, dry_run=dry_run, limit=FORGET_LIMIT)
    except ForgetError as exc:
        return f"Error: {FORGET_TOOL}: {exc.message}."
    lines = [f"{result}:"]
    lines += [f"- {r.path}:{r.line} {r.preview}" for r in result.removals]
    return _bounded("\n".join(lines))


def _bounded(text: str) -> str:
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


_HANDLERS: dict[str, Callable[[Kernel, Mapping[str, Any]], str]] = {
    "memory_search": _memory_search,
    "memory_get": _memory_get,
    "session_search": _session_search,
    "memory_save": _memory_save,
    FORGET_TOOL: _memory_forget,
}
_LIFECYCLE_HANDLERS: dict[str, Callable[[Kernel, Mapping[str, Any]], str]] = {
    "memory_flush": _memory_flush,
}


def _arguments(arguments: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            parsed = json.loads(arguments)
        except ValueError as exc:
            raise _ArgumentError(f"the arguments are not valid JSON ({exc})") from None
        arguments = parsed
    if not isinstance(arguments, Mapping):
        raise _ArgumentError(f"the arguments must be a JSON object, got {type(arguments).__name__}")
    for key, value in arguments.items():
        if isinstance(value, str) and not value.isascii():
            _check_encodable(str(key), value)
    return arguments


def _check_encodable(key: str, value: str) -> None:
    """Reject half a character: a JSON ``\\ud83c`` escape without its pair decodes to a
    lone surrogate, which no file, index or log can store as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _ArgumentError(
            f"'{key}' holds half a character at position {exc.start} (the lone surrogate "
            f"{value[exc.start]!r}, e.g. half of an emoji); send it again with the whole "
            "character, or without it"
        ) from None


def run_tool(
    kernel: Kernel,
    name: str,
    arguments: Mapping[str, Any] | str | None,
    *,
    lifecycle: bool = False,
) -> ToolResult:
    """Run memory tool ``name`` with ``arguments`` (a mapping or the JSON text a model sent).

    Returns the tool's text for the model and whether it is an ``Error: ...`` it can act
    on; ``lifecycle`` also serves ``memory_flush``. See the module docstring for what raises.
    """
    handlers = {**_HANDLERS, **_LIFECYCLE_HANDLERS} if lifecycle else _HANDLERS
    handler = handlers.get(name)
    if handler is None:
        raise ValueError(f"unknown memory tool {name!r}; memory tools: {', '.join(handlers)}")
    try:
        return ToolResult(handler(kernel, _arguments(arguments)))
    except _ArgumentError as exc:
        return ToolResult(f"Error: {name}: {exc}.", is_error=True)
    except _Refusal as exc:
        return ToolResult(str(exc), is_error=True)
    except PathNotAllowed as exc:
        return ToolResult(
            f"Error: {exc.message}. memory_get reads MEMORY.md, memory/, sessions/ "
            "and saved tool outputs only.",
            is_error=True,
        )
    except SearchTimeout:
        return ToolResult(
            "Error: the search took too long and was stopped. Use fewer, more specific words.",
            is_error=True,
        )


def call_tool(kernel: Kernel, name: str, arguments: Mapping[str, Any] | str | None) -> str:
    """Run memory tool ``name`` with ``arguments``: :func:`run_tool`'s text alone."""
    return run_tool(kernel, name, arguments).text
