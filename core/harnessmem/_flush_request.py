"""What the flush sends its model: the transcript of the new messages and the reference.

The flush pays for every character it sends, on every flush of every conversation, so
both parts are kept to what fact extraction needs:

- :func:`render_transcript` writes the new messages as ``[ROLE]: text`` lines. In its
  *lean* form (``flush.transcript = "lean"``, the default) JSON in tool results and
  tool-call arguments is compacted and long tool results are cut to their head and tail
  (their full text is in the session log or an eviction file already); user messages are
  kept whole up to a generous bound, since that is where most facts are said.
- :func:`related_reference` picks, from MEMORY.md and today's log, the entries that share
  the most content words with the new messages, within a character bound, instead of
  sending both files whole: the model needs the facts it might repeat, not all of them
  (exact repeats are dropped at write time anyway).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harnessmem.prompts import compact_json

__all__ = ["related_reference", "render_transcript"]

#: Bounds of the full transcript (characters): texts, tool results, tool-call arguments.
_FULL: Final = (4_000, 1_000, 500)
#: The lean transcript's bounds: user texts, other texts, tool results, tool-call arguments.
_LEAN_USER_CHARS: Final = 4_000
_LEAN: Final = (1_200, 400, 200)
#: Least score of a related entry: a shared word that at most four entries hold.
_MIN_SCORE: Final = 0.25


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    return f"{text[:head]} …({len(text) - limit} chars cut)… {text[-(limit - head) :]}"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _is_internal(message: Mapping[str, Any]) -> bool:
    """System prompts and harness-made messages (compaction summaries) hold no new facts."""
    if message.get("role") in ("system", "developer"):
        return True
    name = message.get("name")
    return isinstance(name, str) and name.startswith("__")


def render_transcript(messages: Sequence[Mapping[str, Any]], *, lean: bool = False) -> str:
    """The messages as the flush model reads them: ``[ROLE]: text`` lines.

    System messages and harness-internal ones (``name`` starting ``__``) are left out; tool
    calls show as ``[tool_call: name(args)]``, results as ``[tool_result: name] text``;
    long texts are cut in the middle. ``lean`` compacts JSON and cuts tool results, tool
    arguments and the agent's own texts shorter (see the module docstring). Empty when
    nothing has text.
    """
    text_chars, result_chars, args_chars = _LEAN if lean else _FULL
    tool_names: dict[str, str] = {}
    lines = []
    for message in messages:
        if not isinstance(message, Mapping) or _is_internal(message):
            continue
        role = str(message.get("role") or "unknown").upper()
        parts = []
        if role == "TOOL":
            name = message.get("name") or tool_names.get(str(message.get("tool_call_id")), "")
            text = _content_text(message.get("content")).strip()
            if text:
                label = f"[tool_result: {name}]" if name else "[tool_result]"
                shown = compact_json(text) if lean else text
                parts.append(f"{label} {_cut(shown, result_chars)}")
        else:
            text = _content_text(message.get("content")).strip()
            if text:
                limit = _LEAN_USER_CHARS if lean and role == "USER" else text_chars
                parts.append(_cut(text, limit))
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping):
                    continue
                name = str(function.get("name") or "?")
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    tool_names[call["id"]] = name
                args = function.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False, default=str)
                args = (compact_json(args) if lean else args).strip()
                shown = f"({_cut(args, args_chars)})" if args and args != "{}" else ""
                parts.append(f"[tool_call: {name}{shown}]")
        if parts:
            lines.append(f"[{role}]: " + "\n".join(parts))
    return "\n".join(lines)


def related_reference(text: str, transcript: str, limit: int) -> tuple[str, int]:
    """The lines of ``text`` (a memory file) most related to ``transcript``, within
    ``limit`` characters, in their order in the file; and how many entries were left out.

    An entry is a bullet line (``- ...``). Its score adds, for each content word it shares
    with the transcript (stemmed, stop words left out), one over the number of entries that
    hold the word: a shared name or identifier counts, a word half the entries use does not.
    Entries under ``_MIN_SCORE`` are not sent (they could hardly be repeated by the new
    facts), nor are headings (the model does not need them to avoid a repeat).
    """
    from harnessmem.backends._extract_text import term_set

    entries = [
        (number, line)
        for number, line in enumerate(text.splitlines())
        if line.lstrip().startswith(("- ", "* "))
    ]
    if not entries or limit <= 0:
        return "", len(entries)
    wanted = term_set(transcript)
    terms = [term_set(line) for _, line in entries]
    counts = Counter(term for found in terms for term in found & wanted)
    scored = []
    for (number, line), found in zip(entries, terms, strict=True):
        score = sum(1 / counts[term] for term in found & wanted)
        if score >= _MIN_SCORE:
            scored.append((-score, number, line))
    scored.sort()
    chosen: list[tuple[int, str]] = []
    used = 0
    for _, number, line in scored:
        if used + len(line) + 1 > limit:
            continue
        chosen.append((number, line))
        used += len(line) + 1
    chosen.sort()
    return "\n".join(line for _, line in chosen), len(entries) - len(chosen)
