"""The compaction summary: the message that replaces the dropped part of a conversation.

The summary message (the *anchor*) is a ``user`` message named
``__compaction_summary__`` that opens the conversation after the system head::

    <conversation_summary covers="123" log="sessions/chat-42.log.jsonl">
    The first 123 messages of this conversation were compacted into this summary.
    <first_user_request>
    Hi! I'd like to book a flight from New York to Seattle.
    </first_user_request>
    ## SESSION INTENT
    ...
    ## NEXT STEPS
    ...
    </conversation_summary>
    The full text of those messages is in the session log sessions/chat-42.log.jsonl
    (one JSON message per line): memory_search and session_search reach it, and
    memory_get reads its lines.

``covers`` is how many conversation messages the summary stands for, which tells the
compactor the position of every message after it (offload needs positions to write each
message exactly once). The first user request is carried verbatim from summary to
summary, so the first intent survives any number of compactions whatever the model
writes; when the kept messages hold no user message, the latest one before them is
quoted too. Texts inside are escaped so that they cannot close the wrapper.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

# ``name`` of the summary message, shared with the prompts' contract (the flush skips it).
from harnessmem.prompts import SUMMARY_NAME

__all__ = [
    "SECTIONS",
    "SUMMARY_NAME",
    "Anchor",
    "build_anchor",
    "first_user_text",
    "last_user_text",
    "normalise_summary",
    "parse_anchor",
]

#: The four sections every summary must have, in order.
SECTIONS: Final = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
_TAG: Final = "conversation_summary"
_QUOTE_CHARS: Final = 2_000

_OPEN = re.compile(rf'\A<{_TAG} covers="(\d+)"(?: log="([^"]*)")?>\n')
_CLOSE = f"</{_TAG}>"
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*"
    r"(SESSION[ \t]+INTENT|SUMMARY|ARTIFACTS|NEXT[ \t]+STEPS)"
    r"[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*$", re.MULTILINE)
_INNER_TAGS: Final = (_TAG, "first_user_request", "latest_user_message")


def _escape(text: str) -> str:
    """Make the wrapper's tags inert inside ``text`` (``</tag`` becomes ``&lt;/tag``)."""
    pattern = "|".join(_INNER_TAGS)
    return re.sub(rf"<(\s*/?\s*(?:{pattern}))", r"&lt;\1", text, flags=re.IGNORECASE)


def _unescape(text: str) -> str:
    pattern = "|".join(_INNER_TAGS)
    return re.sub(rf"&lt;(\s*/?\s*(?:{pattern}))", r"<\1", text, flags=re.IGNORECASE)


def _quote(text: str, limit: int = _QUOTE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


@dataclass(frozen=True)
class Anchor:
    """A summary message read back from a conversation.

    ``covers``: conversation messages it stands for; ``body``: the four-section summary
    ("" when the summariser has not produced one yet); ``first_request``: the user's
    first request, verbatim; ``log_path``: the session log, when one was written.
    """

    covers: int
    body: str
    first_request: str | None
    log_path: str | None


def _block(text: str, tag: str) -> str | None:
    match = re.search(rf"^<{tag}>\n(.*?)\n</{tag}>$", text, flags=re.DOTALL | re.MULTILINE)
    return _unescape(match.group(1)) if match else None


def parse_anchor(message: Mapping[str, Any]) -> Anchor | None:
    """The anchor a summary message carries, or None for any other message."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str):
        return None
    opening = _OPEN.match(content)
    end = content.rfind(_CLOSE)
    if opening is None or end < 0:
        return None
    inner = content[opening.end() : end]
    first = _block(inner, "first_user_request")
    # Sections start after the quoted blocks, whose text may hold heading-like lines.
    quoted_end = max(inner.rfind("</first_user_request>"), inner.rfind("</latest_user_message>"))
    heading = _HEADING.search(inner, max(0, quoted_end))
    body = _unescape(inner[heading.start() :]).strip() if heading else ""
    return Anchor(
        covers=int(opening.group(1)),
        body=body,
        first_request=first,
        log_path=opening.group(2) or None,
    )


def build_anchor(
    *,
    covers: int,
    body: str,
    log_path: str | None,
    first_request: str | None,
    latest_user: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The summary message for ``covers`` compacted messages.

    ``note`` replaces the standard first line (the degraded fallback explains itself
    there); ``latest_user`` is quoted when the kept messages hold no user message.
    """
    attributes = f'covers="{covers}"' + (f' log="{log_path}"' if log_path else "")
    lines = [f"<{_TAG} {attributes}>"]
    lines.append(
        note
        or f"The first {covers} messages of this conversation were compacted into this summary."
    )
    if first_request:
        lines += ["<first_user_request>", _escape(_quote(first_request)), "</first_user_request>"]
    if latest_user:
        lines += [
            "The latest user message before the messages that follow:",
            "<latest_user_message>",
            _escape(_quote(latest_user)),
            "</latest_user_message>",
        ]
    if body.strip():
        lines.append(_escape(body.strip()))
    lines.append(_CLOSE)
    if log_path:
        lines.append(
            f"The full text of the compacted messages is in the session log {log_path} "
            "(one JSON message per line): memory_search and session_search reach it, and "
            "memory_get reads its lines."
        )
    else:
        lines.append(
            "The compacted messages were not kept (offload_before_compact is off); "
            "memory_search and session_search reach what earlier memory flushes saved."
        )
    return {"role": "user", "name": SUMMARY_NAME, "content": "\n".join(lines)}


def normalise_summary(text: str) -> tuple[str | None, str]:
    """The summary with canonical ``## SECTION`` headings, or None and what is wrong.

    Tolerated: code fences around the answer, a preamble before the first section,
    headings written as ``**Summary:**``, ``# Next steps`` and the like. Rejected: an
    empty answer and an answer missing any of the four sections.
    """
    stripped = _FENCE.sub("", text or "").strip()
    if not stripped:
        return None, "the summary is empty"
    found: dict[str, int] = {}
    for match in _HEADING.finditer(stripped):
        name = " ".join(match.group(1).upper().split())
        found.setdefault(name, match.start())
    missing = [name for name in SECTIONS if name not in found]
    if missing:
        return None, f"the summary lacks the section(s) {', '.join(missing)}"
    # Canonical headings; the text before the first one (a preamble) is dropped.
    out = stripped[min(found.values()) :]
    out = _HEADING.sub(lambda m: "## " + " ".join(m.group(1).upper().split()), out)
    return out.strip(), ""


def _user_text(message: Mapping[str, Any]) -> str | None:
    """The text of a user message that is not a summary; None for any other message."""
    if message.get("role") != "user" or parse_anchor(message) is not None:
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the first user message (summaries skipped): the first intent."""
    return next((t for m in messages if (t := _user_text(m)) is not None), None)


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the last user message (summaries skipped)."""
    return next((t for m in reversed(messages) if (t := _user_text(m)) is not None), None)
