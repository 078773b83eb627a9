"""Messages in other shapes (SWE-agent trajectories, Anthropic's content blocks) turned
into the OpenAI chat shape harnessmem works on: :func:`normalize_messages`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harnessmem.errors import MessageFormatError
from harnessmem.messages._formats import (
    from_java_session_log,
    from_locomo,
)
from harnessmem.messages._formats import (
    is_java_session_log as is_java_session_log,
)
from harnessmem.messages._formats import (
    is_locomo as is_locomo,
)
from harnessmem.messages._formats import (
    is_locomo_list as is_locomo_list,
)
from harnessmem.messages._formats import (
    sample_name as sample_name,
)
from harnessmem.messages.structure import validate_messages

Message = dict[str, Any]

# "image" is ambiguous, so these alone decide that a transcript is Anthropic's.
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
)
_SWE_AGENT_KEYS: Final = frozenset({"tool_call_ids", "message_type", "agent", "thought", "action"})


def _openai_call(call: Any, where: str) -> dict[str, Any]:
    """A tool call in OpenAI shape; dict arguments become JSON text."""
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        raise MessageFormatError(f"{where} is not an OpenAI tool call object")
    function = call["function"]
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps({} if arguments is None else arguments, ensure_ascii=False)
    return {
        "id": call.get("id"),
        "type": call.get("type") or "function",
        "function": {"name": function.get("name"), "arguments": arguments},
    }


def from_swe_agent(trajectory: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[Message]:
    """OpenAI messages from a SWE-agent trajectory (a ``.traj`` dict or its ``history``).

    Only the OpenAI keys survive; SWE-agent's own (``agent``, ``message_type``,
    ``thought``, ``action``, ``is_demo``, ...) are dropped, content is kept as
    is. A tool message carries a ``tool_call_ids`` list: it becomes one tool
    message per id, each with the same content, because OpenAI needs a result
    for every call id (SWE-agent itself answers only the first id).
    """
    history = trajectory.get("history") if isinstance(trajectory, Mapping) else trajectory
    if not isinstance(history, Sequence) or isinstance(history, str | bytes):
        raise MessageFormatError("SWE-agent trajectory has no 'history' list of messages")
    out: list[Message] = []
    for index, item in enumerate(history):
        if not isinstance(item, Mapping):
            raise MessageFormatError(f"message {index}: is {type(item).__name__}, not an object")
        base = {k: item[k] for k in ("role", "content", "name") if item.get(k) is not None}
        if "content" not in base:
            base["content"] = None if item.get("tool_calls") else ""
        if item.get("role") == "tool":
            ids = item.get("tool_call_ids")
            if ids is None and item.get("tool_call_id"):
                ids = [item["tool_call_id"]]
            if not ids or not all(isinstance(i, str) and i for i in ids):
                raise MessageFormatError(f"message {index}: tool message has no tool_call_ids")
            out.extend({**base, "tool_call_id": call_id} for call_id in ids)
            continue
        if item.get("tool_calls"):
            base["tool_calls"] = [
                _openai_call(call, f"message {index}: tool call {position}")
                for position, call in enumerate(item["tool_calls"])
            ]
        out.append(base)
    return out


def _text_of_blocks(blocks: Any, where: str) -> str:
    """Plain text of an Anthropic content value (a string or text blocks)."""
    if blocks is None or isinstance(blocks, str):
        return blocks or ""
    texts: list[str] = []
    for position, block in enumerate(blocks):
        if isinstance(block, Mapping) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") == "image":
            texts.append("[image]")  # OpenAI tool messages carry text only
        else:
            raise MessageFormatError(f"{where}: block {position} is not a text block")
    return "\n".join(texts)


def _image_part(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif isinstance(source, Mapping) and source.get("type") == "url":
        url = str(source.get("url"))
    else:
        raise MessageFormatError(f"{where}: image block has no base64 or url source")
    return {"type": "image_url", "image_url": {"url": url}}


def _from_anthropic_assistant(content: Any, index: int) -> Message:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for position, block in enumerate(content):
        where = f"message {index}: block {position}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            if not block.get("id"):
                raise MessageFormatError(f"message {index}: tool_use block {position} has no id")
            if not block.get("name"):
                raise MessageFormatError(f"message {index}: tool_use block {position} has no name")
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block["name"],
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # hidden reasoning is not part of the OpenAI transcript
        else:
            raise MessageFormatError(f"{where}: unsupported assistant block type {kind!r}")
    message: Message = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _from_anthropic_user(content: Any, index: int) -> list[Message]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(content):
        where = f"message {index}: block {position}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "tool_result":
            if not block.get("tool_use_id"):
                raise MessageFormatError(f"{where}: tool_result block has no tool_use_id")
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": block["tool_use_id"],
                    "content": _text_of_blocks(block.get("content"), where),
                }
            )
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(_image_part(block, where))
        else:
            raise MessageFormatError(f"{where}: unsupported user block type {kind!r}")
    # Tool results go first: OpenAI wants them right after the calling message,
    # and the user's own words are the next turn.
    out = results
    if parts:
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def from_anthropic(messages: Sequence[Mapping[str, Any]], *, system: Any = None) -> list[Message]:
    """OpenAI messages from Anthropic Messages-API messages (and its ``system``).

    ``system`` (a string or text blocks) becomes a leading system message.
    Assistant text blocks join into ``content`` (newline-separated) and
    ``tool_use`` blocks become ``tool_calls`` with JSON ``arguments``; thinking
    blocks are dropped. A user message's ``tool_result`` blocks become ``tool``
    messages (text content; images in results become ``[image]``; ``is_error``
    is not kept), placed before a user message holding its text and image blocks.
    """
    out: list[Message] = []
    if system:
        out.append({"role": "system", "content": _text_of_blocks(system, "system")})
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise MessageFormatError(f"message {index}: is {type(message).__name__}, not an object")
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, str | list):
            raise MessageFormatError(f"message {index}: content must be text or a list of blocks")
        if role == "assistant":
            out.append(_from_anthropic_assistant(content, index))
        elif role == "user":
            out.extend(_from_anthropic_user(content, index))
        elif role == "system":
            out.append({"role": "system", "content": _text_of_blocks(content, f"message {index}")})
        else:
            raise MessageFormatError(f"message {index}: role {role!r} is not user or assistant")
    return out


def _looks_swe_agent(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, Mapping) and not _SWE_AGENT_KEYS.isdisjoint(m) for m in messages)


def _looks_anthropic(messages: Sequence[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def normalize_messages(data: Any) -> list[Message]:
    """OpenAI messages from any transcript this module knows, detected by shape.

    Accepted: a list of OpenAI messages (returned as validated shallow copies
    with every key kept); a list of Anthropic messages (recognised by
    ``tool_use``/``tool_result``/``thinking`` blocks); a SWE-agent trajectory or
    history (recognised by ``history`` or SWE-agent keys such as
    ``tool_call_ids``); a dict holding the list under ``messages`` (with an
    Anthropic ``system`` alongside, when present), ``history`` or ``traj``
    (tau-bench runs); a LoCoMo sample or its ``conversation`` (``session_N`` lists of
    turns, see :func:`from_locomo`); the Java harness's session log records
    (:func:`from_java_session_log`). Raises ``MessageFormatError`` naming the problem; a
    list of LoCoMo samples is one (each is its own conversation, with its own dates).
    """
    if isinstance(data, Mapping):
        if isinstance(data.get("history"), list):
            return from_swe_agent(data)
        for key in ("messages", "traj"):
            inner = data.get(key)
            if isinstance(inner, list):
                if key == "messages" and "system" in data:
                    return from_anthropic(inner, system=data["system"])
                return normalize_messages(inner)
        if is_locomo(data):
            return from_locomo(data)
        raise MessageFormatError(
            "cannot find messages in this object: expected a 'messages', 'history' or "
            f"'traj' list; its keys are {sorted(map(str, data))[:10]}"
        )
    if isinstance(data, str | bytes) or not isinstance(data, Sequence):
        raise MessageFormatError(
            f"cannot read messages from {type(data).__name__}: expected a list of message "
            "objects or a dict holding one"
        )
    if is_locomo_list(data):
        names = ", ".join(sample_name(item, i) for i, item in enumerate(data[:5]))
        raise MessageFormatError(
            f"{len(data)} LoCoMo conversations ({names}{', ...' if len(data) > 5 else ''}): "
            "normalise one at a time",
            hint="from_locomo(sample) for each, or load_transcript(path, sample=...)",
        )
    if is_java_session_log(data):
        return from_java_session_log(data)
    if _looks_swe_agent(data):
        return from_swe_agent(data)
    if _looks_anthropic(data):
        return from_anthropic(data)
    validate_messages(data)
    return [dict(message) for message in data]
