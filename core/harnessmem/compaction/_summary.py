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
from harnessmem.messages import content_text
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
    "split_facts",
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


# A line that opens a section: the label as a Markdown heading, a bold or numbered label,
# or a plain label, alone on its line or followed by its text after ":" or a dash
# ("SESSION INTENT: ...", "**Summary:** ...", "1. Next steps — ...").
_LABEL = re.compile(
    r"^[ \t]*(?P<list>(?:\d{1,2}[.)]|[-*+\u2022])[ \t]+)?(?P<hash>#{1,6}[ \t]*)?"
    r"(?:\d{1,2}[.)][ \t]*)?(?P<open>\*\*|__|\*|_)?[ \t]*"
    r"(?P<label>SESSION[ \t_-]*INTENTS?|(?:USER[ \t]+)?INTENT|SUMMARY|"
    r"ARTIFACTS?|ARTEFACTS?|NEXT[ \t_-]*STEPS?)"
    r"[ \t]*(?:\*\*|__|\*|_)?[ \t]*(?P<sep>:|[-\u2013\u2014=]+(?=[ \t]|$))?"
    r"[ \t]*(?:\*\*|__|\*|_)?(?P<rest>.*)$",
    re.IGNORECASE,
)
_CANONICAL: Final = {
    "SESSIONINTENT": "SESSION INTENT",
    "SESSIONINTENTS": "SESSION INTENT",
    "INTENT": "SESSION INTENT",
    "USERINTENT": "SESSION INTENT",
    "SUMMARY": "SUMMARY",
    "ARTIFACT": "ARTIFACTS",
    "ARTIFACTS": "ARTIFACTS",
    "ARTEFACT": "ARTIFACTS",
    "ARTEFACTS": "ARTIFACTS",
    "NEXTSTEP": "NEXT STEPS",
    "NEXTSTEPS": "NEXT STEPS",
}
#: Sections an answer may leave out (written as "None").
_OPTIONAL: Final = frozenset({"ARTIFACTS"})
_EMPTY_BODY = re.compile(r"^[\s\-*.:]*(?:none|n/?a|nothing(?: yet)?|-)?[\s.]*$", re.IGNORECASE)
_REFUSAL = re.compile(
    r"^\W*(?:I[\u2019']?m sorry|I am sorry|sorry\b|I can(?:not|[\u2019']?t)\b|I am unable|"
    r"I[\u2019']?m unable|I won[\u2019']?t\b|I will not\b|as an AI\b|unfortunately,? I\b)",
    re.IGNORECASE,
)
#: A refusal is short; a long answer that opens with "Sorry" may still be a summary.
_REFUSAL_CHARS = 400


@dataclass(frozen=True)
class _Label:
    name: str
    line: int
    inline: str
    strong: bool  # a heading, a bold, numbered or capitalised label: not a bullet's words


def _labels(lines: list[str]) -> list[_Label]:
    found = []
    for number, line in enumerate(lines):
        match = _LABEL.match(line)
        if match is None:
            continue
        rest = match.group("rest").strip().strip("*_").strip()
        if match.group("sep") is None and rest:
            continue  # "Summary of the booking ..." is prose, not a label
        label = match.group("label")
        name = _CANONICAL["".join(re.split(r"[ \t_-]+", label.upper()))]
        bullet = (match.group("list") or "").strip() in {"-", "*", "+", "\u2022"}
        strong = bool(match.group("hash") or match.group("open") or label.isupper()) or (
            not bullet and (match.group("list") is not None or not rest)
        )
        found.append(_Label(name, number, rest, strong))
    return found


def _prompt_lines(prompt: str | None) -> frozenset[str]:
    if not prompt:
        return frozenset()
    return frozenset(
        key for line in prompt.splitlines() if len(key := " ".join(line.lower().split())) > 12
    )


