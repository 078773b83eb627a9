"""A release assistant as a LangGraph graph, with harnessmem's memory.

    python examples/release_assistant.py WORKSPACE            # OPENAI_BASE_URL, OPENAI_API_KEY
    python examples/release_assistant.py WORKSPACE --offline  # a scripted model on loopback

A model node and a tool node; the checkpointer keeps the thread, harnessmem keeps it short
and remembers across threads (MEMORY.md, the daily logs, the release notes in the store).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from harnessmem import MemoryHarness
from harnessmem.testing import FakeOpenAIServer
from harnessmem_langgraph import GraphMemory, HarnessStore


@tool
def changelog(version: str) -> str:
    """The changelog of a tidewater release."""
    return "\n".join(f"- {version}: fix #{n} in the timetable importer" for n in range(1, 4000))


def build_graph(memory: GraphMemory, store: HarnessStore, model: ChatOpenAI) -> CompiledStateGraph:
    graph = StateGraph(MessagesState)
    graph.add_node("model", memory.model_node(model.bind_tools([*memory.tools, changelog])))
    graph.add_node("tools", ToolNode([changelog], wrap_tool_call=memory.wrap_tool_call))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def chat(workspace: str, lines: Iterator[str], model: ChatOpenAI) -> None:
    with MemoryHarness.open(workspace) as harness:
        store = HarnessStore(harness)
        memory = GraphMemory(harness.session("release-week"), "You are a release assistant.")
        agent = build_graph(memory, store, model)
        config = {"configurable": {"thread_id": memory.session.id}}
        state = None
        for text in lines:
            state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
            print(f"> {text}\n{state['messages'][-1].content}")
            memory.after_turn(state)
        store.put(("releases",), "last-session", {"turns": len(state["messages"]) if state else 0})
        memory.close(state)


SCRIPT = [
    {
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "changelog", "arguments": json.dumps({"version": "2.4"})},
            }
        ]
    },
    "2.4 fixes 3999 timetable importer bugs; the full list is in the workspace.",
]
SAID = ["What changed in 2.4?"]


@contextlib.contextmanager
def offline_model() -> Iterator[ChatOpenAI]:
    """A chat model on a scripted OpenAI-compatible server on loopback (no key, no network)."""
    with FakeOpenAIServer(SCRIPT) as server:
        yield ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="sk-offline")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("workspace")
    parser.add_argument("--offline", action="store_true", help="a scripted model on loopback")
    args = parser.parse_args(argv)
    if args.offline:
        with offline_model() as model:
            chat(args.workspace, iter(SAID), model)
    else:
        model = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
        chat(args.workspace, iter(sys.stdin.readline, ""), model)


if __name__ == "__main__":
    main()
