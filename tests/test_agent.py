"""The reference agent loop, end to end through litellm's HTTP client against FakeOpenAIServer.

The memory side runs on the offline extractive backend, so every model request the fake
server sees is one of the agent's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.agent import Agent, Tool
from harnessmem.cli import EXIT_MODEL, main
from harnessmem.errors import ContextOverflowError, ModelUnavailableError
from harnessmem.testing import FakeOpenAIServer, Fault

if TYPE_CHECKING:
    from conftest import EventLog

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def harness(tmp_path: Path, events: EventLog) -> Iterator[MemoryHarness]:
    with MemoryHarness.open(
        tmp_path / "ws", plugins=[events], maintenance={"enabled": False}
    ) as harness:
        yield harness


def make_agent(harness: MemoryHarness, server: FakeOpenAIServer, **kwargs: Any) -> Agent:
    return Agent(
        harness.session("chat"),
        MODEL,
        api_base=server.base_url,
        api_key="sk-test",
        num_retries=0,
        **kwargs,
    )


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    }


def test_a_turn_sends_memory_and_tools_and_flushes_at_the_end(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer]
) -> None:
    harness.save("- Maya maintains tidewater")
    server = servers(["Hello Maya."])
    agent = make_agent(harness, server)
    reply = agent.run("Remember that our staging database listens on port 5433.")
    assert reply.text == "Hello Maya."
    assert (reply.model_calls, reply.tool_calls, reply.overflow_retries) == (1, (), 0)
    (request,) = server.requests
    system = request.messages[0]
    assert system["role"] == "system"
    assert "Maya maintains tidewater" in system["content"], "MEMORY.md goes into the prompt"
    names = {tool["function"]["name"] for tool in request.body["tools"]}
    assert {"memory_search", "memory_get", "session_search", "memory_save"} <= names
    assert reply.flush is not None
    assert reply.flush.written, "after_call flushes the turn into the daily log"
    assert any("5433" in fact for fact in reply.flush.entries)
    assert reply.prompt_tokens > 0


def test_memory_tools_run_through_the_session(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer]
) -> None:
    harness.save("- The release manager this cycle is Jonas")
    server = servers(
        [
            call("memory_search", {"query": "release manager"}),
            call("memory_save", {"text": "Maya prefers small pull requests"}, "call_2"),
            "Jonas is the release manager; noted your preference.",
        ]
    )
    agent = make_agent(harness, server)
    reply = agent.run("Who manages the release? Also, I prefer small pull requests.")
    assert reply.tool_calls == ("memory_search", "memory_save")
    assert reply.model_calls == 3
    second = server.requests[1].messages
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == "call_1"
    assert "release manager this cycle is Jonas" in second[-1]["content"]
    assert "Maya prefers small pull requests" in harness.workspace.read_text("MEMORY.md")
    # The next turn's prompt carries what was saved.
    server2 = servers(["ok"])
    agent.options["api_base"] = server2.base_url
    agent.run("thanks")
    assert "Maya prefers small pull requests" in server2.requests[0].messages[0]["content"]


def test_own_tools_run_and_huge_outputs_are_evicted(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer], events: EventLog
) -> None:
    def run_tests(path: str, verbose: bool = False) -> str:
        """Run the test suite under PATH."""
        return "tests/test_x.py::test_y PASSED\n" * 4_000 if verbose else "ok"

    server = servers([call("run_tests", {"path": "tests", "verbose": True}), "All passed."])
    agent = make_agent(harness, server, tools=[run_tests])
    schema = agent.tools["run_tests"].schema["function"]
    assert schema["parameters"]["required"] == ["path"]
    assert schema["parameters"]["properties"]["verbose"] == {"type": "boolean"}
    assert schema["description"] == "Run the test suite under PATH."
    reply = agent.run("Run the tests, verbose.")
    assert reply.text == "All passed."
    (evicted,) = events.evicted
    assert evicted.tool_name == "run_tests"
    sent = server.requests[1].messages[-1]["content"]
    assert len(sent) < 10_000
    assert evicted.path in sent, "the model is told where the full output is"


def test_tool_mistakes_come_back_as_text(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer]
) -> None:
    def explode() -> str:
        raise RuntimeError("disk full")

    server = servers(
        [
            call("nope", {}),
            call("explode", {}, "call_2"),
            call("explode", {"extra": 1}, "call_3"),
            "sorry",
        ]
    )
    agent = make_agent(harness, server, tools=[Tool.from_function(explode)])
    agent.run("go")
    results = [r.messages[-1]["content"] for r in server.requests[1:]]
    assert results[0].startswith("Error: there is no tool 'nope'")
    assert results[1] == "Error: explode failed: RuntimeError: disk full"
    assert results[2].startswith("Error: explode:")


def test_max_steps_asks_for_an_answer_without_tools(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer]
) -> None:
    server = servers([call("memory_search", {"query": "x"}, f"c{i}") for i in range(2)] + ["done"])
    reply = make_agent(harness, server, max_steps=2).run("loop forever")
    assert reply.text == "done"
    assert reply.model_calls == 3
    assert "tool_choice" not in server.requests[1].body
    assert server.requests[2].body["tool_choice"] == "none"


def test_overflow_is_recovered_by_a_forced_compaction_and_one_retry(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer], events: EventLog
) -> None:
    turns = [
        f"Turn {i}: the harbour of station {i} has a tidal range of {i} metres." for i in range(20)
    ]
    server = servers(["noted"] * 20 + [Fault.context_length(limit=600, requested=2_000), "fits"])
    agent = make_agent(harness, server)
    for text in turns:
        agent.run(text)
    assert not events.compactions, "under the triggers nothing compacts by itself"
    before = len(agent.messages)
    reply = agent.run("What did we discuss?")
    assert reply.text == "fits"
    assert reply.overflow_retries == 1
    assert reply.model_calls == 2
    (compaction,) = events.compactions
    assert compaction.trigger == "overflow"
    failed, retried = server.requests[-2], server.requests[-1]
    assert len(retried.messages) < len(failed.messages)
    assert sum(m["content"] == "What did we discuss?" for m in retried.messages) == 1, (
        "the user input is never duplicated"
    )
    assert len(agent.messages) < before


def test_a_second_overflow_is_an_error(
    harness: MemoryHarness, servers: Callable[[Any], FakeOpenAIServer]
) -> None:
    server = servers(["a"] * 3 + [Fault.context_length()] * 2)
    agent = make_agent(harness, server)
    for text in ("one thing to say", "another thing to say", "a third thing to say"):
        agent.run(text)
    with pytest.raises(ContextOverflowError, match="does not fit the context window"):
        agent.run("and now too long")


def test_an_unreachable_model_is_one_error(harness: MemoryHarness) -> None:
    agent = Agent(
        harness.session("s"), MODEL, api_base="http://127.0.0.1:9/v1", api_key="k", num_retries=0
    )
    with pytest.raises(ModelUnavailableError, match="openai/gpt-4o-mini"):
        agent.run("hello")


def test_memory_tool_names_are_reserved(harness: MemoryHarness) -> None:
    def memory_search(query: str) -> str:
        return query

    with pytest.raises(ValueError, match="memory_search"):
        Agent(harness.session("s"), MODEL, tools=[memory_search])


# -- harnessmem chat ----------------------------------------------------------------------------


def test_chat_without_a_model_explains_how_to_set_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["chat", "-w", str(tmp_path / "ws")])
    assert result.exit_code == 3
    assert result.stderr.startswith("error: chat needs a chat model")
    assert "--model" in result.stderr
    assert "HARNESSMEM_MODEL__NAME" in result.stderr
    assert "Traceback" not in result.output


# The command in a fresh interpreter, then whether it imported litellm (seconds offline).
_COMMAND = """
import sys
from harnessmem.cli import main
try:
    main(sys.argv[1:], prog_name="harnessmem")
