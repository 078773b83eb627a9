"""HarnessSession with the SDK's real Agent, Runner and chat completions model, against
FakeOpenAIServer; the memory side runs on the offline extractive backend, so every request
the server sees is one the SDK made for the agent."""

from __future__ import annotations

import asyncio
import json
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, function_tool
from agents.memory import Session
from agents.tool_context import ToolContext

from harnessmem import MemoryHarness
from harnessmem.testing import FakeOpenAIServer, Fault, RecordedRequest
from harnessmem_openai_agents import HarnessSession, to_chat, to_items

if TYPE_CHECKING:
    from harnessmem.testing.recorders import EventLog

MEMORY_TOOLS = {"memory_search", "memory_get", "session_search", "memory_save"}
TIMETABLE = "".join(f"07:{m % 60:02d} Tidewater -> Harbour, pier {m}\n" for m in range(4000))


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"tool_calls": [{"id": call_id, "type": "function", "function": function}]}


@function_tool
def fetch_timetable(ctx: ToolContext[Any], route: str) -> str:
    """The full timetable of a ferry route."""
    return TIMETABLE


class Chat:
    """An agent on a HarnessSession, the fake server behind it, and what it answered."""

    def __init__(self, harness: MemoryHarness, server: FakeOpenAIServer) -> None:
        self.harness, self.server = harness, server
        self.session = HarnessSession(harness, "support-42")
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        self.agent = Agent(
            name="support",
            instructions="You help customers of a ferry company.",
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
            tools=[*self.session.tools, self.session.evicting(fetch_timetable)],
        )

    def say(self, *texts: str) -> list[str]:
        """The answers to ``texts``, one turn each, in one event loop (as an app runs)."""

        async def turns() -> list[str]:
            return [str((await self.session.run(self.agent, t)).final_output) for t in texts]

        return asyncio.run(turns())

    @property
    def requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.path.endswith("/chat/completions")]


@pytest.fixture
def chat(events: EventLog) -> Iterator[Any]:
    opened: list[tuple[MemoryHarness, FakeOpenAIServer]] = []

    def start(replies: Any, **settings: Any) -> Chat:
        server = FakeOpenAIServer(replies)
        harness = MemoryHarness.open(
            "workspace", maintenance={"enabled": False}, plugins=[events], **settings
        )
        opened.append((harness, server))
        return Chat(harness, server)

    yield start
    for harness, server in opened:
        harness.close()
        assert not server.problems, server.problems
        server.close()


def tools_offered(request: RecordedRequest) -> set[str]:
    return {tool["function"]["name"] for tool in request.body.get("tools") or []}


def daily_logs() -> str:
    return "".join(p.read_text() for p in sorted(Path("workspace/memory").glob("*.md")))


def test_it_is_an_sdk_session_and_its_history_outlives_the_harness(chat: Any) -> None:
    first = chat(["Noted."])
    assert isinstance(first.session, Session)
    assert first.session.session_id == "support-42"
    first.say("The night ferry leaves at 23:40.")
    first.harness.close()
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        again = HarnessSession(harness, "support-42")
        items = asyncio.run(again.get_items())
        assert to_chat(items) == [
            {"role": "user", "content": "The night ferry leaves at 23:40."},
            {"role": "assistant", "content": "Noted."},
        ]
        assert asyncio.run(again.get_items(limit=1)) == items[-1:]
        assert asyncio.run(again.pop_item()) == {"role": "assistant", "content": "Noted."}
        assert len(asyncio.run(again.get_items())) == 1
        asyncio.run(again.clear_session())
        assert asyncio.run(again.get_items()) == []
    assert json.loads(Path("workspace/sessions/support-42.agents.json").read_text()) == []


