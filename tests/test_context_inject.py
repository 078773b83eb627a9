"""``context.inject = "system"``: the current memory block in the system message, every turn."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from tests.conftest import HarnessFactory

from harnessmem import ConfigError, HarnessSettings, MemoryHarness
from harnessmem.memory.context import TAG, place_memory_block
from harnessmem.testing import ScriptedModel
from harnessmem.tokens import TokenCounter

SYSTEM = {"role": "system", "content": "You are a travel agent."}
TODAY = "memory/2027-01-15.md"


def blocks_in(messages: list[dict[str, Any]]) -> int:
    """How many memory blocks the messages hold, in any message and any content part."""
    text = repr(messages)
    return text.count(f"<{TAG} ")


def chat(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [SYSTEM]
    for turn in range(turns):
        out.append({"role": "user", "content": f"user turn {turn}"})
        out.append({"role": "assistant", "content": f"answer {turn}"})
    return out


def _consolidation(messages: list[dict[str, Any]], purpose: str) -> str:
    if purpose == "consolidation":
        return "## People\n- Ana lives in Lisbon\n- Ana moved to Porto"
    return "NO_REPLY"


@pytest.fixture
def harness(open_harness: HarnessFactory) -> MemoryHarness:
    return open_harness(ScriptedModel(_consolidation))


def test_system_is_the_default_and_a_bad_value_names_the_setting() -> None:
    assert HarnessSettings.load().context.inject == "system"
    with pytest.raises(ConfigError, match=r"context\.inject"):
        HarnessSettings.load(context={"inject": "prompt"})


def test_a_consolidation_between_two_turns_reaches_the_next_one(harness: MemoryHarness) -> None:
    """The acceptance test of issue 23: consolidation during a conversation changes the
    block the model receives at the next before_reasoning."""
    harness.save("- Ana lives in Lisbon")
    session = harness.session("trip")
    messages = session.before_reasoning(chat(1))
    assert "Ana lives in Lisbon" in messages[0]["content"]
    harness.workspace.write_text(TODAY, "## 08:00\n- Ana moved to Porto\n")
    result = harness.consolidate()
    assert result.status == "consolidated", result.reason
    messages.append({"role": "user", "content": "where does Ana live?"})
    messages = session.before_reasoning(messages)
    # The model's answer lost the days; its facts' day comes back (the save's heading and
    # the log's name are both of 2027-01-15), one heading for the section's run of them.
    assert (
        "## People\n### 2027-01-15\n- Ana lives in Lisbon\n- Ana moved to Porto"
        in messages[0]["content"]
    )
    assert blocks_in(messages) == 1


def test_a_save_by_another_replica_reaches_the_next_turn(
    harness: MemoryHarness, open_harness: HarnessFactory
) -> None:
    session = harness.session("trip")
    messages = session.before_reasoning(chat(1))
    assert "nothing remembered yet" in messages[0]["content"]
    other = open_harness(ScriptedModel("NO_REPLY"))
    other.session("elsewhere").call_tool("memory_save", {"text": "- the user flies on Friday"})
    messages = session.before_reasoning(messages)
    assert "the user flies on Friday" in messages[0]["content"]
    assert blocks_in(messages) == 1


def test_the_block_appears_once_over_many_turns(harness: MemoryHarness) -> None:
    session = harness.session("long")
    messages = chat(0)
    for turn in range(12):
        messages.append({"role": "user", "content": f"turn {turn}"})
        if turn % 4 == 0:
            harness.save(f"- fact {turn}")
        messages = session.before_reasoning(messages)
        assert blocks_in(messages) == 1
        assert f"- fact {turn - turn % 4}" in messages[0]["content"]
        assert messages[0]["content"].startswith(SYSTEM["content"])
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    assert [m["role"] for m in messages].count("system") == 1


def test_a_callers_system_context_is_refreshed_in_place(harness: MemoryHarness) -> None:
    session = harness.session("s")
    harness.save("- Ana lives in Lisbon")
    system = f"You are a travel agent.\n\n{session.system_context()}\n\nAnswer briefly."
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    before = copy.deepcopy(messages)
    harness.save("- Ana has a cat")
    out = session.before_reasoning(messages)
    assert messages == before, "the caller's list and dicts are not changed"
    assert out[0]["content"] == (
        f"You are a travel agent.\n\n{session.system_context()}\n\nAnswer briefly."
    )
    assert "Ana has a cat" in out[0]["content"]
    assert blocks_in(out) == 1


def test_no_system_message_gets_one_in_front(harness: MemoryHarness) -> None:
    session = harness.session("s")
    user = {"role": "user", "content": "hi"}
    out = session.before_reasoning([user])
    assert out == [{"role": "system", "content": session.system_context()}, user]
    assert session.before_reasoning(out) == out, "refreshed, not added again"


def test_a_system_message_of_content_parts_gets_a_text_part(harness: MemoryHarness) -> None:
    session = harness.session("s")
    parts = [{"type": "text", "text": "You are a travel agent."}]
    messages = [{"role": "system", "content": parts}, {"role": "user", "content": "hi"}]
    out = session.before_reasoning(messages)
    block = session.system_context()
    assert out[0]["content"] == [*parts, {"type": "text", "text": block}]
    harness.save("- Ana has a cat")
    again = session.before_reasoning(out)
    assert again[0]["content"] == [*parts, {"type": "text", "text": session.system_context()}]
    assert blocks_in(again) == 1
    assert messages[0]["content"] == parts


def test_manual_leaves_the_messages_alone(open_harness: HarnessFactory) -> None:
    harness = open_harness(context={"inject": "manual"})
    messages = chat(2)
    assert harness.session("s").before_reasoning(messages) == messages


def test_disabled_context_places_nothing(open_harness: HarnessFactory) -> None:
    harness = open_harness(context={"enabled": False})
    harness.save("- Ana lives in Lisbon")
    messages = chat(2)
    assert harness.session("s").before_reasoning(messages) == messages
    assert harness.session("s").system_context() == ""


def test_the_async_twin_places_it_too(harness: MemoryHarness) -> None:
    session = harness.session("s")
    out = asyncio.run(session.abefore_reasoning(chat(1)))
    assert out[0]["content"] == place_memory_block(SYSTEM["content"], session.system_context())


def test_compaction_keeps_one_system_message_with_the_block(
    open_harness: HarnessFactory,
) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if purpose == "summary":
            return (
                "SESSION INTENT\nbook a trip\n\nSUMMARY\ntalked\n\nARTIFACTS\nnone\n\n"
                "NEXT STEPS\nbook it"
            )
        return "NO_REPLY"

    harness = open_harness(
        ScriptedModel(reply),
        compaction={"trigger_messages": 10, "keep_messages": 4, "trigger_tokens": 0},
        flush={"enabled": False},
    )
    harness.save("- Ana lives in Lisbon")
    session = harness.session("s")
    messages = chat(0)
    compacted = 0
    for turn in range(14):
        messages.append({"role": "user", "content": f"turn {turn}"})
        before = len(messages)
        messages = session.before_reasoning(messages)
        compacted += len(messages) < before
        assert [m["role"] for m in messages].count("system") == 1
        assert messages[0]["role"] == "system"
        assert blocks_in(messages) == 1
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    assert compacted >= 2


def test_compaction_counts_the_block_against_its_token_trigger(
    open_harness: HarnessFactory,
) -> None:
    """A conversation under ``trigger_tokens`` alone, over it with the memory block: the
    block is in the list compaction measures, so the bound holds for what is sent."""
    facts = "\n".join(f"- fact {i}: the traveller prefers window seat {i}" for i in range(60))
    counter = TokenCounter()
    conversation = chat(8)
    bare = counter.count_messages(conversation)

    def opened(inject: str) -> MemoryHarness:
        harness = open_harness(
            ScriptedModel("NO_REPLY"),
            compaction={"trigger_messages": 0, "trigger_tokens": bare + 50, "keep_messages": 4},
            flush={"enabled": False},
            context={"inject": inject},
        )
        harness.workspace.write_text("MEMORY.md", f"## Facts\n{facts}\n")
        return harness

    manual = opened("manual").session("s").before_reasoning(conversation)
    assert manual == conversation, "under the trigger without the block"
    injected = opened("system").session("s").before_reasoning(conversation)
    assert len(injected) < len(conversation), "over it with the block: compacted"
    assert blocks_in(injected) == 1
    assert "fact 59" in injected[0]["content"]
