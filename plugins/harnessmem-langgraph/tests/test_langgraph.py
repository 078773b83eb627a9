"""GraphMemory and HarnessStore with LangGraph's real StateGraph, ToolNode, checkpointer and
langchain-openai's ChatOpenAI, against FakeOpenAIServer; the memory side runs on the
offline extractive backend, so every request the server sees is one the graph made."""

from __future__ import annotations

import asyncio
import json
import runpy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest
from langchain_core.messages import AnyMessage, convert_to_openai_messages
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore

from harnessmem import MemoryHarness
from harnessmem.testing import FakeOpenAIServer, Fault, RecordedRequest
from harnessmem_langgraph import GraphMemory, HarnessStore

if TYPE_CHECKING:
    from harnessmem.testing.recorders import EventLog

MEMORY_TOOLS = {"memory_search", "memory_get", "session_search", "memory_save"}


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"tool_calls": [{"id": call_id, "type": "function", "function": function}]}


@tool
def run_shell(command: str) -> str:
    """Run a shell command and return its output."""
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout


SENT = "llm_input_messages"


class HookState(MessagesState):
    """The thread, and what the pre-model hook says to send."""

    llm_input_messages: list[AnyMessage]


class Chat:
    """A model-and-tools graph on GraphMemory, the fake server behind it."""

    def __init__(self, harness: MemoryHarness, server: FakeOpenAIServer, hook: bool) -> None:
        self.harness, self.server = harness, server
        self.memory = GraphMemory(harness.session("thread-7"), "You are a release assistant.")
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
        ).bind_tools([*self.memory.tools, run_shell])
        graph = StateGraph(HookState if hook else MessagesState)
        if hook:  # pre_model_hook before a model node that only sends what it is given
            graph.add_node("memory", self.memory.pre_model_hook)
            graph.add_node(
                "model", lambda state: {"messages": [model.invoke(state["llm_input_messages"])]}
            )
            graph.add_edge(START, "memory")
            graph.add_edge("memory", "model")
            graph.add_conditional_edges("model", tools_condition)
            graph.add_edge("tools", "memory")
        else:
            graph.add_node("model", self.memory.model_node(model))
            graph.add_edge(START, "model")
            graph.add_conditional_edges("model", tools_condition)
            graph.add_edge("tools", "model")
        graph.add_node("tools", ToolNode([run_shell], wrap_tool_call=self.memory.wrap_tool_call))
        self.agent = graph.compile(checkpointer=InMemorySaver())

    def say(self, *texts: str) -> list[str]:
        config = {"configurable": {"thread_id": "thread-7"}}
        answers = []
        for text in texts:
            state = self.agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
            answers.append(str(state["messages"][-1].content))
            self.memory.after_turn(state)
        self.state = state
        return answers

    @property
    def requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.path.endswith("/chat/completions")]


@pytest.fixture
def chat(events: EventLog) -> Iterator[Any]:
    opened: list[tuple[MemoryHarness, FakeOpenAIServer]] = []

    def start(replies: Any, hook: bool = False, **settings: Any) -> Chat:
        server = FakeOpenAIServer(replies)
        harness = MemoryHarness.open(
            "workspace", maintenance={"enabled": False}, plugins=[events], **settings
        )
        opened.append((harness, server))
        return Chat(harness, server, hook)

    yield start
    for harness, server in opened:
        harness.close()
        assert not server.problems, server.problems
        server.close()


def tools_offered(request: RecordedRequest) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools") or []}


