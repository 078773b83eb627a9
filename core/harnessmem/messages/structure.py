"""Helpers for OpenAI-format chat messages: tool-call pairing, safe cut points,
fingerprints, validation, and normalisers for other transcript formats.

Messages are plain dicts with ``role``, ``content``, ``tool_calls``,
``tool_call_id`` and ``name``, as litellm and most agent frameworks speak them.
Nothing here mutates its input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Final

from harnessmem.encoding import content_hash
from harnessmem.errors import MessageFormatError
from harnessmem.messages._checks import (
    value_nesting_problem,
)

Message = dict[str, Any]

#: The keys that may carry the time a message was said, in order of preference.
TIME_KEYS: Final = ("timestamp", "created_at", "time")

_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
# Block types only Anthropic's Messages API uses; OpenAI parts share "text" and
_MAX_PROBLEMS: Final = 20
_INDEXED: Final = re.compile(r"message (\d+): (.*)", re.DOTALL)


# ---------------------------------------------------------------- the text of content


def content_text(content: Any) -> str:
    """The text of a message's content: the string itself, or its text parts joined by
    newlines (images and other parts give none); ``""`` for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def text_only(content: Any) -> str | None:
    """The content's text when it holds nothing else: the string, or its text parts
    joined as they are; None when it has any other part, is empty, or is not text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = [part.get("text") if isinstance(part, Mapping) else None for part in content]
        if all(isinstance(text, str) for text in texts):
            return "".join(text for text in texts if isinstance(text, str))
    return None


# ---------------------------------------------------------------- tool-call pairing


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    """The ids of an assistant message's tool calls, in order ([] when it has none)."""
    ids: list[str] = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            ids.append(call["id"])
    return ids


@dataclass(frozen=True)
class ToolPairing:
    """Which tool results answer which assistant tool-call messages.

    ``results`` maps the index of every assistant message with tool calls to the
    ascending indices of the tool messages that answer it (possibly none).
    ``parents`` is the inverse, result index to assistant index. ``orphans``
    lists tool messages that no assistant message anywhere declares.
    ``unanswered`` maps an assistant index to the ids of its calls that got no
    result.
    """

    results: dict[int, list[int]] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)
    orphans: list[int] = field(default_factory=list)
    unanswered: dict[int, list[str]] = field(default_factory=dict)


