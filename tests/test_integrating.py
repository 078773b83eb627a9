"""The framework recipes of docs/integrating.md run as written, against FakeOpenAIServer.

Each recipe is the code blocks that follow a ``<!-- run: NAME -->`` line, run in order in
one namespace with ``input()`` scripted, the model endpoint set through ``OPENAI_BASE_URL``
and the workspace in the test's folder. The memory side runs on the offline extractive
backend, so every request the fake server sees is one the framework made for the agent.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.testing import FakeOpenAIServer, Fault, RecordedRequest

if TYPE_CHECKING:
    from conftest import EventLog

DOC = (Path(__file__).resolve().parents[1] / "docs" / "integrating.md").read_text(encoding="utf-8")
MEMORY_TOOLS = {"memory_search", "memory_get", "session_search", "memory_save"}


@dataclass(frozen=True)
class Recipe:
    """One recipe of docs/integrating.md and what a test needs to know about it."""

    name: str  # the marker: <!-- run: NAME -->
    blocks: int  # how many marked blocks it has
    session_id: str
    globals: dict[str, Any] = field(default_factory=dict)  # what the prose leaves to the reader

    @property
    def code(self) -> str:
        found = re.findall(
            rf"^<!-- run: {re.escape(self.name)} -->\n```python\n(.*?)\n```",
            DOC,
            flags=re.DOTALL | re.MULTILINE,
        )
        assert len(found) == self.blocks, f"docs/integrating.md: {len(found)} {self.name} blocks"
        return "\n\n".join(found)


class TimetableService:
    """The ``timetable_service`` the Agents SDK recipe's own tool calls."""

    def __init__(self) -> None:
        self.text = "".join(
            f"07:{m % 60:02d} Tidewater -> Harbour, pier {m}\n" for m in range(4000)
        )

    def dump(self, route: str) -> str:
        return self.text


AGENTS = Recipe(
    "openai-agents",
    blocks=3,
    session_id="support-42",
    globals={"timetable_service": TimetableService()},
)
LANGGRAPH = Recipe("langgraph", blocks=2, session_id="thread-7")
RECIPES = [AGENTS, LANGGRAPH]


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    """An assistant message that calls one tool."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"tool_calls": [{"id": call_id, "type": "function", "function": function}]}


@dataclass
class Run:
    """What a recipe run left: the server's record, the recipe's namespace, what it printed,
    and the events of the harness the recipe opened."""

    server: FakeOpenAIServer
    namespace: dict[str, Any]
    printed: list[str]
    events: EventLog

    @property
    def requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.path.endswith("/chat/completions")]


RunRecipe = Callable[..., Run]


@pytest.fixture
def network_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Connections to anything but loopback: refused and recorded (tests stay offline)."""
    refused: list[object] = []
    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            refused.append(address)
            raise OSError(f"test_integrating: no network ({address!r})")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    return refused


@pytest.fixture
def run_recipe(
    monkeypatch: pytest.MonkeyPatch, network_calls: list[object], events: EventLog
) -> Iterator[RunRecipe]:
    """``run_recipe(recipe, replies, said, **settings)``: run ``recipe`` with the fake server
    answering ``replies`` and ``input()`` returning each of ``said``, then "" (the loop ends).

    ``settings`` are harnessmem settings as environment variables (``compaction__keep_messages
    =4``). Maintenance is off, so MEMORY.md changes only through memory_save.
    """
    servers: list[FakeOpenAIServer] = []
    namespaces: list[dict[str, Any]] = []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESSMEM_MAINTENANCE__ENABLED", "false")

    def run(recipe: Recipe, replies: Any, said: Sequence[str], **settings: Any) -> Run:
        if recipe is AGENTS:
            from agents import set_tracing_disabled

            # Traces would go to api.openai.com (refused above, but from a thread that
            # only logs it); a process-wide switch, and no other test uses the SDK.
            set_tracing_disabled(True)
        for key, value in settings.items():
            monkeypatch.setenv(f"HARNESSMEM_{key.upper()}", str(value))
        server = FakeOpenAIServer(replies)
        servers.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        lines = iter([*said, ""])
        printed: list[str] = []
        monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
        namespace: dict[str, Any] = {"__name__": f"recipe_{recipe.name}", **recipe.globals}
        namespace["print"] = lambda *args: printed.append(" ".join(map(str, args)))
        # The recipe's harness also gets the event log (its events say which stage acted).
        opener = MemoryHarness.open.__func__  # type: ignore[attr-defined]
        observed = classmethod(lambda cls, url, **kw: opener(cls, url, plugins=[events], **kw))
        monkeypatch.setattr(MemoryHarness, "open", observed)
        namespaces.append(namespace)
        exec(compile(recipe.code, f"docs/integrating.md ({recipe.name})", "exec"), namespace)
        assert not server.problems, server.problems
        assert not network_calls, network_calls
        return Run(server, namespace, printed, events)

    yield run
    for namespace in namespaces:  # a recipe that failed half-way left its harness open
        harness = namespace.get("harness")
        if isinstance(harness, MemoryHarness) and not harness.closed:
            harness.close()
    for server in servers:
        server.close()