@pytest.mark.parametrize("hook", [False, True], ids=["model_node", "pre_model_hook"])
def test_memory_reaches_the_prompt_and_the_memory_tools_work(chat: Any, hook: bool) -> None:
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        harness.save("- Maya maintains the tidewater timetables")
    run = chat(
        [
            call("memory_save", {"text": "The Harbour pier closes for repairs in March"}),
            "Noted.",
            call("memory_search", {"query": "Harbour pier"}, "call_2"),
            "It closes for repairs in March.",
        ],
        hook=hook,
    )
    answers = run.say(
        "Please remember that the Harbour pier closes for repairs in March.",
        "When is the Harbour pier closed? Also, our night ferry leaves at 23:40 on Fridays.",
    )
    assert answers == ["Noted.", "It closes for repairs in March."]
    first, after_save, second, after_search = run.requests
    assert first.messages[0]["role"] == "system"
    assert first.messages[0]["content"].startswith("You are a release assistant.")
    assert "Maya maintains the tidewater timetables" in first.messages[0]["content"]
    assert tools_offered(first) >= MEMORY_TOOLS | {"run_shell"}
    assert after_save.messages[-1]["content"].startswith("Saved to MEMORY.md")
    assert "Harbour pier closes for repairs in March" in second.messages[0]["content"]
    result = after_search.messages[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_2")
    assert "Harbour pier closes for repairs in March" in result["content"]
    run.memory.close(run.state)
    daily = "".join(p.read_text() for p in Path("workspace/memory").glob("*.md"))
    assert "night ferry leaves at 23:40" in daily


def test_shell_output_is_evicted_with_the_model_call_id(chat: Any, events: EventLog) -> None:
    run = chat([call("run_shell", {"command": "seq 1 30000"}, "call_sh"), "Printed them."])
    run.say("Count to 30000 in the shell.")
    result = run.requests[1].messages[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_sh")
    assert len(result["content"]) < 10_000
    (saved,) = Path("workspace/large_tool_results/thread-7").glob("call_sh-*.txt")
    assert saved.read_text() == "".join(f"{n}\n" for n in range(1, 30001))
    assert saved.name in result["content"]
    (evicted,) = events.evicted
    assert (evicted.stage, evicted.call_id) == ("post_acting", "call_sh")


def chatty(body: dict[str, Any]) -> Any:
    return f"Answer to: {body['messages'][-1]['content']} " + "Details follow. " * 20


@pytest.mark.parametrize("hook", [False, True], ids=["model_node", "pre_model_hook"])
def test_a_long_conversation_stays_under_the_trigger(
    chat: Any, events: EventLog, hook: bool
) -> None:
    said = [f"Question {n}: what sails from pier {n}?" for n in range(1, 31)]
    run = chat(chatty, hook=hook, compaction={"trigger_messages": 12, "keep_messages": 4})
    run.say(*said)
    assert len(run.requests) == len(said)
    for n, request in enumerate(run.requests, 1):
        conversation = request.messages[1:]
        assert len(conversation) < 12, f"turn {n} sent {len(conversation)} messages"
        assert sum(said[n - 1] == m.get("content") for m in conversation) == 1
    log = Path("workspace/sessions/thread-7.log.jsonl").read_text().splitlines()
    logged = [json.loads(line)["message"].get("content") for line in log]
    for question in said[:20]:
        assert logged.count(question) == 1, question
    # The checkpointed thread is the compacted one: a compaction covers several turns.
    assert 3 <= len(events.compactions) <= len(said) // 3
    assert len(convert_to_openai_messages(run.state["messages"])) <= 12


def test_a_context_length_error_compacts_and_retries_once(chat: Any, events: EventLog) -> None:
    said = [f"Question {n}: " + "which piers does the night ferry serve? " * 8 for n in range(8)]
    run = chat([*["Pier 3, then pier 7. " * 15] * 7, Fault.context_length(), "Pier 9."])
    assert run.say(*said)[-1] == "Pier 9."
    failed, retried = run.requests[-2:]
    assert len(run.requests) == len(said) + 1
    assert len(retried.messages) < len(failed.messages)
    assert sum(said[-1] == m.get("content") for m in retried.messages) == 1
    assert [c.trigger for c in events.compactions] == ["overflow"]


def test_another_model_error_is_raised(chat: Any) -> None:
    run = chat([Fault.status(400, "Invalid value for 'model'")])
    with pytest.raises(openai.BadRequestError, match="Invalid value"):
        run.say("Hello")
    assert len(run.requests) == 1


def test_the_store_keeps_items_in_the_workspace() -> None:
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        store = HarnessStore(harness)
        assert isinstance(store, BaseStore)
        store.put(("users", "maya"), "prefs", {"food": "likes smoked fish", "seat": "window"})
        store.put(("users", "maya"), "pier", {"note": "uses pier 4 on Fridays"})
        store.put(("users", "o/b"), "prefs", {"food": "vegetarian"})
        item = store.get(("users", "maya"), "prefs")
        assert item is not None
        assert item.value["seat"] == "window"
        assert item.created_at <= item.updated_at
    assert Path("workspace/langgraph_store/users/o%2Fb/prefs.json").is_file()
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        store = HarnessStore(harness)
        [hit] = store.search(("users",), query="smoked fish please")
        assert (hit.namespace, hit.key) == (("users", "maya"), "prefs")
        assert hit.score == pytest.approx(2 / 3)
        assert [i.key for i in store.search(("users", "maya"))] == ["pier", "prefs"]
        assert [i.namespace for i in store.search(("users",), filter={"food": "vegetarian"})] == [
            ("users", "o/b")
        ]
        assert store.list_namespaces(prefix=("users",)) == [("users", "maya"), ("users", "o/b")]
        assert store.list_namespaces(max_depth=1) == [("users",)]
        assert store.list_namespaces(suffix=("maya",)) == [("users", "maya")]
        store.delete(("users", "maya"), "prefs")
        assert store.get(("users", "maya"), "prefs") is None
        with pytest.raises(NotImplementedError, match="no vector index"):
            store.put(("users",), "x", {"a": 1}, index=["a"])


def test_the_store_answers_the_async_api() -> None:
    with MemoryHarness.open("workspace", maintenance={"enabled": False}) as harness:
        store = HarnessStore(harness)

        async def put_and_get() -> Any:
            await store.aput(("notes",), "n1", {"text": "the 2.4 release"})
            return await store.aget(("notes",), "n1")

        item = asyncio.run(put_and_get())
        assert item is not None
        assert item.value == {"text": "the 2.4 release"}


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).parents[1] / "examples" / "release_assistant.py"
    runpy.run_path(str(example), run_name="example")["main"](["ws", "--offline"])
    printed = capsys.readouterr().out
    assert "2.4 fixes 3999 timetable importer bugs" in printed
    [saved] = Path("ws/large_tool_results/release-week").glob("call_1-*.txt")
    assert saved.read_text().count("timetable importer") == 3999
    record = json.loads(Path("ws/langgraph_store/releases/last-session.json").read_text())
    assert record["value"] == {"turns": 4}
