"""Prompt templates (the ``*.md`` files beside this module) and the request contract of the
three model jobs.

Every job sends two messages: a ``system`` message with the job's instructions (a template
file, or the user's own prompt from the settings) and a ``user`` message made of tagged
blocks. The blocks are the contract: an LLM reads them as plain text, and the offline
``extractive`` backend finds its inputs in them, so any instructions work with either::

    summary        <previous_summary> (optional), <conversation>
    flush          <memory_md> (optional), <todays_log> (optional), <conversation>
    consolidation  <memory_md>, <daily_logs>; the budget as "within N tokens" in the system text

A block opens with ``<tag>`` alone on a line and closes with ``</tag>`` alone on a line; a
tag delimiter inside the content is escaped as ``&lt;tag`` / ``&lt;/tag``. Templates take
``$name`` placeholders (``string.Template``): the flush's ``$today`` and ``$log_path``, the
consolidation's ``$max_tokens`` and ``$max_chars``. Inside ``<conversation>`` every message
starts a line with its role label (:func:`render_conversation`)::

    [user]: text              [user Caroline]: text     (with the message's name)
    [assistant]: text
    [tool_call: get_order({"order_id": "#W1"})]         (one line per call, after the text)
    [tool_result: get_order]: the tool's output

Build requests with :func:`summary_request`, :func:`flush_request` and
:func:`consolidation_request`; read them back with :func:`read_blocks` and
:func:`parse_conversation`.

Texts may carry the harness's own notes about what it left out, in square brackets:
``[harnessmem: 29,996,000 of 30,000,000 characters left out here …]`` (an evicted or
shrunk tool output) and ``[… MEMORY.md lines 40-90 … are not shown …]`` (a bounded
block). They are not content: :func:`strip_markers` removes them, and no job takes one
for a fact.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

__all__ = [
    "BLOCK_TAGS",
    "FACTS_TOKENS",
    "NO_REPLY",
    "SUMMARY_NAME",
    "TAG_ALIASES",
    "compact_json",
    "consolidation_request",
    "flush_request",
    "load_template",
    "parse_conversation",
    "read_blocks",
    "render_block",
    "render_conversation",
    "strip_markers",
    "summary_request",
]

Message = dict[str, Any]

#: The flush's answer when nothing is worth remembering.
NO_REPLY = "NO_REPLY"
#: Tags of the blocks a request may carry.
BLOCK_TAGS = ("previous_summary", "conversation", "memory_md", "todays_log", "daily_logs")
#: Other spellings readers accept for each tag.
TAG_ALIASES = {
    "previous_summary": ("summary",),
    "conversation": ("messages", "transcript"),
    "memory_md": ("memory", "current_memory"),
    "todays_log": ("daily_log", "today"),
    "daily_logs": ("new_entries", "entries"),
}
#: Name of the message that carries a compaction summary inside a conversation.
SUMMARY_NAME = "__compaction_summary__"
#: Answer tokens a summary request that also asks for facts keeps for the facts.
FACTS_TOKENS = 800
#: A note of the harness about text it left out (see the module doc); up to its closing
#: bracket, or to the end of the line when a cut took that.
HARNESS_MARKER = re.compile(r"\[(?:harnessmem: |… )[^\]\n]*\]?")


def strip_markers(text: str) -> str:
    """``text`` without the harness's notes about what it left out (see the module doc)."""
    if "[" not in text:
        return text
    return HARNESS_MARKER.sub("", text)


_ROLES = "user|assistant|system|developer|tool|human|ai"
_BRACKET_HEADER = re.compile(
    rf"^\[(?P<role>{_ROLES})(?:[ :](?P<name>[^\]\n]{{1,80}}))?\]\s*:\s?(?P<rest>.*)$", re.I
)
_PLAIN_HEADER = re.compile(r"^(?P<role>Human|AI|User|Assistant|Tool|System)\s*:\s?(?P<rest>.*)$")
_TOOL_CALL = re.compile(r"^\[tool_call:\s*(?P<name>[^\s(\]]+)\s*(?:\((?P<args>.*)\))?\]\s*$", re.I)
_TOOL_RESULT = re.compile(r"^\[tool_result(?::\s*(?P<name>[^\]\n]*))?\]\s*:?\s?(?P<rest>.*)$", re.I)
_ROLE_ALIASES = {"human": "user", "ai": "assistant", "developer": "system"}