def seed_memory(text: str) -> None:
    """Put ``text`` into ./workspace/MEMORY.md before the recipe opens it."""
    with MemoryHarness.open("./workspace", maintenance={"enabled": False}) as harness:
        harness.save(text)


def daily_logs() -> str:
    return "".join(p.read_text() for p in sorted(Path("workspace/memory").glob("*.md")))


def tools_offered(request: RecordedRequest) -> set[str]:
    return {tool["function"]["name"] for tool in request.body.get("tools") or []}


def test_every_marked_block_belongs_to_a_tested_recipe() -> None:
    markers = re.findall(r"^<!-- run: ([\w-]+) -->$", DOC, flags=re.MULTILINE)
    assert sorted(set(markers)) == sorted(r.name for r in RECIPES)
    for recipe in RECIPES:
        assert markers.count(recipe.name) == recipe.blocks


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_memory_reaches_the_prompt_and_the_memory_tools_work(
    recipe: Recipe, run_recipe: RunRecipe
) -> None:
    seed_memory("- Maya maintains the tidewater timetables")
    run = run_recipe(
        recipe,
        [
            call("memory_save", {"text": "The Harbour pier closes for repairs in March"}),
            "Noted: the Harbour pier closes in March.",
            call("memory_search", {"query": "Harbour pier"}, "call_2"),
            "It closes for repairs in March.",
        ],
        [
            "Please remember that the Harbour pier closes for repairs in March.",
            "When is the Harbour pier closed? Also, our night ferry leaves at 23:40 on Fridays.",
        ],
    )
    first, after_save, second, after_search = run.requests
    system = first.messages[0]
    assert system["role"] == "system"
    assert "Maya maintains the tidewater timetables" in system["content"], "MEMORY.md is in it"
    assert "<memory_context" in system["content"]
    assert tools_offered(first) >= MEMORY_TOOLS
    # memory_save ran through the session: in MEMORY.md, and in the next call's prompt.
    assert after_save.messages[-1]["role"] == "tool"
    assert after_save.messages[-1]["content"].startswith("Saved to MEMORY.md")
    memory = Path("workspace/MEMORY.md").read_text()
    assert "Harbour pier closes for repairs in March" in memory
    assert "Harbour pier closes for repairs in March" in second.messages[0]["content"]
    # memory_search found it and its result went back to the model with the call's id.
    result = after_search.messages[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_2")
    assert "Harbour pier closes for repairs in March" in result["content"]
    assert run.printed == [
        "Noted: the Harbour pier closes in March.",
        "It closes for repairs in March.",
    ]
    # after_call flushed the turns into today's daily log.
    assert "night ferry leaves at 23:40" in daily_logs()


def test_own_tool_outputs_are_evicted_with_the_sdk_call_ids(run_recipe: RunRecipe) -> None:
    routes = {"call_tt1": "tidewater-harbour", "call_tt2": "harbour-tidewater"}
    both = [
        {"id": i, "type": "function", "function": {"name": "fetch_timetable", "arguments": a}}
        for i, a in ((i, json.dumps({"route": route})) for i, route in routes.items())
    ]
    run = run_recipe(
        AGENTS,
        [{"tool_calls": both}, "Here they are."],
        ["Show me both tidewater-harbour timetables."],
    )
    assert "fetch_timetable" in tools_offered(run.requests[0])
    full = AGENTS.globals["timetable_service"].text
    assert len(full) > 80_000
    results = run.requests[1].messages[-2:]
    assert [(m["role"], m["tool_call_id"]) for m in results] == [
        ("tool", "call_tt1"),
        ("tool", "call_tt2"),
    ]
    for call_id, result in zip(routes, results, strict=True):
        assert len(result["content"]) < 10_000, "the model got a preview, not the whole output"
        (saved,) = Path("workspace/large_tool_results/support-42").glob(f"{call_id}-*.txt")
        assert saved.read_text() == full
        assert f"large_tool_results/support-42/{saved.name}" in result["content"]
    # By after_tool as each tool returned, not by the sweep before the next model call.
    assert sorted((e.stage, e.tool_name, e.call_id) for e in run.events.evicted) == [
        ("post_acting", "fetch_timetable", "call_tt1"),
        ("post_acting", "fetch_timetable", "call_tt2"),
    ]
    # The converters keep parallel calls in one assistant message, as the model sent them.
    assert [m["role"] for m in run.namespace["sent"]] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in run.namespace["sent"][1]["tool_calls"]] == list(routes)