def test_memory_reaches_the_prompt_and_the_memory_tools_work(chat: Any) -> None:
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        harness.save("- Maya maintains the tidewater timetables")
    run = chat(
        [
            call("memory_save", {"text": "The Harbour pier closes for repairs in March"}),
            "Noted: the Harbour pier closes in March.",
            call("memory_search", {"query": "Harbour pier"}, "call_2"),
            "It closes for repairs in March.",
        ]
    )
    answers = run.say(
        "Please remember that the Harbour pier closes for repairs in March.",
        "When is the Harbour pier closed? Also, our night ferry leaves at 23:40 on Fridays.",
    )
    assert answers == [
        "Noted: the Harbour pier closes in March.",
        "It closes for repairs in March.",
    ]
    first, after_save, second, after_search = run.requests
    system = first.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You help customers of a ferry company.")
    assert "Maya maintains the tidewater timetables" in system["content"]
    assert tools_offered(first) >= MEMORY_TOOLS | {"fetch_timetable"}
    assert after_save.messages[-1]["content"].startswith("Saved to MEMORY.md")
    assert "Harbour pier closes for repairs in March" in Path("workspace/MEMORY.md").read_text()
    assert "Harbour pier closes for repairs in March" in second.messages[0]["content"]
    # The second turn starts from the stored history: the first turn, then the question.
    assert [m["role"] for m in second.messages] == [
        "system", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    result = after_search.messages[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_2")
    assert "Harbour pier closes for repairs in March" in result["content"]
    # The run hooks flushed each turn (in batches); the end of the conversation, the rest.
    asyncio.run(run.session.aclose())
    assert "night ferry leaves at 23:40" in daily_logs()


def test_own_tool_outputs_are_evicted_with_the_sdk_call_ids(chat: Any, events: EventLog) -> None:
    calls = [
        {"id": i, "type": "function", "function": {"name": "fetch_timetable", "arguments": a}}
        for i, a in (("call_tt1", '{"route": "a"}'), ("call_tt2", '{"route": "b"}'))
    ]
    run = chat([{"tool_calls": calls}, "Here they are."])
    run.say("Show me both timetables.")
    results = run.requests[1].messages[-2:]
    assert [(m["role"], m["tool_call_id"]) for m in results] == [
        ("tool", "call_tt1"),
        ("tool", "call_tt2"),
    ]
    for call_id, result in zip(("call_tt1", "call_tt2"), results, strict=True):
        assert len(result["content"]) < 10_000, "the model got a preview, not the whole output"
        (saved,) = Path("workspace/large_tool_results/support-42").glob(f"{call_id}-*.txt")
        assert saved.read_text() == TIMETABLE
        assert f"large_tool_results/support-42/{saved.name}" in result["content"]
    assert sorted((e.stage, e.call_id) for e in events.evicted) == [
        ("post_acting", "call_tt1"),
        ("post_acting", "call_tt2"),
    ]
    # Parallel calls stay in one assistant message; the stored history keeps the previews.
    stored = json.loads(Path("workspace/sessions/support-42.agents.json").read_text())
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in stored[1]["tool_calls"]] == ["call_tt1", "call_tt2"]
    assert all(len(m["content"]) < 10_000 for m in stored[2:4])


def chatty(body: dict[str, Any]) -> Any:
    """A model that answers every user message at some length, once."""
    return f"Answer to: {body['messages'][-1]['content']} " + "Details follow. " * 20


def test_a_long_conversation_stays_under_the_trigger(chat: Any, events: EventLog) -> None:
    said = [f"Question {n}: what sails from pier {n}?" for n in range(1, 31)]
    run = chat(chatty, compaction={"trigger_messages": 12, "keep_messages": 4})
    run.say(*said)
    assert len(run.requests) == len(said), "one model call per turn, no retries"
    for n, request in enumerate(run.requests, 1):
        conversation = request.messages[1:]
        assert len(conversation) < 12, f"turn {n} sent {len(conversation)} messages"
        assert sum(said[n - 1] == m.get("content") for m in conversation) == 1
    assert any(
        "<conversation_summary" in (m.get("content") or "") for m in run.requests[-1].messages
    )
    log = Path("workspace/sessions/support-42.log.jsonl").read_text().splitlines()
    logged = [json.loads(line)["message"].get("content") for line in log]
    for question in said[:20]:
        assert logged.count(question) == 1, question
    # The stored history is the compacted one, so a compaction covers several turns.
    assert 3 <= len(events.compactions) <= len(said) // 3
    stored = json.loads(Path("workspace/sessions/support-42.agents.json").read_text())
    assert len(stored) <= 12


def test_a_context_length_error_compacts_and_retries_once(chat: Any, events: EventLog) -> None:
    said = [f"Question {n}: " + "which piers does the night ferry serve? " * 8 for n in range(8)]
    run = chat([*["Pier 3, then pier 7. " * 15] * 7, Fault.context_length(), "Pier 9."])
    answers = run.say(*said)
    assert answers[-1] == "Pier 9."
    failed, retried = run.requests[-2:]
    assert len(run.requests) == len(said) + 1
    assert len(retried.messages) < len(failed.messages)
    assert sum(said[-1] == m.get("content") for m in retried.messages) == 1
    assert [c.trigger for c in events.compactions] == ["overflow"]


def test_another_bad_request_is_not_retried(chat: Any) -> None:
    run = chat([Fault.status(400, "Invalid value for 'model'")])
    with pytest.raises(openai.BadRequestError, match="Invalid value"):
        run.say("Hello")
    assert len(run.requests) == 1


def test_run_config_keeps_the_callers_settings_and_refuses_a_second_filter(chat: Any) -> None:
    session = chat([]).session
    config = session.run_config(RunConfig(workflow_name="ferry"))
    assert config.workflow_name == "ferry"
    assert config.call_model_input_filter == session.call_model_input_filter
    with pytest.raises(ValueError, match="already has a call_model_input_filter"):
        session.run_config(config)


def test_the_converters_round_trip_messages_and_parallel_calls() -> None:
    chat = [
        {"role": "user", "content": "both"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ("c1", "c2")
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    assert to_chat(to_items(chat)) == chat
    parts = {
        "role": "assistant",
        "type": "message",
        "content": [{"type": "output_text", "text": "hi"}],
    }
    assert to_chat([parts]) == [{"role": "assistant", "content": "hi"}]


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[1] / "examples" / "ferry_support.py"
    namespace = runpy.run_path(str(example), run_name="example")
    namespace["main"](["ws", "--offline"])
    printed = capsys.readouterr().out
    assert "Noted: you travel with a bicycle." in printed
    assert "The 07:15 from pier 4 takes bicycles." in printed
    assert "travels with a bicycle" in Path("ws/MEMORY.md").read_text()
    stored = json.loads(Path("ws/sessions/ferry-support.agents.json").read_text())
    assert stored[-1] == {"role": "assistant", "content": "The 07:15 from pier 4 takes bicycles."}
