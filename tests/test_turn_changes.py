"""A turn redoes per-message work only for what changed, and sees every change (issue 35).

``before_reasoning`` skips the shape check and the token count of the messages that are
as the previous turn left them; these tests change messages in place between turns (a
value replaced, a tool call's arguments edited inside the same dict, a message inserted,
removed or moved) and check that the change is checked, counted and swept as a new
message would be.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness, MessageFormatError, Session, hookimpl
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


def _compacting_at(tmp_path: Path, tokens: int, plugins: Sequence[object] = ()) -> MemoryHarness:
    """A harness whose compaction fires at ``tokens`` and nothing else runs beside it."""
    return MemoryHarness.open(
        tmp_path / "ws",
        plugins=plugins,
        maintenance={"enabled": False},
        flush={"enabled": False},
        context={"inject": "manual"},
        compaction={"trigger_tokens": tokens, "trigger_messages": 0, "keep_messages": 2},
    )


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
    with _compacting_at(tmp_path, fresh) as harness:
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


# The sweep and the count skip what the session found unchanged since their previous turn.
# What must still reach them: a message sent again that was too long (raw history), a change
# made between two of their turns by another call, and a message a plugin replaced.


def _huge(limit: int) -> str:
    return "row of the search result\n" * (limit // 10)


def test_eviction_evicts_a_raw_history_resent_on_every_turn(harness: MemoryHarness) -> None:
    session = harness.session("s")
    raw = conversation()
    raw[3]["content"] = _huge(harness.settings.eviction.max_result_chars)
    for turn in range(3):
        raw.append({"role": "user", "content": f"turn {turn}"})
        out = session.before_reasoning(raw)  # the caller never keeps what came back
        assert len(out[3]["content"]) < harness.settings.eviction.max_result_chars
        assert [r.call_id for r in session.last_outcomes["eviction"]] == ["call_1"]
    assert len(raw[3]["content"]) > harness.settings.eviction.max_result_chars


@pytest.mark.parametrize("calls_between", [1, 40])
def test_eviction_sees_a_change_made_before_other_calls(
    harness: MemoryHarness, calls_between: int
) -> None:
    """A change that an ``after_call`` saw first (one, or more than any log keeps) is swept
    at the next ``before_reasoning``."""
    session = harness.session("s")
    messages = session.before_reasoning(conversation())
    messages[3]["content"] = _huge(harness.settings.eviction.max_result_chars)
    for _ in range(calls_between):
        session.after_call(messages)
    out = session.before_reasoning(messages)
    assert len(out[3]["content"]) < harness.settings.eviction.max_result_chars
    assert session.last_outcomes["eviction"][0].call_id == "call_1"


class _Replaces:
    """Puts a new message at ``index`` of ``ctx.messages`` on the turns ``when`` lists."""

    def __init__(self, index: int, make: Any, when: set[int]) -> None:
        self.index, self.make, self.when, self.turn = index, make, when, 0

    def replace(self, ctx: Any) -> None:
        self.turn += 1
        if self.turn in self.when:
            old = ctx.messages[self.index]
            ctx.messages[self.index] = {**old, "content": self.make(old)}


class _BeforeEviction(_Replaces):
    @hookimpl(tryfirst=True)
    def pre_reasoning(self, ctx: Any) -> None:
        self.replace(ctx)


class _BeforeCompaction(_Replaces):
    @hookimpl
    def pre_reasoning(self, ctx: Any) -> None:
        self.replace(ctx)


def test_eviction_sweeps_a_message_a_plugin_before_it_replaced(tmp_path: Path) -> None:
    limit = 20_000
    plugin = _BeforeEviction(3, lambda old: _huge(limit), when={2})
    with MemoryHarness.open(
        tmp_path / "ws",
        plugins=[plugin],
        maintenance={"enabled": False},
        flush={"enabled": False},
        context={"inject": "manual"},
        eviction={"max_result_chars": limit},
    ) as harness:
        session = harness.session("s")
        messages = session.before_reasoning(conversation())
        assert "eviction" not in session.last_outcomes
        out = session.before_reasoning(messages)
        assert len(out[3]["content"]) < limit
        assert session.last_outcomes["eviction"][0].call_id == "call_1"


def _longer(old: Message) -> str:
    return f"{old['content']} " + "and a hotel near the river " * 100


def _shorter(old: Message) -> str:
    return "hi"


@pytest.mark.parametrize(
    ("make", "when", "fires_on"),
    [
        # Replaced on turn 2: counted as the plugin left it (the caller's list is unchanged).
        (_longer, {2}, 2),
        # Replaced on turn 1 only: turn 2 counts the caller's message again, not the
        # plugin's shorter one of the turn before.
        (_shorter, {1}, 2),
    ],
)
def test_compaction_counts_what_a_plugin_replaced_after_the_check(
    tmp_path: Path, make: Any, when: set[int], fires_on: int
) -> None:
    counter = TokenCounter()
    sent = conversation()
    sent[1] = {**sent[1], "content": _longer(sent[1])}  # a longer user message than _shorter
    changed = [dict(m) for m in sent]
    if make is _longer:
        changed[1]["content"] = make(sent[1])
    fresh = counter.count_messages(changed if make is _longer else sent)
    with _compacting_at(tmp_path, fresh, plugins=[_BeforeCompaction(1, make, when)]) as harness:
        session = harness.session("s")
        messages = list(sent)
        for turn in (1, 2):
            session.before_reasoning(messages)
            result = session.last_outcomes.get("compaction")
            if turn < fires_on:
                assert result is None
        assert result is not None
        assert result.trigger == "tokens"
        assert result.tokens_before == fresh


def test_a_new_session_object_under_the_same_id_is_swept_whole(harness: MemoryHarness) -> None:
    """The sweep's memory of a session id does not carry over to another Session object
    (one built directly on the harness's kernel), whose calls are numbered afresh."""
    harness.session("s").before_reasoning(conversation())
    messages = conversation()
    messages[3]["content"] = _huge(harness.settings.eviction.max_result_chars)
    session = Session(harness.kernel, "s")
    out = session.before_reasoning(messages)
    assert len(out[3]["content"]) < harness.settings.eviction.max_result_chars