def test_shell_output_is_evicted_with_the_model_call_id(run_recipe: RunRecipe) -> None:
    command = "seq 1 30000"
    run = run_recipe(
        LANGGRAPH,
        [call("run_shell", {"command": command}, "call_sh"), "Printed 30000 numbers."],
        ["Count to 30000 in the shell."],
    )
    assert "run_shell" in tools_offered(run.requests[0])
    result = run.requests[1].messages[-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_sh")
    assert len(result["content"]) < 10_000
    (saved,) = Path("workspace/large_tool_results/thread-7").glob("call_sh-*.txt")
    assert saved.read_text() == "".join(f"{n}\n" for n in range(1, 30001))
    assert saved.name in result["content"]
    (evicted,) = run.events.evicted
    assert (evicted.stage, evicted.tool_name, evicted.call_id) == (
        "post_acting",
        "run_shell",
        "call_sh",
    )


def chatty(body: dict[str, Any]) -> Any:
    """A model that answers every user message at some length, once."""
    last = body["messages"][-1]
    return f"Answer to: {last['content']} " + "Details follow. " * 20


TRIGGER = 12


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_a_long_conversation_stays_under_the_trigger(recipe: Recipe, run_recipe: RunRecipe) -> None:
    said = [f"Question {n}: what sails from pier {n}?" for n in range(1, 31)]
    run = run_recipe(
        recipe,
        chatty,
        said,
        compaction__trigger_messages=TRIGGER,
        compaction__keep_messages=4,
    )
    assert len(run.requests) == len(said), "one model call per turn, no retries"
    for n, request in enumerate(run.requests, 1):
        conversation = request.messages[1:]  # after the system message
        assert len(conversation) < TRIGGER, f"turn {n} sent {len(conversation)} messages"
        assert request.messages[-1]["content"] == said[n - 1]
        assert sum(said[n - 1] == m.get("content") for m in conversation) == 1
    last = run.requests[-1].messages
    assert any("<conversation_summary" in (m.get("content") or "") for m in last)
    # The dropped turns are in the session log, each once.
    log = Path(f"workspace/sessions/{recipe.session_id}.log.jsonl").read_text().splitlines()
    logged = [json.loads(line)["message"].get("content") for line in log]
    for question in said[:20]:
        assert logged.count(question) == 1, question
    # What the recipe keeps between turns is the compacted list, so one compaction (one
    # summary call) covers several turns; compacting the raw history again on every call
    # would summarise about once a turn.
    compactions = run.events.compactions
    assert all(not c.degraded and not c.postponed for c in compactions)
    assert 3 <= len(compactions) <= len(said) // 3


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_a_context_length_error_compacts_and_retries_once(
    recipe: Recipe, run_recipe: RunRecipe
) -> None:
    said = [f"Question {n}: " + "which piers does the night ferry serve? " * 8 for n in range(8)]
    run = run_recipe(
        recipe,
        [*["Pier 3, then pier 7. " * 15] * 7, Fault.context_length(), "Pier 9."],
        said,
    )
    failed, retried = run.requests[-2:]
    assert len(run.requests) == len(said) + 1
    assert len(retried.messages) < len(failed.messages)
    tokens = [sum(len(str(m.get("content") or "")) for m in r.messages) for r in (failed, retried)]
    assert tokens[1] < tokens[0]
    assert sum(said[-1] == m.get("content") for m in retried.messages) == 1
    assert [c.trigger for c in run.events.compactions] == ["overflow"]
    assert run.printed[-1] == "Pier 9."