@cache
def load_template(name: str) -> str:
    """The built-in template ``name`` (``"summary"``, ``"flush"``, ``"consolidation"``, or
    ``"summary_facts"``, the addition that asks a summary for the new facts too)."""
    try:
        return resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(
            f"no built-in prompt template {name!r}; expected summary, flush or consolidation"
        ) from None


# -- blocks -------------------------------------------------------------------------------------


def render_block(tag: str, text: str) -> str:
    """``text`` wrapped in ``<tag>`` lines; the tag's delimiters inside it are made inert."""
    body = re.sub(rf"<(\s*/?\s*{re.escape(tag)})", r"&lt;\1", text.strip("\n"), flags=re.I)
    return f"<{tag}>\n{body}\n</{tag}>" if body else f"<{tag}>\n</{tag}>"


_CANONICAL = {alias: tag for tag, aliases in TAG_ALIASES.items() for alias in (tag, *aliases)}


def read_blocks(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The tagged blocks of the non-system messages, by canonical tag (first of each wins).

    Accepts the aliases of :data:`TAG_ALIASES` and undoes :func:`render_block`'s escaping.
    """
    texts = [_text(m.get("content")) for m in messages if m.get("role") != "system"]
    found: dict[str, str] = {}
    for text in texts:
        for match in re.finditer(r"(?ms)^<([a-z_]+)>[ \t]*\n(.*?)^</\1>[ \t]*$", text):
            tag = _CANONICAL.get(match.group(1))
            if tag is not None and tag not in found:
                body = re.sub(r"&lt;(\s*/?\s*[a-z_]+)", r"<\1", match.group(2), flags=re.I)
                found[tag] = body.rstrip("\n")
    return found


# -- conversations ------------------------------------------------------------------------------


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a part list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        pieces = []
        for part in content:
            if isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                elif part.get("type") in {"image_url", "image", "input_image"}:
                    pieces.append("[image]")
            elif isinstance(part, str):
                pieces.append(part)
        return "\n".join(pieces)
    return str(content)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def compact_json(text: str) -> str:
    """``text`` without the whitespace of its JSON, when it is a JSON object or array."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return text
    try:
        return json.dumps(json.loads(stripped), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text


def render_conversation(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_result_chars: int = 1_000,
    max_arg_chars: int = 500,
    include_system: bool = False,
) -> str:
    """The conversation window as role-labelled lines (see the module docstring).

    System messages are left out unless ``include_system``; JSON in tool results is sent
    without its whitespace; tool results and tool-call arguments longer than the limits
    are cut (the raw messages live in the session log).
    """
    tool_names: dict[str, str] = {}
    lines: list[str] = []
    for message in messages:
        role = str(message.get("role") or "")
        if role in {"system", "developer"} and not include_system:
            continue
        text = _text(message.get("content")).strip()
        name = message.get("name")
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            tool = name if isinstance(name, str) and name else tool_names.get(call_id, "")
            label = f"[tool_result: {tool}]" if tool else "[tool_result]"
            lines.append(f"{label}: {_cut(compact_json(text), max_result_chars)}")
            continue
        calls = message.get("tool_calls") or []
        if not text and not calls:
            continue
        label = f"[{role} {name}]" if isinstance(name, str) and name else f"[{role}]"
        entry = [f"{label}: {text}"] if text else [f"{label}:"]
        for call in calls:
            function = call.get("function") or {}
            call_name = str(function.get("name") or "?")
            tool_names[str(call.get("id") or "")] = call_name
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False, default=str)
            arguments = " ".join(arguments.split())
            shown = f"({_cut(arguments, max_arg_chars)})" if arguments not in {"", "{}"} else ""
            entry.append(f"[tool_call: {call_name}{shown}]")
        lines.append("\n".join(entry))
    return "\n".join(lines)


def parse_conversation(text: str) -> list[Message]:
    """Messages back from a rendered conversation (lossy: cut texts stay cut).

    Reads the labels of :func:`render_conversation`, the seed's ``[USER]:`` style, and
    ``Human:`` / ``AI:`` / ``Tool:`` prefixes (used only when no bracketed label occurs).
    Lines before the first label are ignored.
    """
    lines = text.splitlines()
    bracketed = any(_BRACKET_HEADER.match(line) or _TOOL_RESULT.match(line) for line in lines)
    messages: list[Message] = []
    current: Message | None = None

    def start(role: str, rest: str, name: str | None = None) -> Message:
        message: Message = {"role": _ROLE_ALIASES.get(role.lower(), role.lower()), "content": rest}
        if name:
            message["name"] = name.strip()
        messages.append(message)
        return message

    for line in lines:
        call = _TOOL_CALL.match(line)
        if call:
            if current is None or current["role"] != "assistant":
                current = start("assistant", "")
            arguments = call.group("args") or "{}"
            function = {"name": call.group("name"), "arguments": arguments}
            current.setdefault("tool_calls", []).append({"type": "function", "function": function})
            continue
        result = _TOOL_RESULT.match(line)
        if result:
            current = start("tool", result.group("rest"), result.group("name") or None)
            continue
        header = _BRACKET_HEADER.match(line) if bracketed else _PLAIN_HEADER.match(line)
        if header:
            rest = header.group("rest")
            name = header.groupdict().get("name")
            role = header.group("role").lower()
            nested = _TOOL_RESULT.match(rest) if role == "tool" else None
            if nested:  # the seed's "[TOOL]: [tool_result: name] output"
                rest, name = nested.group("rest"), nested.group("name")
            current = start(role, rest, name)
            continue
        if current is not None:
            current["content"] = f"{current['content']}\n{line}" if current["content"] else line
    for message in messages:
        message["content"] = message["content"].strip()
    return messages


# -- requests -----------------------------------------------------------------------------------


def _system(template: str | None, name: str, **values: Any) -> Message:
    text = template if template is not None else load_template(name)
    text = string.Template(text).safe_substitute({k: str(v) for k, v in values.items()})
    return {"role": "system", "content": text.strip()}


def summary_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    previous_summary: str | None = None,
    template: str | None = None,
    facts_reference: str | None = None,
    today: str = "",
    max_result_chars: int = 1_000,
) -> list[Message]:
    """The ``summary`` request for ``messages`` (the compacted prefix, without old summaries).

    Tool results are cut at ``max_result_chars`` (their full text is in the session log).
    With ``facts_reference`` (the flush's dedup reference, "" for none) the request also
    asks for the messages' new facts, in a ``## NEW FACTS`` section after the four
    (``summary_facts.md``): compaction then needs one model call, not two.
    """
    system = _system(template, "summary")
    parts = []
    if facts_reference is not None:
        extra = string.Template(load_template("summary_facts")).safe_substitute(today=today)
        system["content"] += "\n\n" + extra.strip()
        if facts_reference:
            parts.append(facts_reference)
    if previous_summary and previous_summary.strip():
        parts.append("The summary of the conversation before these messages:")
        parts.append(render_block("previous_summary", previous_summary))
    parts.append("The messages to summarise:")
    conversation = render_conversation(messages, max_result_chars=max_result_chars)
    parts.append(render_block("conversation", conversation))
    return [system, {"role": "user", "content": "\n\n".join(parts)}]


