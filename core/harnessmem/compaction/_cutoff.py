"""Where compaction cuts a conversation, and the pre-pass that shortens old tool arguments.

Pure functions over OpenAI-format messages; nothing here touches the workspace or a
model, so the rules can be tested exhaustively (tests/test_compaction.py does, with
hypothesis). Conventions: ``head`` is the number of leading system (or developer)
messages, which are never cut; the *conversation* is ``messages[head:]``; a cut ``c``
(relative to the conversation) drops ``conversation[:c]`` and keeps ``conversation[c:]``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from harnessmem.messages import pair_tool_calls, safe_cut_points

__all__ = [
    "HEAD_ROLES",
    "TRUNCATION_MARK",
    "choose_cut",
    "head_length",
    "keep_start",
    "truncate_tool_args",
]

Message = dict[str, Any]

#: Roles that stay at the head of the context when they open it.
HEAD_ROLES: Final = frozenset({"system", "developer"})
#: Appended to a tool-call argument that was cut; also how a cut value is recognised,
#: so that cutting again changes nothing.
TRUNCATION_MARK: Final = "...(argument truncated)"


def head_length(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages are system or developer messages (the pinned head).

    System messages further down are part of the conversation: a transcript made of
    several sessions carries one per session, and pinning all of them would keep the
    context from ever shrinking.
    """
    head = 0
    for message in messages:
        if message.get("role") not in HEAD_ROLES:
            break
        head += 1
    return head


def _suffix_start(sums: Sequence[int], budget: int) -> int:
    """The smallest ``c`` such that the messages from ``c`` on cost at most ``budget``.

    ``sums`` are prefix sums (``sums[c]`` = tokens of the first ``c`` messages); suffix
    costs shrink as ``c`` grows, so a binary search over ``sums[-1] - budget`` finds it.
    """
    return bisect.bisect_left(sums, sums[-1] - budget)


def keep_start(sums: Sequence[int], *, keep_messages: int, keep_tokens: int) -> int:
    """Where the kept tail would start by the keep rules alone (at most ``n - 1``).

    ``keep_tokens > 0``: the longest tail that costs at most ``keep_tokens``;
    otherwise the last ``keep_messages`` messages. At least the last message is
    always kept, even when it alone is over the budget (the caller shrinks it).
    """
    n = len(sums) - 1
    if n == 0:
        return 0
    start = _suffix_start(sums, keep_tokens) if keep_tokens > 0 else max(0, n - keep_messages)
    return min(start, n - 1)


def choose_cut(
    conversation: Sequence[Mapping[str, Any]],
    sums: Sequence[int],
    *,
    keep_messages: int,
    keep_tokens: int = 0,
    max_tail_messages: int | None = None,
    max_tail_tokens: int | None = None,
) -> int:
    """The cut for ``conversation``: drop ``conversation[:cut]``, keep the rest.

    ``sums`` are the token prefix sums of ``conversation`` (``len + 1`` items). Rules:

    1. The cut never separates an assistant message with tool calls from any of its
       results (parallel calls and results out of order included): it is one of
       :func:`~harnessmem.messages.safe_cut_points`.
    2. The kept tail is never empty.
    3. *Hard bounds*: the tail has at most ``max_tail_messages`` messages and at most
       ``max_tail_tokens`` tokens (what still fits under the triggers once the summary
       is added). When even the last call group is over them, the tail is that group
       alone and the caller shrinks what is too large.
    4. *Preference*: within the hard bounds, keep as much as the keep rules ask
       (:func:`keep_start`): the largest safe cut at or before the keep point, else the
       smallest safe cut after it.
    5. A tool result at the start of the tail that answers no call anywhere (an orphan)
       goes to the dropped part, where it is summarised and offloaded, rather than
       following the summary where providers would reject it.

    Returns 0 when nothing can be dropped.
    """
    n = len(conversation)
    if n <= 1:
        return 0
    preferred = keep_start(sums, keep_messages=keep_messages, keep_tokens=keep_tokens)
    lowest = 0
    if max_tail_messages is not None:
        lowest = max(lowest, n - max(1, max_tail_messages))
    if max_tail_tokens is not None:
        lowest = max(lowest, _suffix_start(sums, max(0, max_tail_tokens)))
    safe = [cut for cut in safe_cut_points(conversation) if cut < n]
    within = [cut for cut in safe if lowest <= cut <= preferred]
    if within:
        cut = within[-1]
    else:
        later = [cut for cut in safe if cut >= max(lowest, preferred)]
        cut = later[0] if later else safe[-1]
    if cut < n - 1 and conversation[cut].get("role") == "tool":
        parents = pair_tool_calls(conversation).parents
        # Past an orphan the next cut is safe too: no call group can span an orphan
        # at a safe cut (its range would have to start there).
        while cut < n - 1 and conversation[cut].get("role") == "tool" and cut not in parents:
            cut += 1
    return cut


# ---------------------------------------------------------------- tool-argument truncation


def _cut_value(value: Any, max_chars: int) -> tuple[Any, bool]:
    """``value`` with every string longer than ``max_chars`` cut (recursively)."""
    if isinstance(value, str):
        if len(value) > max_chars and not value.endswith(TRUNCATION_MARK):
            return value[:max_chars] + TRUNCATION_MARK, True
        return value, False
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[key], cut = _cut_value(item, max_chars)
            changed |= cut
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items = [_cut_value(item, max_chars) for item in value]
        if any(cut for _, cut in items):
            return [item for item, _ in items], True
        return value, False
    return value, False


def _cut_arguments(arguments: str, max_chars: int) -> str | None:
    """New arguments text with long string values cut, or None when nothing is too long."""
    if len(arguments) <= max_chars:
        return None  # no value inside can be longer than the whole text
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        value, changed = _cut_value(parsed, max_chars)
        return json.dumps(value, ensure_ascii=False) if changed else None
    cut, changed = _cut_value(arguments, max_chars)
    return str(cut) if changed else None


def truncate_tool_args(
    messages: Sequence[Message],
    start: int,
    stop: int,
    max_chars: int,
    on_copy: Callable[[Message, Message], None] | None = None,
) -> tuple[list[Message], int]:
    """Cut long tool-call arguments of the assistant messages in ``messages[start:stop]``.

    Arguments are JSON text; every string value (at any depth) longer than ``max_chars``
    keeps its first ``max_chars`` characters followed by :data:`TRUNCATION_MARK`.
    Arguments that are not JSON are cut as one string. A changed message is a copy
    with every other key unchanged (id, name, timestamps, ...); unchanged messages are
    the same objects. ``on_copy(copy, original)`` is told about each copy. Returns the
    new list and the number of arguments cut.
    """
    out = list(messages)
    count = 0
    for index in range(max(0, start), min(stop, len(out))):
        message = out[index]
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            continue
        new_calls: list[Any] = []
        changed = 0
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            arguments = function.get("arguments") if isinstance(function, Mapping) else None
            new = _cut_arguments(arguments, max_chars) if isinstance(arguments, str) else None
            if new is None:
                new_calls.append(call)
                continue
            assert isinstance(call, Mapping)
            assert isinstance(function, Mapping)
            new_calls.append({**call, "function": {**function, "arguments": new}})
            changed += 1
        if changed:
            copy = {**message, "tool_calls": new_calls}
            out[index] = copy
            count += changed
            if on_copy is not None:
                on_copy(copy, message)
    return out, count
