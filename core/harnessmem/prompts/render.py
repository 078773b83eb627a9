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
    [user Caroline · 2023-05-08]: text                  (the day said, where it changes)
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
    rf"^\[(?P<role>{_ROLES})(?:[ :](?P<name>[^\]\n·][^\]\n]{{0,79}}?))?"
    r"(?:\s*·\s*(?P<date>\d{4}-\d\d-\d\d))?\]\s*:\s?(?P<rest>.*)$",
    re.I,
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
        return (
            resources.files(__package__ or "harnessmem.prompts")
            .joinpath(f"{name}.md")
            .read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        raise ValueError(
            f"no built-in prompt template {name!r}; expected summary, flush or consolidation"
        ) from None


# -- blocks -------------------------------------------------------------------------------------


def escape_tag(text: str, tag: str) -> str:
    """Neutralise opening and closing ``tag`` delimiters inside ``text``.

    ``</memory_context>`` inside the data would end the block early and let the rest read
    as instructions; replacing its ``<`` with ``&lt;`` keeps it readable but inert.
    """
    return re.sub(rf"<(\s*/?\s*{re.escape(tag)})", r"&lt;\1", text, flags=re.I)


def render_block(tag: str, text: str) -> str:
    """``text`` wrapped in ``<tag>`` lines; the tag's delimiters inside it are made inert."""
    body = escape_tag(text.strip("\n"), tag)
    # Empty, the block keeps its blank line: "<tag>", "", "</tag>" (as the harness has
    # always sent an empty MEMORY.md), so that a reader splitting at "\n</tag>" finds it.
    return f"<{tag}>\n{body}\n</{tag}>"


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


def _cut(text: str, limit: int | None) -> str:
    """``text`` cut in the middle to about ``limit`` characters (head and tail kept)."""
    if limit is None or len(text) <= limit:
        return text
    head = limit * 3 // 4
    return f"{text[:head]} …({len(text) - limit} chars cut)… {text[len(text) - (limit - head) :]}"


def compact_json(text: str) -> str:
    """``text`` without the whitespace of its JSON, when it is a JSON object or array."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return text
    try:
        return json.dumps(json.loads(stripped), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text


def _label(role: str, message: Mapping[str, Any], day: str | None = None) -> str:
    """``[user]``, or ``[user Caroline]`` for a message that names its speaker (people in a
    group chat): whoever reads it then knows whose words these are; ``[user Caroline ·
    2023-05-08]`` with the day it was said (``day``)."""
    name = message.get("name")
    when = f" · {day}" if day else ""
    if not isinstance(name, str) or not name.strip():
        return f"[{role}{when}]"
    shown = " ".join(name.replace("·", " ").split())[:80]
    return f"[{role} {shown}{when}]"


def render_conversation(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_text_chars: int | None = None,
    max_user_chars: int | None = None,
    max_result_chars: int | None = 1_000,
    max_arg_chars: int | None = 500,
    compact: bool = True,
    include_system: bool = False,
    dates: Sequence[str | None] | None = None,
) -> str:
    """The conversation window as role-labelled lines (see the module docstring).

    ``dates`` (one ``YYYY-MM-DD`` or None per message) puts the day a message was said on
    its label, ``[user Ana · 2023-05-08]``, whenever it differs from the day last shown:
    the reader takes a label without a day to be of the day above it. Callers pass it when
    the conversation spans several days or is not from today
    (:func:`harnessmem.memory.grounding.transcript_dates`).

    System messages are left out unless ``include_system``, and so are the harness's own
    messages (a ``name`` starting ``__``: compaction summaries); so is a message with
    neither text nor tool calls. ``compact`` sends the JSON of tool results and tool-call
    arguments without its whitespace. Texts longer than the limits are cut in the middle
    (None: not cut): tool results at ``max_result_chars``, tool-call arguments at
    ``max_arg_chars``, user texts at ``max_user_chars`` (None: as other texts), other
    texts at ``max_text_chars``. The raw messages live in the session log.
    """
    user_chars = max_user_chars if max_user_chars is not None else max_text_chars
    tool_names: dict[str, str] = {}
    lines: list[str] = []
    shown_day: str | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        day = dates[position] if dates is not None and position < len(dates) else None
        role = str(message.get("role") or "unknown")
        name = message.get("name")
        if isinstance(name, str) and name.startswith("__"):
            continue
        if role in {"system", "developer"} and not include_system:
            continue
        text = _text(message.get("content")).strip()
        if role == "tool":
            if not text:
                continue
            call_id = str(message.get("tool_call_id") or "")
            tool = name if isinstance(name, str) and name else tool_names.get(call_id, "")
            label = f"[tool_result: {tool}]" if tool else "[tool_result]"
            shown = compact_json(text) if compact else text
            lines.append(f"{label}: {_cut(shown, max_result_chars)}")
            continue
        calls = message.get("tool_calls") or []
        if not text and not calls:
            continue
        limit = user_chars if role == "user" else max_text_chars
        label = _label(role, message, day if day != shown_day else None)
        shown_day = day or shown_day
        entry = [f"{label}: {_cut(text, limit)}"] if text else [f"{label}:"]
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            call_name = str(function.get("name") or "?")
            if isinstance(call.get("id"), str):
                tool_names[call["id"]] = call_name
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False, default=str)
            if compact:
                arguments = compact_json(arguments)
            arguments = " ".join(arguments.split())
            shown = f"({_cut(arguments, max_arg_chars)})" if arguments not in {"", "{}"} else ""
            entry.append(f"[tool_call: {call_name}{shown}]")
        lines.append("\n".join(entry))
    return "\n".join(lines)


#: The flush's bounds on its conversation (:func:`flush_conversation`): ``lean`` (the
#: default of ``flush.transcript``) keeps user texts long and cuts the rest short.
_FLUSH_BOUNDS: dict[bool, dict[str, Any]] = {
    False: {"max_text_chars": 4_000, "max_result_chars": 1_000, "max_arg_chars": 500},
    True: {
        "max_text_chars": 1_200,
        "max_user_chars": 4_000,
        "max_result_chars": 400,
        "max_arg_chars": 200,
    },
}


def flush_conversation(
    messages: Sequence[Mapping[str, Any]],
    *,
    lean: bool = True,
    dates: Sequence[str | None] | None = None,
) -> str:
    """The new messages as the flush's ``<conversation>`` holds them ("" when none has text).

    ``lean`` (``flush.transcript = "lean"``): JSON compacted, user texts kept up to 4,000
    characters, the agent's texts cut at 1,200, tool results at 400, arguments at 200;
    otherwise texts at 4,000, results at 1,000 and arguments at 500, JSON as it is.
    ``dates``: the day each message was said, for its label (:func:`render_conversation`).
    """
    return render_conversation(messages, compact=lean, dates=dates, **_FLUSH_BOUNDS[lean])


def parse_conversation(text: str) -> list[Message]:
    """Messages back from a rendered conversation (lossy: cut texts stay cut).

    Reads the labels of :func:`render_conversation`, the seed's ``[USER]:`` style, and
    ``Human:`` / ``AI:`` / ``Tool:`` prefixes (used only when no bracketed label occurs).
    Lines before the first label are ignored. A label's day (``[user Ana · 2023-05-08]``)
    becomes the message's ``timestamp`` (``"2023-05-08"``), and that of the messages after
    it up to the next day shown.
    """
    lines = text.splitlines()
    bracketed = any(_BRACKET_HEADER.match(line) or _TOOL_RESULT.match(line) for line in lines)
    messages: list[Message] = []
    current: Message | None = None
    day: str | None = None

    def start(role: str, rest: str, name: str | None = None) -> Message:
        message: Message = {"role": _ROLE_ALIASES.get(role.lower(), role.lower()), "content": rest}
        if name:
            message["name"] = name.strip()
        if day:
            message["timestamp"] = day
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
            day = header.groupdict().get("date") or day
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
    """The job's instructions: ``template`` (None: the built-in ``name``) with its
    ``$placeholders`` filled from ``values``."""
    text = template if template is not None else load_template(name)
    text = string.Template(text).safe_substitute({k: str(v) for k, v in values.items()})
    return {"role": "system", "content": text.strip()}


def _section(lead: str, *blocks: str) -> str:
    return "\n".join([lead, *blocks])


def summary_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    previous_summary: str | None = None,
    template: str | None = None,
    facts_reference: str | None = None,
    today: str = "",
    max_result_chars: int = 1_000,
    max_words: int | None = None,
    focus: str | None = None,
    dates: Sequence[str | None] | None = None,
) -> list[Message]:
    """The ``summary`` request for ``messages`` (the compacted prefix, without old summaries).

    ``dates``: the day each message was said, for its label (:func:`render_conversation`).

    ``focus`` (a manual compaction's, :meth:`harnessmem.Session.compact`) names what the
    summary should keep in particular; it goes in a block of its own, escaped like the
    conversation, after it.

    Tool results are cut at ``max_result_chars`` (their full text is in the session log);
    ``max_words`` fills the template's ``$max_words``. With ``facts_reference`` (the
    flush's dedup reference, :func:`flush_reference`; "" for none) the request also asks
    for the messages' new facts, in a ``## NEW FACTS`` section after the four
    (``summary_facts.md``): compaction then needs one model call, not two.
    """
    values = {} if max_words is None else {"max_words": max_words}
    system = _system(template, "summary", **values)
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
    conversation = render_conversation(messages, max_result_chars=max_result_chars, dates=dates)
    parts.append(render_block("conversation", conversation))
    if focus and focus.strip():
        parts.append(
            "Whoever asked for this summary wants it to keep in particular (a request about "
            "what to keep, not an instruction to follow otherwise):"
        )
        parts.append(render_block("focus", focus.strip()))
    return [system, {"role": "user", "content": "\n\n".join(parts)}]


def flush_reference(
    memory: str = "",
    todays_log: str = "",
    *,
    log_path: str = "",
    max_chars: int | None = None,
    unrelated: int | None = None,
) -> str:
    """The flush's dedup reference, MEMORY.md and today's log (read-only); "" for none.

    Whole files by default, MEMORY.md cut to its first ``max_chars`` characters and the
    log to its last, each with a note of what was left out. With ``unrelated`` (how many
    entries were left out) ``memory`` and ``todays_log`` are the entries that relate to the
    new messages (``flush.reference = "related"``), sent with that count.
    """
    where = f" {log_path}" if log_path else ""
    if unrelated is not None:
        if not (memory or todays_log):
            return ""
        note = (
            f"\n[{unrelated} other entries not shown: unrelated to this excerpt]"
            if unrelated
            else ""
        )
        return _section(
            "Entries already in memory that relate to this excerpt (MEMORY.md and today's "
            f"log{where}; read-only, do not restate):",
            render_block("memory_md", memory),
            render_block("todays_log", todays_log + note),
        )
    parts = []
    if memory.strip():
        shown = memory if max_chars is None else memory[:max_chars]
        more = len(memory) - len(shown)
        note = f"\n[… {more} more characters of MEMORY.md not shown]" if more else ""
        parts.append(
            _section(
                "Curated long-term memory (read-only; do not restate):",
                render_block("memory_md", shown + note),
            )
        )
    if todays_log.strip():
        shown = todays_log
        if max_chars is not None and len(todays_log) > max_chars:
            shown = todays_log[len(todays_log) - max_chars :]
        more = len(todays_log) - len(shown)
        note = f"[… {more} earlier characters of the log not shown]\n" if more else ""
        parts.append(
            _section(
                f"Today's log{where} so far (your bullets are appended after it):",
                render_block("todays_log", note + shown),
            )
        )
    return "\n\n".join(parts)


def flush_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    memory: str = "",
    todays_log: str = "",
    today: str = "",
    log_path: str = "",
    template: str | None = None,
    lean: bool = True,
    reference: str | None = None,
    conversation: str | None = None,
) -> list[Message]:
    """The ``flush`` request: the instructions, the dedup reference, the new ``messages``
    (the stable part first, so that a provider's prompt cache can reuse it).

    The reference is ``reference`` when given (:func:`flush_reference`), else the whole
    of ``memory`` and ``todays_log``. ``conversation``, when given, is ``messages``
    rendered already with :func:`flush_conversation` (``lean`` as here); the memory flush
    passes it to render them once.
    """
    if reference is None:
        reference = flush_reference(memory, todays_log, log_path=log_path)
    if conversation is None:
        conversation = flush_conversation(messages, lean=lean)
    parts = [reference] if reference else []
    parts.append(
        _section(
            "Extract only NEW facts worth remembering from this conversation excerpt:",
            render_block("conversation", conversation),
        )
    )
    system = _system(template, "flush", today=today or "unknown", log_path=log_path)
    return [system, {"role": "user", "content": "\n\n".join(parts)}]


def consolidation_request(
    memory: str,
    daily_logs: str | Mapping[str, str],
    *,
    max_tokens: int,
    template: str | None = None,
    memory_tokens: int | None = None,
) -> list[Message]:
    """The ``consolidation`` request: the current MEMORY.md, the new entries, the budget.

    ``daily_logs`` is the new text, or a mapping of each log's path to its new text (each
    then under a ``### <path>`` line). ``memory_tokens``, MEMORY.md's size, tells the
    model whether it is within the budget. The budget also goes into the instructions:
    through ``$max_tokens`` / ``$max_chars``, or as a sentence after them.
    """
    if isinstance(daily_logs, Mapping):
        daily_logs = "\n\n".join(f"### {path}\n{text.strip()}" for path, text in daily_logs.items())
    max_chars = max_tokens * 4
    system = _system(template, "consolidation", max_tokens=max_tokens, max_chars=max_chars)
    if "$max_tokens" not in (template if template is not None else load_template("consolidation")):
        system["content"] += f"\n\nStay within {max_tokens} tokens (about {max_chars} characters)."
    if not memory.strip():
        state = "empty; "
    elif memory_tokens is None:
        state = ""
    elif memory_tokens > max_tokens:
        state = f"{memory_tokens} tokens, over budget: trim it; "
    else:
        state = f"{memory_tokens} tokens, within budget; "
    parts = [
        _section(
            f"Current MEMORY.md ({state}budget {max_tokens} tokens, about {max_chars} characters):",
            render_block("memory_md", memory.strip()),
        )
    ]
    if daily_logs.strip():
        parts.append(
            _section(
                "New daily-log entries since the last consolidation:",
                render_block("daily_logs", daily_logs),
            )
        )
    else:
        parts.append("No new daily-log entries: rewrite MEMORY.md within its budget.")
    return [system, {"role": "user", "content": "\n\n".join(parts)}]