def pair_tool_calls(messages: Sequence[Mapping[str, Any]]) -> ToolPairing:
    """Pair every tool result with the assistant message that issued its call. O(n).

    A result answers the latest preceding assistant message that declares its
    ``tool_call_id``: providers and agents do reuse ids within one transcript
    (tau-bench and SWE-agent both do), and the latest declaration is the one a
    result can answer. A result whose id is declared only after it (malformed,
    but seen in hand-edited transcripts) is paired with the first such
    declaration, so cutting never separates the two. Results may come in any
    order and need not be adjacent to their call.
    """
    latest: dict[str, int] = {}
    first: dict[str, int] = {}
    results: dict[int, list[int]] = {}
    parents: dict[int, int] = {}
    answered: set[tuple[int, str]] = set()
    early: list[tuple[int, str]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            ids = tool_call_ids(message)
            if ids:
                results[index] = []
                for call_id in ids:
                    latest[call_id] = index
                    first.setdefault(call_id, index)
        elif role == "tool":
            result_id = message.get("tool_call_id")
            if not isinstance(result_id, str):
                continue
            parent = latest.get(result_id)
            if parent is None:
                early.append((index, result_id))
                continue
            results[parent].append(index)
            parents[index] = parent
            answered.add((parent, result_id))
    orphans: list[int] = []
    for index, call_id in early:
        parent = first.get(call_id)
        if parent is None:
            orphans.append(index)
            continue
        results[parent].append(index)
        results[parent].sort()
        parents[index] = parent
        answered.add((parent, call_id))
    unanswered: dict[int, list[str]] = {}
    for parent in results:
        missing = [c for c in tool_call_ids(messages[parent]) if (parent, c) not in answered]
        if missing:
            unanswered[parent] = missing
    return ToolPairing(results=results, parents=parents, orphans=orphans, unanswered=unanswered)


def _unsafe_cuts(messages: Sequence[Mapping[str, Any]]) -> list[bool]:
    """For each cut position 0..n, whether it would separate a call from a result.

    Every (call message a, its results r...) group covers the messages from
    min(a, r...) to max(a, r...); cuts strictly inside that range are unsafe. A
    difference array marks all ranges in O(n) instead of O(n * span).
    """
    size = len(messages)
    delta = [0] * (size + 2)
    for parent, result_indexes in pair_tool_calls(messages).results.items():
        if not result_indexes:
            continue
        low = min(parent, result_indexes[0])
        high = max(parent, result_indexes[-1])
        delta[low + 1] += 1
        delta[high + 1] -= 1
    unsafe: list[bool] = []
    depth = 0
    for cut in range(size + 1):
        depth += delta[cut]
        unsafe.append(depth > 0)
    return unsafe


def safe_cut_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Cut positions ``c`` in 0..len(messages), ascending, such that splitting into
    ``messages[:c]`` and ``messages[c:]`` keeps every assistant message with tool
    calls on the same side as all of its results. Orphan results and unanswered
    calls do not constrain. 0 and len(messages) are always safe. O(n).
    """
    return [cut for cut, unsafe in enumerate(_unsafe_cuts(messages)) if not unsafe]


def atomic_spans(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Half-open ranges ``(start, end)`` of messages that must stay together.

    Each span is a maximal union of overlapping call/result groups (parallel
    calls and interleaved results merge into one span); messages outside every
    span can be cut around freely. O(n).
    """
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for cut, unsafe in enumerate(_unsafe_cuts(messages)):
        if unsafe and start is None:
            start = cut - 1
        elif not unsafe and start is not None:
            spans.append((start, cut))
            start = None
    return spans


# ---------------------------------------------------------------- fingerprints


def _canonical_part(part: Any) -> Any:
    if isinstance(part, Mapping):
        # cache_control is a request-time hint (Anthropic prompt caching), not content.
        return {k: v for k, v in part.items() if k != "cache_control"}
    return part


def _canonical_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            calls.append({"raw": call})
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        calls.append({"id": None, "name": legacy.get("name"), "arguments": legacy.get("arguments")})
    return calls


def fingerprint(message: Mapping[str, Any]) -> str:
    """A stable 32-hex-digit id of a message's meaning (truncated SHA-256).

    Hashed: ``role``; ``content`` (a string, or the list of parts with each part's
    keys except ``cache_control``); ``name``; ``tool_call_id``; and for each tool
    call (and the legacy ``function_call``) its id, function name and arguments
    text. Missing, None and empty values are the same; key order and every
    other key (timestamps, ``agent``, ``cache_control``, ...) do not count.
    Identical messages at different positions share a fingerprint: it names
    content, not position.
    """
    content = message.get("content")
    if isinstance(content, list | tuple):
        content = [_canonical_part(part) for part in content]
    canonical = {
        "role": message.get("role"),
        "content": content if content not in (None, "", []) else None,
        "name": message.get("name") or None,
        "tool_call_id": message.get("tool_call_id") or None,
        "tool_calls": _canonical_calls(message) or None,
    }
    payload = json.dumps(
        canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    # surrogatepass: a lone surrogate (a surrogateescape'd file name) must not make the
    # fingerprint, and with it the offload of the whole prefix, fail.
    return content_hash(payload.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- validation


def _call_problems(index: int, message: Mapping[str, Any]) -> Iterable[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list | tuple):
        yield f"message {index}: tool_calls is {type(calls).__name__}, expected a list"
        return
    for position, call in enumerate(calls):
        where = f"message {index}: tool call {position}"
        if not isinstance(call, Mapping):
            yield f"{where} is {type(call).__name__}, expected an object"
            continue
        if not isinstance(call.get("id"), str) or not call["id"]:
            yield f"{where} has no id"
        function = call.get("function")
        if not isinstance(function, Mapping):
            yield f"{where} has no function object"
            continue
        if not isinstance(function.get("name"), str) or not function["name"]:
            yield f"{where} has no function name"
        if not isinstance(function.get("arguments"), str):
            yield f"{where}: arguments must be a JSON string"


def _message_problems(index: int, message: Any) -> Iterable[str]:
    if not isinstance(message, Mapping):
        yield f"message {index}: is {type(message).__name__}, expected an object"
        return
    role = message.get("role")
    if role not in _ROLES:
        yield f"message {index}: role {role!r} is not one of {', '.join(sorted(_ROLES))}"
        return
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        yield f"message {index}: content is {type(content).__name__}, expected text or a list"
    if role in ("system", "developer", "user") and content is None:
        yield f"message {index}: {role} message has no content"
    if (
        role == "assistant"
        and content is None
        and not (
            message.get("tool_calls") or message.get("function_call") or message.get("refusal")
        )
    ):
        yield f"message {index}: assistant message has neither content nor tool_calls"
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            yield f"message {index}: tool message has no tool_call_id"
    if role != "assistant" and message.get("tool_calls"):
        yield f"message {index}: only assistant messages may carry tool_calls"
    yield from _call_problems(index, message)
    for key, value in message.items():
        deep = value_nesting_problem(str(key), value)
        if deep is not None:
            yield f"message {index}: {deep}"


def validate_messages(
    messages: Sequence[Mapping[str, Any]], *, require_pairing: bool = False
) -> None:
    """Check roles and required fields; raise ``MessageFormatError`` naming each bad index.

    Values nested more than 100 levels deep (or referring to themselves) are rejected
    too: serialising or copying them would exhaust the stack.

    With ``require_pairing`` also reject tool results that answer no call and
    calls without a result, which OpenAI-compatible APIs refuse.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise MessageFormatError(
            f"messages must be a list of message objects, got {type(messages).__name__}"
        )
    problems = [p for i, m in enumerate(messages) for p in _message_problems(i, m)]
    if require_pairing and not problems:
        pairing = pair_tool_calls(messages)
        problems += [f"message {i}: tool result answers no tool call" for i in pairing.orphans]
        problems += [
            f"message {i}: tool call {call_id!r} has no result"
            for i, ids in sorted(pairing.unanswered.items())
            for call_id in ids
        ]
    if problems:
        raise MessageFormatError(_headline(problems), problems=problems)


def _headline(problems: Sequence[str]) -> str:
    """The problems as one line, the messages that share a problem named together
    (``messages 0-4: role None is ...``, not the same words five times)."""
    shared: dict[str, list[int]] = {}
    for problem in problems:
        match = _INDEXED.fullmatch(problem)
        text, index = (match[2], int(match[1])) if match else (problem, -1)
        shared.setdefault(text, []).append(index)
    parts = []
    for text, indexes in shared.items():
        named = [i for i in indexes if i >= 0]
        if not named:
            parts.append(text)
        else:
            label = "message" if len(named) == 1 else "messages"
            parts.append(f"{label} {_index_ranges(named)}: {text}")
    headline = parts[0]
    if len(parts) > 1:
        shown = "; ".join(parts[1:_MAX_PROBLEMS])
        headline += f" (and {len(parts) - 1} more: {shown})"
    return headline


def _index_ranges(indexes: Sequence[int], limit: int = 6) -> str:
    """``0-4, 7, 9`` (runs of consecutive indexes joined; at most ``limit`` runs shown)."""
    runs: list[list[int]] = []
    for index in indexes:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        shown.append("...")
    return ", ".join(shown)


def message_time(message: Mapping[str, Any], zone: tzinfo = UTC) -> float | None:
    """Seconds since the epoch of a message's ``timestamp`` (or ``created_at``, ``time``),
    if any: ISO 8601 text (a trailing ``Z`` or an offset; a time without one is in
    ``zone``) or a number."""
    for key in TIME_KEYS:
        value = message.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=zone)
            return moment.timestamp()
    return None