except SystemExit as exit:
    code = exit.code
print("exit", code, "litellm" in sys.modules)
"""


def _cold(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSMEM_") and k not in keys}
    result = subprocess.run(
        [sys.executable, "-c", _COMMAND, *args], capture_output=True, text=True, env=env
    )
    return result, result.stdout.splitlines()[-1].split()


@pytest.mark.parametrize("args", [["--help"], ["chat", "--help"]])
def test_help_does_not_import_litellm(args: list[str]) -> None:
    result, (_, code, imported) = _cold(*args)
    assert code in ("0", "None"), result.stderr
    assert "Usage: harnessmem" in result.stdout
    assert imported == "False"


def test_chat_without_a_key_fails_at_once_without_importing_litellm(tmp_path: Path) -> None:
    """The key is checked before litellm is imported (seconds), and nothing is created."""
    workspace = tmp_path / "ws"
    result, (_, code, imported) = _cold("chat", "-m", MODEL, "-w", str(workspace))
    assert code == "3"
    assert imported == "False", "the failing chat did not import litellm"
    assert result.stderr.splitlines() == [
        f"error: chat --model {MODEL!r} needs an API key: OPENAI_API_KEY is not set",
        "hint: export OPENAI_API_KEY",
    ]
    assert not workspace.exists()


def test_chat_on_the_settings_model_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("HARNESSMEM_MODEL__NAME", "anthropic/claude-3-5-haiku-latest")
    result = CliRunner().invoke(main, ["chat", "-w", str(tmp_path / "ws")])
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [
        "error: model.name 'anthropic/claude-3-5-haiku-latest' needs an API key: "
        "ANTHROPIC_API_KEY is not set",
        "hint: export ANTHROPIC_API_KEY, or set model.options.api_key",
    ]


def test_chat_talks_and_remembers(
    tmp_path: Path, servers: Callable[[Any], FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = servers(["Nice to meet you, Maya.", "Noted."])
    workspace = tmp_path / "ws"
    args = ["chat", "-w", str(workspace), "--model", MODEL, "--api-base", server.base_url]
    text = "My name is Maya and I prefer tea.\n/memory\nWe decided to use Postgres 16.\n/exit\n"
    result = CliRunner().invoke(main, args, input=text)
    assert result.exit_code == 0, result.output
    assert "agent> Nice to meet you, Maya." in result.output
    assert "MEMORY.md is empty" in result.output
    assert "nothing remembered yet" in result.output, "/memory shows the block"
    assert "remembered" in result.output
    assert len(server.requests) == 2
    logs = list((workspace / "memory").glob("*.md"))
    assert logs
    assert "Postgres 16" in logs[0].read_text()


def test_chat_reports_a_failed_turn_goes_on_and_exits_with_the_model_status(
    tmp_path: Path, servers: Callable[[Any], FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = servers([Fault.status(401, "Incorrect API key provided"), "back again"])
    args = ["chat", "-w", str(tmp_path / "ws"), "-m", MODEL, "--api-base", server.base_url]
    result = CliRunner().invoke(main, args, input="hi\nhi again\n")
    assert result.exit_code == EXIT_MODEL, result.output
    assert "error: openai/gpt-4o-mini: AuthenticationError" in result.stderr
    assert "agent> back again" in result.output
    assert result.stdout.rstrip().endswith("in this chat; 1 turn failed")
    assert "Traceback" not in result.output


def test_chat_with_every_turn_answered_exits_0(
    tmp_path: Path, servers: Callable[[Any], FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = servers(["hello"])
    args = ["chat", "-w", str(tmp_path / "ws"), "-m", MODEL, "--api-base", server.base_url]
    result = CliRunner().invoke(main, args, input="hi\n")
    assert result.exit_code == 0, result.output
    assert "failed" not in result.stdout


def test_chat_compact_compacts_now_with_a_focus(
    tmp_path: Path, servers: Callable[[Any], FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("HARNESSMEM_COMPACTION__KEEP_MESSAGES", "2")
    summary = (
        "## SESSION INTENT\nChat.\n## SUMMARY\nThree questions.\n"
        "## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
    )

    def reply(body: dict[str, Any]) -> str:
        text = json.dumps(body["messages"])
        if "<conversation>" in text and "SESSION INTENT" in text:
            return summary
        return "NO_REPLY" if "<conversation>" in text else "ok"

    server = servers(reply)
    # the upkeep (summaries, flushes) on the same fake server, so the focus can be seen
    monkeypatch.setenv("HARNESSMEM_MODEL__NAME", MODEL)
    monkeypatch.setenv("HARNESSMEM_MODEL__OPTIONS", json.dumps({"api_base": server.base_url}))
    args = ["chat", "-w", str(tmp_path / "ws"), "-m", MODEL, "--api-base", server.base_url]
    text = "one\ntwo\nthree\n/compact the Postgres decision\n/compact\n/exit\n"
    result = CliRunner().invoke(main, args, input=text)
    assert result.exit_code == 0, result.output
    assert "compacted: 7 -> " in result.output
    focused = [r for r in server.requests if "<focus>" in json.dumps(r.body["messages"])]
    assert len(focused) == 1, result.output
    assert "the Postgres decision" in json.dumps(focused[0].body["messages"])
    assert "nothing to compact" in result.output, "a second /compact finds nothing left"
