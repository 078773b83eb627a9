"""A turn redoes per-message work only for what changed, and sees every change (issue 35).

``before_reasoning`` skips the shape check and the token count of the messages that are
as the previous turn left them; these tests change messages in place between turns (a
value replaced, a tool call's arguments edited inside the same dict, a message inserted,
removed or moved) and check that the change is checked, counted and swept as a new
message would be.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness, MessageFormatError
from harnessmem.tokens import TokenCounter

Message = dict[str, Any]


def conversation() -> list[Message]:
    return [
        {"role": "system", "content": "You book flights."},
        {"role": "user", "content": "book a flight to Lisbon"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"to": "LIS"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "TP 1234 at 09:00"},
        {"role": "assistant", "content": "TP 1234 leaves at 09:00."},
    ]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[MemoryHarness]:
    with MemoryHarness.open(
        tmp_path / "ws",
        maintenance={"enabled": False},
        flush={"enabled": False},
        context={"inject": "manual"},
    ) as opened:
        yield opened


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda m: m[1].__setitem__("content", 5), "message 1: content is int"),
        (lambda m: m[3].__setitem__("role", None), "message 3: has no role"),
        (
            lambda m: m[2]["tool_calls"][0].__setitem__("function", "search"),
            "message 2: tool call 0: function is str",
        ),
        (lambda m: m[2]["tool_calls"].append(7), "message 2: tool call 1 is int"),
        (lambda m: m.insert(2, "not a message"), "message 2: is str"),
    ],
)
def test_a_message_changed_in_place_after_a_turn_is_checked_again(
    harness: MemoryHarness, change: Any, problem: str
) -> None:
    session = harness.session("s")
    messages = session.before_reasoning(conversation())
    session.before_reasoning(messages)  # a turn on the same, unchanged list
    change(messages)
    with pytest.raises(MessageFormatError) as raised:
        session.before_reasoning(messages)
    assert str(raised.value).startswith(f"before_reasoning: {problem}")
    # Still refused on the next call: the bad message was not remembered as checked.
    with pytest.raises(MessageFormatError):
        session.before_reasoning(messages)


def _edits() -> list[Any]:
    def content(m: list[Message]) -> None:
        m[1]["content"] = "book a flight to Lisbon " + "and back again " * 200

    def arguments(m: list[Message]) -> None:
        m[2]["tool_calls"][0]["function"]["arguments"] = '{"to": "LIS", "note": "%s"}' % (
            "x y " * 400
        )

    def insert(m: list[Message]) -> None:
        m.insert(1, {"role": "user", "content": "first, a question " * 150})

    def remove_then_grow(m: list[Message]) -> None:
        del m[1]
        m[3]["content"] = "TP 1234 leaves at 09:00. " * 150

    def move(m: list[Message]) -> None:
        m[1], m[4] = m[4], m[1]
        m.append({"role": "user", "content": "and a hotel " * 150})

    return [content, arguments, insert, remove_then_grow, move]


@pytest.mark.parametrize("edit", _edits())
def test_token_count_after_in_place_edits_equals_a_fresh_count(tmp_path: Path, edit: Any) -> None:
    counter = TokenCounter()
    before = conversation()
    after = conversation()
    edit(after)
    fresh = counter.count_messages(after)
    assert counter.count_messages(before) < fresh
    # The token trigger sits exactly at the edited conversation's count: the turn after
    # the edit fires compaction only if it counts the edited messages afresh.
    with MemoryHarness.open(
        tmp_path / "ws",
        maintenance={"enabled": False},
        flush={"enabled": False},
        context={"inject": "manual"},
        compaction={"trigger_tokens": fresh, "trigger_messages": 0, "keep_messages": 2},
    ) as harness:
        session = harness.session("s")
        messages = conversation()
        assert session.before_reasoning(messages) is not messages
        session.before_reasoning(messages)
        assert "compaction" not in session.last_outcomes
        edit(messages)
        session.before_reasoning(messages)
        result = session.last_outcomes["compaction"]
        assert result.trigger == "tokens"
        assert result.tokens_before == fresh


def test_eviction_sees_a_tool_result_made_large_in_place(harness: MemoryHarness) -> None:
    session = harness.session("s")
    messages = session.before_reasoning(conversation())
    session.before_reasoning(messages)
    limit = harness.settings.eviction.max_result_chars
    messages[3]["content"] = "row of the search result\n" * (limit // 10)
    out = session.before_reasoning(messages)
    assert len(out[3]["content"]) < limit
    assert session.last_outcomes["eviction"][0].call_id == "call_1"
