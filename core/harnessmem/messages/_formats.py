"""Transcript formats that are not lists of messages, and the words for a file that is none.

Private; :mod:`harnessmem.messages` and :mod:`harnessmem.replay` use it.

**LoCoMo** (Maharana et al., ACL 2024) stores long conversations between two people: a
file is a list of samples, each ``{"sample_id", "conversation", ...}``; the conversation
holds ``speaker_a`` and ``speaker_b`` (names), and for each session ``session_N`` (a list
of turns ``{"speaker", "dia_id", "text", "blip_caption"?, ...}``) and
``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``). :func:`from_locomo` turns one
sample (or its ``conversation`` object) into OpenAI messages:

- every turn is a ``user`` message whose ``name`` is the speaker: both people are users of
  the agent whose memory this is. The renderers show the name (``[USER Caroline]: ...``),
  so a fact goes to the person who said it; an ``assistant`` side would be read as the
  agent, whose own words the flush takes only as decisions;
- ``timestamp`` is the session's date and time, as written (no offset: a replay reads it
  in ``workspace.timezone``), the same for every turn of the session;
- ``dia_id`` (``"D3:7"``) is kept, so the session log can be matched to LoCoMo's
  evidence ids; an image's caption is appended to the text as ``[shares a photo: ...]``;
- sessions come in their numbers' order; sessions without turns are skipped; the other
  keys of a sample (``qa``, ``observation``, ``event_summary``, ...) are not messages.

**The Java harness's session logs** (AgentScope Java, ``agents/<agent>/sessions/<id>.log.jsonl``)
hold one ``SessionEntry`` a line: ``{"type": "message", "role": "USER", "content": ...}``,
``{"type": "tool_use", "toolCallId", "name", "input"}`` after the assistant message that made
the call, ``{"type": "tool_result", "toolCallId", "name", "output"}``, and ``compaction`` /
``summary`` records its writer defines but never writes. :func:`from_java_session_log`
turns them into OpenAI messages: roles lower-cased, each ``tool_use`` a tool call of the
assistant message before it (an assistant message is made when there is none), each
``tool_result`` a ``tool`` message; ``timestamp`` (epoch seconds, or ISO text) kept as an
ISO instant in UTC; placeholders for content the writer could not store (``blockTypes``
such as ``["image"]``) become a bracketed note; records of other types are skipped.

:func:`describe` says what a file that is no known transcript looks like, and
:data:`FORMATS` lists the known ones, for the error that rejects it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from harnessmem.errors import MessageFormatError

__all__ = [
    "FORMATS",
    "describe",
    "from_java_session_log",
    "from_locomo",
    "is_java_session_log",
    "is_locomo",
    "is_locomo_list",
    "sample_name",
]

Message = dict[str, Any]

#: The transcript shapes ``harnessmem replay`` reads, as the rejection of a file lists them.
FORMATS: Final = (
    "OpenAI chat messages (a JSON list of {role, content, ...} objects, or JSON Lines)",
    'Anthropic messages ({"system", "messages": [...]})',
    'a SWE-agent trajectory ({"history": [...]})',
    'runs such as tau-bench\'s ([{"traj": [...]}, ...])',
    'LoCoMo conversations ([{"sample_id", "conversation": {"speaker_a", "speaker_b", '
    '"session_N": [{"speaker", "text"}], "session_N_date_time"}}, ...])',
    'session logs of the Java harness (JSON Lines of {"type": "message" | "tool_use" | '
    '"tool_result", ...})',
)

_SESSION: Final = re.compile(r"session_(\d+)")
# "1:56 pm on 8 May, 2023" (LoCoMo's only shape); month names in English, whatever the locale.
_DATE: Final = re.compile(
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>[ap])\.?m\.?\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[a-z]+)\.?,?\s+(?P<year>\d{4})",
    re.IGNORECASE,
)
_MONTH_NAMES: Final = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTHS: Final = {
    name: number
    for number, full in enumerate(_MONTH_NAMES, start=1)
    for name in (full, full[:3], full[:4])
}


# ------------------------------------------------------------------------------ LoCoMo


def _conversation_of(item: Any) -> Mapping[str, Any] | None:
    """The LoCoMo conversation object of a sample (or the object itself), if it is one."""
    if not isinstance(item, Mapping):
        return None
    inner = item.get("conversation")
    talk = inner if isinstance(inner, Mapping) else item
    if any(_SESSION.fullmatch(str(key)) and isinstance(v, list) for key, v in talk.items()):
        return talk
    return None


def is_locomo(item: Any) -> bool:
    """Whether ``item`` is a LoCoMo sample or its ``conversation`` object."""
    return _conversation_of(item) is not None


def is_locomo_list(data: Any) -> bool:
    """Whether ``data`` is a list of LoCoMo samples (a LoCoMo file)."""
    return isinstance(data, list) and bool(data) and all(is_locomo(item) for item in data)


def sample_name(item: Mapping[str, Any], index: int) -> str:
    """A sample's ``sample_id``, or ``#index`` for one without."""
    value = item.get("sample_id")
    return str(value) if isinstance(value, str | int) and str(value).strip() else f"#{index}"


