"""A ferry company's support agent on the OpenAI Agents SDK, with harnessmem's memory.

    python examples/ferry_support.py WORKSPACE            # OPENAI_BASE_URL, OPENAI_API_KEY
    python examples/ferry_support.py WORKSPACE --offline  # a scripted model on loopback

Each line you type is one turn. The conversation is kept (compacted) in the workspace, so
running it again continues it; what the agent saves with memory_save is in MEMORY.md and
in the next run's instructions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator

import openai
from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled

from harnessmem import MemoryHarness
from harnessmem.testing import FakeOpenAIServer
from harnessmem_openai_agents import HarnessSession


@function_tool
def departures(pier: str) -> str:
    """Today's departures from a pier."""
    return "\n".join(f"{hour:02d}:15 from pier {pier}" for hour in range(6, 24))


def build_agent(session: HarnessSession, client: openai.AsyncOpenAI) -> Agent[None]:
    return Agent(
        name="support",
        instructions="You help customers of a ferry company. Save what they ask you to remember.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[*session.tools, session.evicting(departures)],
    )


async def chat(workspace: str, lines: Iterator[str], client: openai.AsyncOpenAI) -> None:
    with MemoryHarness.open(workspace) as harness:
        session = HarnessSession(harness, "ferry-support")
        agent = build_agent(session, client)
        for text in lines:
            result = await session.run(agent, text)
            print(f"> {text}\n{result.final_output}")
        await session.aclose()  # the end of the conversation: flush what is held back


SCRIPT = [
    {
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "memory_save",
                    "arguments": json.dumps({"text": "The customer travels with a bicycle"}),
                },
            }
        ]
    },
    "Noted: you travel with a bicycle.",
    "The 07:15 from pier 4 takes bicycles.",
]
SAID = ["Please remember that I travel with a bicycle.", "Which morning ferry can I take?"]


@contextlib.contextmanager
def offline_client() -> Iterator[openai.AsyncOpenAI]:
    """A client of a scripted OpenAI-compatible server on loopback (no key, no network)."""
    set_tracing_disabled(True)  # traces would go to api.openai.com
    with FakeOpenAIServer(SCRIPT) as server:
        yield openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-offline")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace")
    parser.add_argument("--offline", action="store_true", help="a scripted model on loopback")
    args = parser.parse_args(argv)
    if args.offline:
        with offline_client() as client:
            asyncio.run(chat(args.workspace, iter(SAID), client))
    else:
        asyncio.run(chat(args.workspace, iter(sys.stdin.readline, ""), openai.AsyncOpenAI()))


if __name__ == "__main__":
    main()
