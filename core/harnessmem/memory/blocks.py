"""Marked blocks in a system prompt: placed once, refreshed in place, taken back out.

A block is a ``<tag ...>`` ... ``</tag>`` element, optionally introduced by a preamble
(the memory block's "## Long-term memory" paragraph). Its content is escaped against its
own tag (:func:`harnessmem.prompts.escape_tag`), so the first ``</tag>`` after an opening
ends it: that is how an earlier copy is found again. Placing a block removes every earlier
copy and puts the new one where the first was (or at the end), so it appears exactly once
however often it is placed; placing "" removes it.

The built-in ``context`` plugin keeps the memory block fresh this way at every
``before_reasoning``; the adapter packages use the same functions to move the block into
the framework's own instructions. Any plugin adding a block of its own tag can too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "SYSTEM_ROLES",
    "block_spans",
    "find_in_system",
    "place_block",
    "place_in_system",
    "place_in_system_of",
    "take_from_system",
]

Message = dict[str, Any]

#: Roles of a system message (``developer`` is OpenAI's newer name for it).
SYSTEM_ROLES = ("system", "developer")
#: What separates a block from the text around it.
SEPARATOR = "\n\n"


def _preamble(block: str, tag: str) -> str:
    """The text ``block`` puts before its opening tag ("" for a bare element)."""
    match = _opening(tag).search(block)
    return block[: match.start()] if match else ""


def _opening(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<{re.escape(tag)}(?=[\s>])")


def block_spans(text: str, tag: str, preamble: str = "") -> list[tuple[int, int]]:
    """Where the ``tag`` blocks of ``text`` are, first to last, as ``(start, end)``.

    A span starts at ``preamble`` when the text has it right before the opening tag; an
    opening tag without its closing one is not a block (it is left alone).
    """
    spans = []
    closing = f"</{tag}>"
    position = 0
    opening = _opening(tag)
    while match := opening.search(text, position):
        end = text.find(closing, match.end())
        if end < 0:
            break
        start = match.start()
        if preamble and text.startswith(preamble, start - len(preamble)):
            start -= len(preamble)
        spans.append((start, end + len(closing)))
        position = end + len(closing)
    return spans


def _cut(text: str, start: int, end: int) -> tuple[str, int]:
    """``text`` without ``[start, end)`` and the separator that joined it to the rest;
    and where the cut was."""
    if end == len(text) and text.endswith(SEPARATOR, 0, start):
        start -= len(SEPARATOR)  # the last block: the separator before it
    elif text.startswith(SEPARATOR, end):
        end += len(SEPARATOR)  # otherwise the one after it
    return text[:start] + text[end:], start


def place_block(text: str, block: str, tag: str, preamble: str | None = None) -> str:
    """``text`` with ``block`` (a rendered ``tag`` block) as its only ``tag`` block.

    Every earlier copy is removed, with its ``preamble`` when the text has it right before
    the tag (by default the one ``block`` has), and ``block`` goes where the first copy was,
    or after the text, joined by a blank line. An empty ``block`` only removes (pass the
    ``preamble`` then). Placing and then removing gives ``text`` back.
    """
    if preamble is None:
        preamble = _preamble(block, tag)
    spans = block_spans(text, tag, preamble)
    where: int | None = None
    for start, end in reversed(spans):
        text, where = _cut(text, start, end)
    if not block:
        return text
    if where is None or where >= len(text):
        return f"{text}{SEPARATOR}{block}" if text else block
    if where == 0:
        return f"{block}{SEPARATOR}{text}"
    # Between two parts of the caller's text: the separator the cut took goes back.
    return f"{text[:where]}{block}{SEPARATOR}{text[where:]}"


def _part_text(part: Any) -> str | None:
    """The text of a content part (a text dict, or a plain string); None for others."""
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        text: str = part["text"]
        return text
    return None


def _with_text(part: Any, text: str) -> Any:
    return text if isinstance(part, str) else {**part, "text": text}


def _place_in_parts(parts: list[Any], block: str, tag: str, preamble: str) -> list[Any]:
    """Content parts with ``block`` as their only ``tag`` block: in the first text part
    that had one, else as a text part of its own at the end. Parts left empty are dropped."""
    out: list[Any] = []
    placed = False
    for part in parts:
        text = _part_text(part)
        if text is None or not block_spans(text, tag, preamble):
            out.append(part)
            continue
        new = place_block(text, "" if placed else block, tag, preamble)
        placed = placed or bool(block)
        if new:
            out.append(_with_text(part, new))
    if block and not placed:
        out.append({"type": "text", "text": block})
    return out


def _place_in_content(content: Any, block: str, tag: str, preamble: str) -> Any:
    if isinstance(content, list):
        return _place_in_parts(content, block, tag, preamble)
    return place_block(content if isinstance(content, str) else "", block, tag, preamble)


def place_in_system(
    messages: Sequence[Message], block: str, tag: str, preamble: str | None = None
) -> list[Message]:
    """``messages`` with ``block`` as the only ``tag`` block of the system message.

    The first message, when it is a system message, gets it (an earlier copy replaced in
    place); otherwise a system message holding only ``block`` is put in front. A content
    list gets the block in the text part that had it, or in a text part of its own at the
    end. The list and the message changed are copies: ``messages`` is left as it was.
    An empty ``block`` removes the block (and a system message it leaves empty); pass
    the ``preamble`` of the block to remove then (by default: the one ``block`` has).
    """
    out = list(messages)
    place_in_system_of(out, block, tag, preamble)
    return out


def place_in_system_of(
    messages: list[Message], block: str, tag: str, preamble: str | None = None
) -> None:
    """:func:`place_in_system` done on ``messages`` itself (a list the caller owns): the
    message changed is still a copy, put in its place; no copy of the list."""
    if preamble is None:
        preamble = _preamble(block, tag)
    if messages and messages[0].get("role") in SYSTEM_ROLES:
        content = _place_in_content(messages[0].get("content"), block, tag, preamble)
        if content in ("", []) and set(messages[0]) <= {"role", "content"}:
            del messages[0]
        else:
            messages[0] = {**messages[0], "content": content}
    elif block:
        messages.insert(0, {"role": "system", "content": block})


def find_in_system(messages: Sequence[Message], tag: str, preamble: str = "") -> str:
    """The first ``tag`` block of the system message (with its ``preamble``), or ""."""
    if not messages or messages[0].get("role") not in SYSTEM_ROLES:
        return ""
    content = messages[0].get("content")
    parts = content if isinstance(content, list) else [content]
    for text in map(_part_text, parts):
        spans = block_spans(text or "", tag, preamble)
        if spans:
            assert text is not None
            return text[spans[0][0] : spans[0][1]]
    return ""


def take_from_system(
    messages: Sequence[Message], tag: str, preamble: str = ""
) -> tuple[list[Message], str]:
    """The ``tag`` block of the system message taken out: ``(messages without it, block)``.

    For an adapter whose framework sends its instructions apart from the messages: it puts
    the block into its instructions (:func:`place_block`) and keeps the messages as the
    caller had them. ``block`` is "" when the system message has none; a system message
    left empty is dropped. ``messages`` is left as it was.
    """
    block = find_in_system(messages, tag, preamble)
    if not block:
        return list(messages), ""
    return place_in_system(messages, "", tag, preamble), block
