"""The MCP server (``harnessmem mcp``, :mod:`harnessmem.mcp`), driven by the SDK's own client.

Over stdio (``python -m harnessmem.cli mcp`` as a subprocess, through ``stdio_client``),
over streamable HTTP on 127.0.0.1 (the same command with ``--http 127.0.0.1:0``, the port
read from the line it prints), and in-process (``mcp.Client(server)``) for what a
subprocess cannot reach (a harness that fails under the server). Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'harnessmem[mcp]'")

import anyio
import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from harnessmem import MemoryHarness
from harnessmem.mcp import build_server
from harnessmem.tools import GET_MAX_CHARS, QUERY_MAX_CHARS, tool_schemas

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60  # seconds any one scenario may take before it fails instead of hanging
TOKEN = "t0ken-for-tests-" + "x" * 24
#: The command line of the server, without its options.
COMMAND = [sys.executable, "-m", "harnessmem.cli", "mcp"]
FACT = "- Lena Fischer's frequent flyer number is HA-5521-778."


def _env(**extra: str) -> dict[str, str]:
    """This process's environment (the test fixtures cleaned it of HARNESSMEM_*), plus extra."""
    return {**os.environ, **extra}


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@asynccontextmanager
async def _stdio(workspace: Path, *args: str, **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "harnessmem.cli", "mcp", "-w", str(workspace), *args],
        env=_env(**env),
        cwd=str(workspace.parent),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _run(scenario: Callable[[], Any]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await scenario()

    anyio.run(bounded)


# ------------------------------------------------------------------------------ stdio


def test_stdio_save_then_search_and_read_memory_md(tmp_path: Path) -> None:
    """Acceptance: over stdio, a saved fact is found by memory_search, and MEMORY.md is
    listed and readable as a resource holding it."""
    workspace = tmp_path / "ws"

    async def scenario() -> None:
        async with _stdio(workspace) as client:
            saved = await client.call_tool("memory_save", {"text": FACT})
            assert not saved.is_error, _text(saved)
            assert _text(saved).startswith("Saved to MEMORY.md")
            found = await client.call_tool("memory_search", {"query": "frequent flyer number"})
            assert not found.is_error
            assert "HA-5521-778" in _text(found)
            assert "MEMORY.md:" in _text(found)
            listed = await client.list_resources()
            uris = {r.uri: r for r in listed.resources}
            assert uris["harnessmem://MEMORY.md"].mime_type == "text/markdown"
            assert uris["harnessmem://sessions"].mime_type == "application/json"
            read = await client.read_resource("harnessmem://MEMORY.md")
            assert read.contents[0].mime_type == "text/markdown"
            assert FACT in read.contents[0].text

    _run(scenario)
    assert FACT in (workspace / "MEMORY.md").read_text()


def test_stdio_tools_are_the_session_tools(tmp_path: Path) -> None:
    """The listed tools are Session.tools: same names, descriptions and input schemas (one
    definition); memory_flush only when asked for."""

    async def scenario() -> None:
        async with _stdio(tmp_path / "ws") as client:
            tools = (await client.list_tools()).tools
            expected = [schema["function"] for schema in tool_schemas()]
            assert [t.name for t in tools] == [f["name"] for f in expected]
            for tool, function in zip(tools, expected, strict=True):
                assert tool.description == function["description"]
                assert tool.input_schema == function["parameters"]
            assert {t.name for t in tools if t.annotations and t.annotations.read_only_hint} == {
                "memory_search",
                "memory_get",
                "session_search",
            }
        async with _stdio(tmp_path / "ws", "--flush-tool") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[-1] == "memory_flush"

    _run(scenario)


def test_stdio_memory_get_stays_in_the_workspace(tmp_path: Path) -> None:
    """memory_get refuses a path that climbs out and an absolute one, as tool errors; the
    server goes on serving."""
    workspace = tmp_path / "ws"
    (tmp_path / "secret.txt").write_text("do not read")

    async def scenario() -> None:
        async with _stdio(workspace) as client:
            for path in ("../../etc/passwd", "/etc/passwd", "../secret.txt", "memory/../../x"):
                refused = await client.call_tool("memory_get", {"path": path})
                assert refused.is_error, path
                assert "not allowed" in _text(refused) or "not a memory file" in _text(refused)
                assert "root:" not in _text(refused)
                assert "do not read" not in _text(refused)
            missing = await client.call_tool("memory_get", {"path": "memory/2026-01-01.md"})
            assert missing.is_error
            assert "does not exist" in _text(missing)
            await client.call_tool("memory_save", {"text": FACT})
            read = await client.call_tool("memory_get", {"path": "MEMORY.md"})
            assert not read.is_error
            assert "HA-5521-778" in _text(read)

    _run(scenario)


def test_stdio_bad_arguments_are_tool_errors(tmp_path: Path) -> None:
    """A missing query, wrong types, a 10 MB query, a 10 MB save: each a tool error saying
    what to fix; nothing is written, and the server still answers afterwards."""
    workspace = tmp_path / "ws"
    huge = "flight " * (10 * 1024 * 1024 // 7)

    async def scenario() -> None:
        async with _stdio(workspace) as client:
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("memory_search", {}, "'query' is required"),
                ("memory_search", {"query": 42}, "'query' must be a string"),
                ("memory_search", {"query": "x", "limit": "many"}, "'limit' must be an integer"),
                ("memory_search", {"query": "x", "mode": "fuzzy"}, "'mode' must be"),
                ("memory_get", {"path": ["MEMORY.md"]}, "'path' must be a string"),
                ("memory_get", {"path": "MEMORY.md", "start_line": 0}, "at least 1"),
                ("session_search", {"query": None}, "'query' is required"),
                ("memory_save", {"text": {"fact": 1}}, "'text' must be a string"),
                ("memory_search", {"query": huge}, f"at most {QUERY_MAX_CHARS:,}"),
                ("memory_save", {"text": "- " + huge}, "characters long"),
            ]
            for name, arguments, message in cases:
                answer = await client.call_tool(name, arguments)
                assert answer.is_error, (name, arguments)
                assert message in _text(answer), _text(answer)
                assert len(_text(answer)) < 500  # the error does not echo the 10 MB back
            with pytest.raises(MCPError, match="unknown tool 'memory_delete'"):
                await client.call_tool("memory_delete", {"path": "MEMORY.md"})
            alive = await client.call_tool("memory_search", {"query": "flight"})
            assert not alive.is_error

    _run(scenario)
    assert not (workspace / "MEMORY.md").exists()


def test_stdio_two_workspaces_see_nothing_of_each_other(tmp_path: Path) -> None:
    """Acceptance: a second server on another workspace does not find the fact, nor list it."""

    async def scenario() -> None:
        async with _stdio(tmp_path / "a") as first, _stdio(tmp_path / "b") as second:
            await first.call_tool("memory_save", {"text": FACT})
            assert "HA-5521-778" in _text(
                await first.call_tool("memory_search", {"query": "flyer"})
            )
            other = await second.call_tool("memory_search", {"query": "frequent flyer number"})
            assert not other.is_error
            assert _text(other).startswith("No memories match")
            read = await second.read_resource("harnessmem://MEMORY.md")
            assert read.contents[0].text == ""
            escape = await second.call_tool("memory_get", {"path": "../a/MEMORY.md"})
            assert escape.is_error

    _run(scenario)


def test_stdio_prompt_gives_the_system_context(tmp_path: Path) -> None:
    """The prompt memory_context is Session.system_context(): MEMORY.md as escaped data."""
    workspace = tmp_path / "ws"

    async def scenario() -> None:
        async with _stdio(workspace) as client:
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["memory_context"]
            await client.call_tool("memory_save", {"text": FACT})
            prompt = await client.get_prompt("memory_context")
            text = prompt.messages[0].content.text  # type: ignore[union-attr]
            assert "HA-5521-778" in text
            with pytest.raises(MCPError, match="unknown prompt"):
                await client.get_prompt("other")

    _run(scenario)
    with MemoryHarness.open(workspace) as harness:
        expected = harness.session("mcp").system_context()
    assert "HA-5521-778" in expected


# ------------------------------------------------------------------------------ in-process


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[MemoryHarness]:
    with MemoryHarness.open(tmp_path / "ws") as opened:
        yield opened


def _client(harness: MemoryHarness) -> Client:
    return Client(build_server(harness), read_timeout_seconds=TIMEOUT)


def test_daily_logs_are_resources_and_the_template_reads_them(harness: MemoryHarness) -> None:
    """Each daily log is listed with its MIME type and size; the template reads one by
    date, archived ones too; a bad date or an unknown URI is an MCP error."""
    harness.workspace.write_text("memory/2026-11-30.md", "## Memory Flush\n- Kyoto in May\n")
    harness.workspace.write_text("memory/archive/2025-01-02.md", "- old fact\n")
    harness.workspace.write_text("memory/notes.txt", "not a daily log")
    harness.workspace.append_text("sessions/chat-1.log.jsonl", '{"role": "user"}\n')

    async def scenario() -> None:
        async with _client(harness) as client:
            listed = {r.uri: r for r in (await client.list_resources()).resources}
            daily = listed["harnessmem://memory/2026-11-30.md"]
            assert daily.mime_type == "text/markdown"
            assert daily.size == len(b"## Memory Flush\n- Kyoto in May\n")
            assert not any("notes" in uri or "archive" in uri for uri in listed)
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["harnessmem://memory/{date}.md"]
            read = await client.read_resource("harnessmem://memory/2026-11-30.md")
            assert "Kyoto in May" in read.contents[0].text
            archived = await client.read_resource("harnessmem://memory/2025-01-02.md")
            assert archived.contents[0].text == "- old fact\n"
            index = json.loads(
                (await client.read_resource("harnessmem://sessions")).contents[0].text
            )
            assert [s["session_id"] for s in index["sessions"]] == ["chat-1"]
            assert index["sessions"][0]["path"] == "sessions/chat-1.log.jsonl"
            for uri in (
                "harnessmem://memory/2026-13-45.md",
                "harnessmem://memory/1999-01-01.md",
                "harnessmem://../etc/passwd",
                "harnessmem://memory/../../etc/passwd",
                "file:///etc/passwd",
            ):
                with pytest.raises(MCPError):
                    await client.read_resource(uri)

    _run(scenario)


def test_a_failing_harness_gives_tool_errors_not_a_crash(harness: MemoryHarness) -> None:
    """A failure of the harness itself (here: closed under the server) comes back as a tool
    error with the message; the server answers the next request."""

    async def scenario() -> None:
        async with _client(harness) as client:
            harness.close()
            answer = await client.call_tool("memory_search", {"query": "Kyoto"})
            assert answer.is_error
            assert "memory_search failed" in _text(answer)
            assert "closed" in _text(answer)
            assert "memory_search" in [t.name for t in (await client.list_tools()).tools]

    _run(scenario)


def test_memory_get_reads_a_window_as_the_agent_tool_does(harness: MemoryHarness) -> None:
    """Same text as Session.call_tool, byte for byte (one implementation)."""
    lines = "".join(f"- fact {n}\n" for n in range(400))
    harness.workspace.write_text("memory/2026-11-30.md", lines)
    arguments = {"path": "memory/2026-11-30.md", "start_line": 10, "lines": 300}
    expected = harness.session("s").call_tool("memory_get", arguments)

    async def scenario() -> None:
        async with _client(harness) as client:
            answer = await client.call_tool("memory_get", arguments)
            assert not answer.is_error
            assert _text(answer) == expected
            assert len(_text(answer)) <= GET_MAX_CHARS + 200

    _run(scenario)


def test_memory_flush_writes_the_facts_of_a_transcript(
    tmp_path: Path, shared_file: Callable[[str], Path]
) -> None:
    """With mcp.flush_tool on, a client hands over a real tau-bench run: its facts go to
    today's log (searchable at once), the counts come back, and handing the same messages
    over again writes nothing new. Off (the default), the tool does not exist."""
    runs = json.loads(shared_file("tau-bench/gpt-4o-airline-dev.json").read_text())
    messages = list(runs[3]["traj"])

    async def scenario(harness: MemoryHarness) -> None:
        async with _client(harness) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[-1] == "memory_flush"
            flushed = await client.call_tool(
                "memory_flush", {"messages": messages, "session_id": "tau-3"}
            )
            assert not flushed.is_error, _text(flushed)
            counts = re.search(
                r"(\d+) new message\(s\) read, (\d+) fact\(s\) written", _text(flushed)
            )
            assert counts is not None, _text(flushed)
            assert int(counts.group(1)) > 0
            assert int(counts.group(2)) > 0
            daily = harness.workspace.list("memory", recursive=False)
            assert len(daily) == 1
            first_fact = harness.workspace.read_text(daily[0]).split("\n- ", 1)[1].split()[:3]
            found = await client.call_tool("memory_search", {"query": " ".join(first_fact)})
            assert daily[0] in _text(found)
            again = await client.call_tool(
                "memory_flush", {"messages": messages, "session_id": "tau-3"}
            )
            assert "0 fact(s) written" in _text(again)
            bad = await client.call_tool("memory_flush", {"messages": [{"content": "hi"}]})
            assert bad.is_error
            assert "role" in _text(bad)
            empty = await client.call_tool("memory_flush", {"messages": []})
            assert empty.is_error

    async def off(harness: MemoryHarness) -> None:
        async with _client(harness) as client:
            assert "memory_flush" not in [t.name for t in (await client.list_tools()).tools]
            with pytest.raises(MCPError, match="unknown tool"):
                await client.call_tool("memory_flush", {"messages": messages})

    with MemoryHarness.open(tmp_path / "on", mcp={"flush_tool": True}) as harness:
        _run(lambda: scenario(harness))
    with MemoryHarness.open(tmp_path / "off") as harness:
        _run(lambda: off(harness))


# ------------------------------------------------------------------------------ HTTP


class _HttpServer:
    """``harnessmem mcp --http HOST:0`` in a subprocess; ``url`` from its ready line."""

    def __init__(
        self,
        workspace: Path,
        *,
        args: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        **env: str,
    ) -> None:
        where = list(args) if args is not None else ["-w", str(workspace)]
        self.host = host
        self.process = subprocess.Popen(
            [*COMMAND, *where, "--http", f"{host}:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(**env),
            cwd=str(workspace.parent),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.url = self._ready()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def _ready(self) -> str:
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                self.stop()
                raise AssertionError(f"no ready line in {TIMEOUT} s: {seen}") from None
            if line is None:
                raise AssertionError(f"the server exited {self.process.wait()}: {seen}")
            seen.append(line)
            match = re.search(rf" on (http://{re.escape(self.host)}:\d+/mcp)$", line.strip())
            if match:
                return match.group(1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=TIMEOUT)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[_HttpServer]:
    server = _HttpServer(tmp_path / "ws", HARNESSMEM_MCP__TOKEN=TOKEN)
    yield server
    server.stop()


@asynccontextmanager
async def _http(url: str, token: str, **extra: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}", **extra}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_http_with_the_token_serves_the_same_tools(
    http_server: _HttpServer, tmp_path: Path
) -> None:
    """Acceptance: over streamable HTTP with the token, save then search, MEMORY.md as a
    resource, memory_get confined, bad arguments as tool errors."""

    async def scenario() -> None:
        async with _http(http_server.url, TOKEN) as client:
            assert [t.name for t in (await client.list_tools()).tools] == [
                f["function"]["name"] for f in tool_schemas()
            ]
            saved = await client.call_tool("memory_save", {"text": FACT})
            assert not saved.is_error, _text(saved)
            found = await client.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" in _text(found)
            read = await client.read_resource("harnessmem://MEMORY.md")
            assert FACT in read.contents[0].text
            for path in ("../../etc/passwd", "/etc/passwd"):
                refused = await client.call_tool("memory_get", {"path": path})
                assert refused.is_error
                assert "root:" not in _text(refused)
            missing = await client.call_tool("memory_search", {"limit": 3})
            assert missing.is_error
            assert "'query' is required" in _text(missing)

    _run(scenario)
    assert FACT in (tmp_path / "ws" / "MEMORY.md").read_text()


def test_http_without_the_token_gets_401_and_touches_nothing(
    http_server: _HttpServer, tmp_path: Path
) -> None:
    """Acceptance: no token, a wrong one, or another scheme: 401, and the tool call it
    carried wrote nothing."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "memory_save", "arguments": {"text": FACT}},
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    refused = [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ]
    with httpx2.Client(timeout=TIMEOUT) as http:
        for headers in refused:
            for body in (initialize, call):
                answer = http.post(http_server.url, json=body, headers={**accept, **headers})
                assert answer.status_code == 401, (headers, answer.text)
                assert answer.headers["www-authenticate"].startswith("Bearer")
        accepted = http.post(
            http_server.url,
            json=initialize,
            headers={**accept, "Authorization": f"Bearer {TOKEN}"},
        )
        assert accepted.status_code == 200
    assert not (tmp_path / "ws" / "MEMORY.md").exists()

    async def sdk_client_with_a_wrong_token() -> None:
        with pytest.raises(ExceptionGroup) as caught:
            async with _http(http_server.url, "wrong"):
                pass
        assert caught.group_contains(MCPError)

    _run(sdk_client_with_a_wrong_token)


def test_http_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    """--http on a non-loopback address without mcp.token: exit 3 with a hint, before the
    workspace is created; on loopback it starts (and warns)."""
    workspace = tmp_path / "ws"
    done = subprocess.run(
        [*COMMAND, "-w", str(workspace), "--http", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=TIMEOUT,
    )
    assert done.returncode == 3, done.stderr
    assert "not a loopback address, without a token" in done.stderr
    assert "HARNESSMEM_MCP__TOKEN" in done.stderr
    assert not workspace.exists()
    server = _HttpServer(workspace)
    try:
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        server.stop()


#: Loopback addresses a server may be bound to without a token, and a name each answers.
LOOPBACK_BINDS = [
    ("127.0.0.1", "localhost"),
    ("127.0.0.2", "127.0.0.2"),
    ("127.0.1.1", "127.0.1.1"),
    ("localhost", "127.0.0.1"),
    ("::1", "[::1]"),
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
SAVE = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "memory_save", "arguments": {"text": FACT}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
#: What a rebound page's requests carry: its own site, in Host and in Origin.
FOREIGN = [
    {"Host": "attacker.example:8766", "Origin": "http://attacker.example:8766"},
    {"Host": "attacker.example"},
    {"Origin": "http://attacker.example:8766"},
    {"Origin": "http://127.0.0.2.attacker.example"},
    {"Origin": "null"},
]


@pytest.mark.parametrize(("host", "name"), LOOPBACK_BINDS)
def test_a_loopback_server_without_a_token_refuses_dns_rebinding(
    harness: MemoryHarness, host: str, name: str
) -> None:
    """Issue 37 point 2: bound to any loopback address (the SDK checks Host and Origin only
    for 127.0.0.1, localhost and ::1), a request whose Host or Origin names another site
    is refused before it reaches the session (421 or 403): a page the user visits cannot
    make the browser save into memory. The names the server was bound with still work."""
    from starlette.testclient import TestClient

    from harnessmem.mcp import http_app

    memory = harness.workspace.local_path("MEMORY.md")
    assert memory is not None
    app = http_app(build_server(harness), host=host, path="/mcp", token=None)
    with TestClient(app, base_url=f"http://{name}:8766") as http:
        for foreign in FOREIGN:
            refused = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **foreign})
            assert refused.status_code in (403, 421), (foreign, refused.text)
        opened = http.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        assert opened.status_code == 200, opened.text
        session = {
            **ACCEPT,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post("/mcp", json=done, headers=session).status_code == 202
        for foreign in FOREIGN:
            refused = http.post("/mcp", json=SAVE, headers={**session, **foreign})
            assert refused.status_code in (403, 421), (foreign, refused.text)
        assert not memory.exists(), "a refused request saved nothing"
        saved = http.post("/mcp", json=SAVE, headers={**session, "Origin": f"http://{name}"})
        assert saved.status_code == 200
        assert "Saved to MEMORY.md" in saved.text
    assert FACT in memory.read_text()


def test_the_command_on_a_loopback_alias_refuses_dns_rebinding(tmp_path: Path) -> None:
    """Issue 37 point 2 through the command: ``harnessmem mcp --http 127.0.1.1:0`` (the
    address Debian gives the machine's own name) answers its own name, not a foreign one."""
    server = _HttpServer(tmp_path / "ws", host="127.0.1.1")
    try:
        with httpx2.Client(timeout=TIMEOUT) as http:
            for foreign in FOREIGN:
                answer = http.post(server.url, json=INITIALIZE, headers={**ACCEPT, **foreign})
                assert answer.status_code in (403, 421), (foreign, answer.text)
            assert http.post(server.url, json=INITIALIZE, headers=ACCEPT).status_code == 200
    finally:
        server.stop()


def test_a_token_beyond_ascii_gets_401(harness: MemoryHarness) -> None:
    """Issue 37 point 6: a bearer token with bytes beyond ASCII (a header is read as
    Latin-1) is a wrong token, 401, not an error in the comparison."""
    from starlette.testclient import TestClient

    from harnessmem.mcp import http_app

    app = http_app(build_server(harness), host="127.0.0.1", path="/mcp", token=TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8766") as http:
        for token in (b"\xe9", "\u00e9t\u00e9".encode(), TOKEN.encode() + b"\xff"):
            headers = {**ACCEPT, "Authorization": b"Bearer " + token}
            assert http.post("/mcp", json=INITIALIZE, headers=headers).status_code == 401


def test_http_address_must_be_host_and_port(tmp_path: Path) -> None:
    for address in ("8080", "localhost:", ":80", "127.0.0.1:99999"):
        done = subprocess.run(
            [*COMMAND, "-w", str(tmp_path / "ws"), "--http", address],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=TIMEOUT,
        )
        assert done.returncode == 3, (address, done.stderr)
        assert "is not HOST:PORT" in done.stderr


# ------------------------------------------------------------------------------ the command


def test_without_the_sdk_the_command_says_how_to_get_it(tmp_path: Path) -> None:
    """``harnessmem mcp`` without the extra: exit 3 and the pip hint; harnessmem itself
    (``--help``, other commands) does not need the SDK."""
    blocker = tmp_path / "site" / "sitecustomize.py"
    blocker.parent.mkdir()
    # None in sys.modules: "import mcp" raises ImportError, as when it is not installed.
    blocker.write_text("import sys\nsys.modules['mcp'] = sys.modules['mcp_types'] = None\n")
    env = _env(PYTHONPATH=str(blocker.parent))
    base = [sys.executable, "-m", "harnessmem.cli"]
    done = subprocess.run(
        [*base, "mcp", "-w", str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 3, done.stderr
    assert "pip install 'harnessmem[mcp]'" in done.stderr
    assert not (tmp_path / "ws").exists()
    helped = subprocess.run(
        [*base, "--help"], capture_output=True, text=True, env=env, timeout=TIMEOUT
    )
    assert helped.returncode == 0
    assert "mcp" in helped.stdout


def test_the_help_and_docs_mcp_md_agree() -> None:
    """Every option of ``harnessmem mcp --help`` is in docs/mcp.md, and every option
    docs/mcp.md gives the command exists."""
    from click.testing import CliRunner

    from harnessmem.cli import main

    helped = CliRunner().invoke(main, ["mcp", "--help"], terminal_width=200)
    assert helped.exit_code == 0
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", helped.output))
    assert {"--http", "--flush-tool", "--workspace", "--config"} <= options
    doc = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    documented = set()
    for line in doc.splitlines():
        if "harnessmem mcp" in line or line.startswith("| `--"):
            documented |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", line))
    missing = options - {"--help"} - set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", doc))
    assert not missing, f"docs/mcp.md does not mention {sorted(missing)}"
    unknown = documented - options
    assert not unknown, f"docs/mcp.md gives harnessmem mcp options it does not have: {unknown}"
    for setting in ("mcp.token", "mcp.path", "mcp.flush_tool", "HARNESSMEM_MCP__TOKEN"):
        assert setting in doc


def test_the_openai_agents_sdk_recipe_connects(tmp_path: Path) -> None:
    """docs/mcp.md's MCPServerStdio recipe: the Agents SDK lists the four tools and its calls
    reach the workspace (the command as docs/mcp.md gives it, run through this Python)."""
    mcp_module = pytest.importorskip("agents.mcp", reason="the OpenAI Agents SDK is not installed")
    doc = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert 'params={"command": "harnessmem", "args": ["mcp", "-w", "./agent-memory"]}' in doc
    params = {"command": sys.executable, "args": ["-m", "harnessmem.cli", "mcp", "-w", "mem"]}

    async def scenario() -> None:
        async with mcp_module.MCPServerStdio(
            params={**params, "env": _env(), "cwd": str(tmp_path)},
            cache_tools_list=True,
            client_session_timeout_seconds=TIMEOUT,
        ) as memory:
            names = [tool.name for tool in await memory.list_tools()]
            assert names == [f["function"]["name"] for f in tool_schemas()]
            await memory.call_tool("memory_save", {"text": FACT})
            found = await memory.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" in _text(found)

    _run(scenario)
    assert FACT in (tmp_path / "mem" / "MEMORY.md").read_text()


def test_one_http_server_serves_many_tenants_apart(tmp_path: Path) -> None:
    """Issue 21 point 5: over HTTP, the tenancy pool, the tenant from a header, isolated."""
    agents = tmp_path / "agents"
    agents.mkdir()
    server = _HttpServer(
        agents / "unused",
        args=["--tenants", str(agents / "{tenant}")],
        HARNESSMEM_MCP__TOKEN=TOKEN,
    )

    def tenant(name: str) -> dict[str, str]:
        return {"X-Harnessmem-Tenant": name}

    async def scenario() -> None:
        async with _http(server.url, TOKEN, **tenant("alice")) as alice:
            saved = await alice.call_tool("memory_save", {"text": FACT})
            assert not saved.is_error, _text(saved)
            assert "HA-5521-778" in _text(
                await alice.call_tool("memory_search", {"query": "frequent flyer"})
            )
        async with _http(server.url, TOKEN, **tenant("bob")) as bob:
            found = await bob.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" not in _text(found)
            read = await bob.read_resource("harnessmem://MEMORY.md")
            assert FACT not in read.contents[0].text
        refused_ids = ("../alice", "a/b", "memory_index.db-wal", "memory_index.db-shm")
        for headers in ({}, *(tenant(name) for name in refused_ids)):
            async with _http(server.url, TOKEN, **headers) as nobody:
                with pytest.raises(MCPError) as refused:
                    await nobody.call_tool("memory_search", {"query": "frequent flyer"})
                assert "Harnessmem-Tenant" in str(refused.value)

    try:
        _run(scenario)
    finally:
        server.stop()
    assert FACT in (agents / "alice" / "MEMORY.md").read_text()
    assert (
        not (agents / "bob" / "MEMORY.md").exists()
        or FACT not in (agents / "bob" / "MEMORY.md").read_text()
    )
    assert not (agents / "..").joinpath("alice").exists()
    assert sorted(p.name for p in agents.iterdir() if p.is_dir()) == ["alice", "bob"]
    # Restarted, the server serves alice again: no tenant named after the index broke it.
    again = _HttpServer(
        agents / "unused",
        args=["--tenants", str(agents / "{tenant}")],
        HARNESSMEM_MCP__TOKEN=TOKEN,
    )

    async def after_restart() -> None:
        async with _http(again.url, TOKEN, **tenant("alice")) as alice:
            found = await alice.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" in _text(found)

    try:
        _run(after_restart)
    finally:
        again.stop()


def test_tenants_go_with_http_only(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from harnessmem.cli import main

    result = CliRunner().invoke(main, ["mcp", "--tenants", str(tmp_path / "{tenant}")])
    assert result.exit_code == 2
    assert "--http" in result.output