def _session_time(text: Any, key: str) -> str:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as naive ISO text (``2023-05-08T13:56:00``)."""
    match = _DATE.fullmatch(text.strip()) if isinstance(text, str) else None
    month = _MONTHS.get(match["month"].lower()) if match else None
    if match is None or month is None:
        raise MessageFormatError(
            f"{key} is {text!r}, not a LoCoMo date",
            hint='LoCoMo dates read like "1:56 pm on 8 May, 2023"',
        )
    hour = int(match["hour"]) % 12 + (12 if match["half"].lower() == "p" else 0)
    try:
        moment = datetime(int(match["year"]), month, int(match["day"]), hour, int(match["minute"]))
    except ValueError as exc:
        raise MessageFormatError(f"{key} is {text!r}: {exc}") from None
    return moment.isoformat()


def _turn_message(turn: Any, where: str, timestamp: str | None) -> Message:
    if not isinstance(turn, Mapping):
        raise MessageFormatError(f"{where} is {type(turn).__name__}, not a turn object")
    speaker, text = turn.get("speaker"), turn.get("text")
    if not isinstance(speaker, str) or not speaker.strip():
        raise MessageFormatError(f"{where} has no speaker")
    if not isinstance(text, str):
        raise MessageFormatError(f"{where} has no text")
    caption = turn.get("blip_caption")
    content = (
        f"{text} [shares a photo: {caption}]" if isinstance(caption, str) and caption else text
    )
    message: Message = {"role": "user", "name": speaker.strip(), "content": content}
    if timestamp is not None:
        message["timestamp"] = timestamp
    if isinstance(turn.get("dia_id"), str):
        message["dia_id"] = turn["dia_id"]
    return message


def from_locomo(sample: Mapping[str, Any]) -> list[Message]:
    """OpenAI messages of one LoCoMo sample (or its ``conversation``); see the module doc.

    Raises ``MessageFormatError`` naming the session and turn of a turn without speaker
    or text, and the key of a date that does not read as LoCoMo's.
    """
    talk = _conversation_of(sample)
    if talk is None:
        raise MessageFormatError("not a LoCoMo conversation: it has no session_N list of turns")
    numbers = sorted(
        int(match[1])
        for key, value in talk.items()
        if (match := _SESSION.fullmatch(str(key))) and isinstance(value, list)
    )
    messages: list[Message] = []
    for number in numbers:
        key = f"session_{number}"
        turns = talk[key]
        if not turns:
            continue
        stamp_key = f"{key}_date_time"
        stamp = _session_time(talk[stamp_key], stamp_key) if stamp_key in talk else None
        for position, turn in enumerate(turns):
            messages.append(_turn_message(turn, f"{key} turn {position}", stamp))
    return messages


# ------------------------------------------------------------------------------ Java session logs

_JAVA_TYPES: Final = frozenset({"message", "tool_use", "tool_result", "compaction", "summary"})
_JAVA_ROLES: Final = {"USER": "user", "ASSISTANT": "assistant", "SYSTEM": "system", "TOOL": "tool"}


def is_java_session_log(data: Any) -> bool:
    """Whether ``data`` is a list of the Java harness's ``SessionEntry`` records."""
    return (
        isinstance(data, Sequence)
        and not isinstance(data, str | bytes)
        and bool(data)
        and all(isinstance(r, Mapping) and r.get("type") in _JAVA_TYPES for r in data)
        and any(r.get("type") == "message" and r.get("role") in _JAVA_ROLES for r in data)
    )


