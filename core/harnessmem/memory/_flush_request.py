"""What the flush sends its model: the transcript of the new messages and the reference.

The flush pays for every character it sends, on every flush of every conversation, so
both parts are kept to what fact extraction needs:

- :func:`render_transcript` writes the new messages as ``[ROLE]: text`` lines (``[USER
  Caroline]: text`` when the message names its speaker, as in a chat among people). In its
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
from string import Template
from typing import TYPE_CHECKING, Any, Final

from harnessmem import layout
from harnessmem.memory import files as mf
from harnessmem.prompts import compact_json, load_template

if TYPE_CHECKING:
    from harnessmem.settings import FlushSettings, HarnessSettings

__all__ = ["dedup_reference", "flush_prompt", "related_reference", "render_transcript"]

Message = dict[str, Any]
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
    """The messages as the flush model reads them: ``[ROLE]: text`` lines
    (``[ROLE name]: text`` for a message with a ``name``).

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
            lines.append(f"{_label(role, message)}: " + "\n".join(parts))
    return "\n".join(lines)


def _label(role: str, message: Mapping[str, Any]) -> str:
    """``[USER]``, or ``[USER Caroline]`` for a message that names its speaker (people in a
    group chat): the flush then knows whose fact it is. A tool message's name is the tool's."""
    name = message.get("name")
    if role == "TOOL" or not isinstance(name, str) or not name.strip():
        return f"[{role}]"
    return f"[{role} {' '.join(name.split())[:80]}]"


def related_reference(text: str, transcript: str, limit: int) -> tuple[str, int]:
    """The lines of ``text`` (a memory file) most related to ``transcript``, within
    ``limit`` characters, in their order in the file; and how many entries were left out.

    An entry is a bullet line (``- ...``). Its score adds, for each content word it shares
    with the transcript (stemmed, stop words left out), one over the number of entries that
    hold the word: a shared name or identifier counts, a word half the entries use does not.
    Entries under ``_MIN_SCORE`` are not sent (they could hardly be repeated by the new
    facts), nor are headings (the model does not need them to avoid a repeat).
    """
    from harnessmem.backends.extractive import term_set

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


def flush_prompt(
    settings: HarnessSettings, transcript: str, reference: str, path: str, now: float
) -> list[Message]:
    """The flush request: instructions, then the reference, then the new messages
    (the stable part first, so that a provider's prompt cache can reuse it)."""
    today = layout.local_date(now, settings.workspace.timezone)
    template = settings.flush.prompt or load_template("flush")
    system = Template(template).safe_substitute(today=today, log_path=path)
    parts = [reference] if reference else []
    parts.append(
        "Extract only NEW facts worth remembering from this conversation excerpt:\n"
        f"<conversation>\n{mf.escape_tag(transcript, 'conversation')}\n</conversation>"
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def dedup_reference(
    settings: FlushSettings, transcript: str, memory_text: str, today_text: str, path: str
) -> str:
    """The dedup reference for ``transcript`` ("" for none): with ``flush.reference =
    "related"`` the entries of MEMORY.md and today's log that relate to it, within
    ``flush.reference_chars`` in all; with ``"full"`` both files, each cut to it."""
    limit = settings.reference_chars
    if not limit:
        return ""
    if settings.reference == "related":
        memory, memory_left = related_reference(memory_text, transcript, limit)
        today, today_left = related_reference(today_text, transcript, limit - len(memory))
        if not (memory or today):
            return ""
        left = memory_left + today_left
        note = f"\n[{left} other entries not shown: unrelated to this excerpt]" if left else ""
        return (
            "Entries already in memory that relate to this excerpt (MEMORY.md and today's "
            f"log {path}; read-only, do not restate):\n"
            f"<memory_md>\n{mf.escape_tag(memory, 'memory_md')}\n</memory_md>\n"
            f"<todays_log>\n{mf.escape_tag(today, 'todays_log')}{note}\n</todays_log>"
        )
    parts = []
    if memory_text.strip():
        shown = memory_text if len(memory_text) <= limit else memory_text[:limit]
        more = len(memory_text) - len(shown)
        note = f"\n[… {more} more characters of MEMORY.md not shown]" if more else ""
        parts.append(
            "Curated long-term memory (read-only; do not restate):\n"
            f"<memory_md>\n{mf.escape_tag(shown, 'memory_md')}{note}\n</memory_md>"
        )
    if today_text.strip():
        shown = today_text if len(today_text) <= limit else today_text[-limit:]
        more = len(today_text) - len(shown)
        note = f"[… {more} earlier characters of the log not shown]\n" if more else ""
        parts.append(
            f"Today's log {path} so far (your bullets are appended after it):\n"
            f"<todays_log>\n{note}{mf.escape_tag(shown, 'todays_log')}\n</todays_log>"
        )
    return "\n\n".join(parts)