def flush_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    memory: str = "",
    todays_log: str = "",
    today: str = "",
    log_path: str = "",
    template: str | None = None,
) -> list[Message]:
    """The ``flush`` request: new ``messages`` plus the dedup reference (read-only)."""
    parts = []
    if memory.strip():
        parts.append("Curated long-term memory (MEMORY.md, read-only):")
        parts.append(render_block("memory_md", memory))
    if todays_log.strip():
        parts.append("Today's log so far (your bullets are appended after it):")
        parts.append(render_block("todays_log", todays_log))
    parts.append("Extract only NEW memories from this conversation window:")
    parts.append(render_block("conversation", render_conversation(messages)))
    system = _system(template, "flush", today=today or "unknown", log_path=log_path or "")
    return [system, {"role": "user", "content": "\n\n".join(parts)}]


def consolidation_request(
    memory: str, daily_logs: str, *, max_tokens: int, template: str | None = None
) -> list[Message]:
    """The ``consolidation`` request: the current MEMORY.md, the new entries, the budget."""
    user = "\n\n".join(
        [
            "Current MEMORY.md:",
            render_block("memory_md", memory),
            "New daily-log entries to merge (oldest first):",
            render_block("daily_logs", daily_logs),
        ]
    )
    system = _system(template, "consolidation", max_tokens=max_tokens, max_chars=max_tokens * 4)
    return [system, {"role": "user", "content": user}]