def _java_time(value: Any) -> str | None:
    """A ``timestamp`` (epoch seconds, possibly with nanoseconds, or ISO text) as ISO UTC."""
    from datetime import UTC

    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _java_arguments(value: Any) -> str:
    import json

    if isinstance(value, Mapping) and value.get("_truncated") and "_preview" in value:
        return str(value["_preview"])  # the writer kept only the start of the JSON
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def from_java_session_log(records: Sequence[Mapping[str, Any]]) -> list[Message]:
    """OpenAI messages of a Java harness session log; see the module doc.

    Raises ``MessageFormatError`` naming the line of a record without a usable role,
    tool call id or text.
    """
    messages: list[Message] = []
    for number, record in enumerate(records, start=1):
        where = f"record {number}"
        kind = record.get("type")
        stamp = _java_time(record.get("timestamp"))
        timed: Message = {"timestamp": stamp} if stamp else {}
        if kind == "message":
            role = _JAVA_ROLES.get(str(record.get("role")).upper())
            if role is None:
                raise MessageFormatError(f"{where}: role {record.get('role')!r} is not a Java role")
            content = record.get("content")
            if not isinstance(content, str):
                raise MessageFormatError(f"{where}: content is not text")
            blocks = record.get("blockTypes")
            if not content and isinstance(blocks, list) and blocks:
                content = "[" + ", ".join(map(str, blocks)) + "]"
            messages.append({"role": role, "content": content, **timed})
        elif kind == "tool_use":
            call_id, name = record.get("toolCallId"), record.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise MessageFormatError(f"{where}: a tool_use needs toolCallId and name")
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": "", **timed})
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": _java_arguments(record.get("input"))},
            }
            messages[-1].setdefault("tool_calls", []).append(call)
        elif kind == "tool_result":
            call_id, output = record.get("toolCallId"), record.get("output")
            if not isinstance(call_id, str):
                raise MessageFormatError(f"{where}: a tool_result needs a toolCallId")
            message: Message = {
                "role": "tool",
                "tool_call_id": call_id,
                "content": output if isinstance(output, str) else "",
                **timed,
            }
            if isinstance(record.get("name"), str):
                message["name"] = record["name"]
            messages.append(message)
    return messages


# ------------------------------------------------------------------------------ rejection


def _keys(item: Mapping[str, Any], limit: int = 8) -> str:
    keys = sorted(map(str, item))
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "") or "no keys"


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return "null" if value is None else type(value).__name__


def _items(values: Sequence[Any]) -> str:
    """``3 objects, the first with keys a, b`` / ``2 items: text, a list``."""
    if not values:
        return "no items"
    first = values[0]
    if all(isinstance(v, Mapping) for v in values):
        count = f"{len(values)} object{'s' if len(values) != 1 else ''}"
        return f"{count}, the first with keys {_keys(first)}"
    kinds = sorted({_kind(v) for v in values})
    return f"{len(values)} items ({', '.join(kinds)}), the first {_kind(first)}"


def describe(data: Any, *, lines: bool = False) -> str:
    """What a parsed transcript file looks like: its top-level shape, its keys and those of
    its first message (``lines``: it was read as JSON Lines)."""
    if lines:
        return f"JSON Lines of {_items(data)}"
    if isinstance(data, Mapping):
        text = f"a JSON object with keys {_keys(data)}"
        for key, value in data.items():
            if isinstance(value, list) and value:
                return f"{text}; its {key!r} list has {_items(value)}"
        return text
    if isinstance(data, list):
        return f"a JSON list of {_items(data)}"
    return f"JSON {_kind(data)}, not a list or an object"