def normalise_summary(text: str, *, prompt: str | None = None) -> tuple[str | None, str]:
    """The summary in canonical form (``## SECTION`` headings, in order), or None and why.

    Accepted: each section as a Markdown heading, a bold, numbered or plain label, alone on
    its line or with its text after it (``SESSION INTENT: ...``, ``**Summary:** ...``,
    ``1. Next steps - ...``), in any case and any order; code fences around the answer and
    a preamble before the first section; no ``ARTIFACTS`` section (written as "None").
    Where a label appears twice, the first heading-like one opens the section and the other
    stays text. Rejected: an empty answer, a missing section, an answer with nothing in its
    sections, a refusal, and (given the ``prompt`` that was sent) an echo of the prompt.
    """
    stripped = _FENCE.sub("", text or "").strip()
    if not stripped:
        return None, "the summary is empty"
    lines = stripped.splitlines()
    starts: dict[str, _Label] = {}
    for label in _labels(lines):
        known = starts.get(label.name)
        if known is None or (label.strong and not known.strong):
            starts[label.name] = label
    missing = [name for name in SECTIONS if name not in starts and name not in _OPTIONAL]
    if missing:
        return None, f"the summary lacks the section(s) {', '.join(missing)}"
    ordered = sorted(starts.values(), key=lambda label: label.line)
    bodies: dict[str, str] = {}
    for position, label in enumerate(ordered):
        stop = ordered[position + 1].line if position + 1 < len(ordered) else len(lines)
        body = "\n".join([label.inline, *lines[label.line + 1 : stop]]).strip("\n")
        bodies[label.name] = _dedent(body).strip()
    if all(_EMPTY_BODY.match(body) for body in bodies.values()):
        return None, "the summary's sections are empty"
    content = "\n".join(bodies.values())
    if len(content) < _REFUSAL_CHARS and _REFUSAL.match(bodies.get("SESSION INTENT", "")):
        return None, "the answer is a refusal, not a summary"
    echoed = _prompt_lines(prompt)
    if echoed:
        said = [key for line in content.splitlines() if (key := " ".join(line.lower().split()))]
        if said and sum(key in echoed for key in said) * 2 >= len(said):
            return None, "the answer repeats the prompt instead of summarising"
    sections = []
    for name in SECTIONS:
        body = bodies.get(name, "")
        sections.append(f"## {name}\n{body if not _EMPTY_BODY.match(body) else 'None'}")
    return "\n\n".join(sections), ""


_FACTS_LABEL = re.compile(
    r"^[ \t]*(?:\d{1,2}[.)][ \t]+)?(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*NEW[ \t_-]*FACTS"
    r"[ \t]*(?:\*\*|__)?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


def split_facts(text: str) -> tuple[str, str | None]:
    """An answer to a summary request that also asked for facts, split in two: the
    summary, and the text of its ``NEW FACTS`` section (None when it has none)."""
    # The last such heading: a summary may quote the words earlier.
    match = next(reversed(list(_FACTS_LABEL.finditer(text or ""))), None)
    if match is None:
        return text, None
    facts = _FENCE.sub("", text[match.end() :]).strip()
    return text[: match.start()].rstrip(), facts


def _dedent(body: str) -> str:
    """Remove the common indentation of a section's lines (a numbered label indents them)."""
    lines = body.splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()]
    cut = min(indents) if indents else 0
    if not cut:
        return body
    return "\n".join([lines[0], *(line[cut:] if line.strip() else "" for line in lines[1:])])


def _user_text(message: Mapping[str, Any]) -> str | None:
    """The text of a user message that is not a summary; None for any other message."""
    if message.get("role") != "user" or parse_anchor(message) is not None:
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return content_text(content) or None
    return None


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the first user message (summaries skipped): the first intent."""
    return next((t for m in messages if (t := _user_text(m)) is not None), None)


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the last user message (summaries skipped)."""
    return next((t for m in reversed(messages) if (t := _user_text(m)) is not None), None)
