"""``harnessmem mcp --http`` with ``mcp.auth = "jwt"``: an OAuth 2.1 resource server.

The server runs as a subprocess on 127.0.0.1 (as in tests/test_mcp.py); the issuer's keys
are made in the test and its JWK set served on loopback (tests/test_access.py). The MCP
calls go through the SDK's streamable-HTTP client with a bearer JWT, or as raw POSTs where
the status code is the point.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'harnessmem[mcp]'")
pytest.importorskip("jwt", reason="PyJWT is not installed: pip install 'harnessmem[jwt]'")

import httpx2
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.exceptions import MCPError
from tests.test_access import (
    AUDIENCE,
    ISSUER,
    Keys,
    KeySetServer,
    bad_tokens,
)
from tests.test_mcp import COMMAND, FACT, TIMEOUT, _http, _HttpServer, _run, _text

from harnessmem import MemoryHarness
from harnessmem.access import JwtVerifier
from harnessmem.mcp import JwtTokens, build_server
from harnessmem.settings import McpJwtSettings

ACCEPT = {"Accept": "application/json, text/event-stream"}
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
READ_TOOLS = ["memory_search", "memory_get", "session_search"]


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


@pytest.fixture
def key_set(keys: Keys) -> Iterator[KeySetServer]:
    server = KeySetServer(keys.jwks)
    yield server
    server.close()


def _jwt_env(key_set: KeySetServer) -> dict[str, str]:
    return {
        "HARNESSMEM_MCP__AUTH": "jwt",
        "HARNESSMEM_MCP__JWT__JWKS_URL": key_set.url,
        "HARNESSMEM_MCP__JWT__ISSUER": ISSUER,
        "HARNESSMEM_MCP__JWT__AUDIENCE": AUDIENCE,
    }


@pytest.fixture
def tenants(tmp_path: Path, key_set: KeySetServer) -> Iterator[tuple[_HttpServer, Path]]:
    """A server of every tenant of tmp_path/agents, taking the issuer's JWTs."""
    agents = tmp_path / "agents"
    agents.mkdir()
    server = _HttpServer(
        agents / "unused", args=["--tenants", str(agents / "{tenant}")], **_jwt_env(key_set)
    )
    yield server, agents
    server.stop()


def _post(url: str, body: Any, token: str | None, **headers: str) -> httpx2.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with httpx2.Client(timeout=TIMEOUT) as http:
        return http.post(url, json=body, headers={**ACCEPT, **headers})


def test_a_token_for_alice_reads_alice_and_no_header_takes_her_elsewhere(
    tenants: tuple[_HttpServer, Path], keys: Keys
) -> None:
    """Acceptance: a real MCP client with alice's JWT saves and reads alice's memory; bob's
    token does not see it; alice's token with the header naming bob is refused (403)."""
    server, agents = tenants
    alice, bob = keys.token(sub="alice"), keys.token(sub="bob")

    async def scenario() -> None:
        async with _http(server.url, alice) as client:
            saved = await client.call_tool("memory_save", {"text": FACT})
            assert not saved.is_error, _text(saved)
            found = await client.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" in _text(found)
            read = await client.read_resource("harnessmem://MEMORY.md")
            assert FACT in read.contents[0].text
        async with _http(server.url, alice, **{"X-Harnessmem-Tenant": "alice"}) as client:
            found = await client.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" in _text(found)
        async with _http(server.url, bob) as client:
            found = await client.call_tool("memory_search", {"query": "frequent flyer"})
            assert "HA-5521-778" not in _text(found)
            read = await client.read_resource("harnessmem://MEMORY.md")
            assert FACT not in read.contents[0].text
        with pytest.raises(ExceptionGroup) as refused:  # 403 to the initialize
            async with _http(server.url, alice, **{"X-Harnessmem-Tenant": "bob"}):
                pass
        assert refused.group_contains(MCPError)

    _run(scenario)
    for header in ("bob", "../bob", "alice/../bob"):
        answer = _post(
            server.url,
            _call("memory_save", {"text": "- bob's secret"}),
            alice,
            **{"X-Harnessmem-Tenant": header},
        )
        assert answer.status_code == 403, (header, answer.text)
        assert "tenant 'alice'" in answer.json()["error_description"]
    assert FACT in (agents / "alice" / "MEMORY.md").read_text()
    assert not (agents / "bob" / "MEMORY.md").exists()
    assert "secret" not in (agents / "alice" / "MEMORY.md").read_text()


def test_every_bad_token_gets_401_and_touches_nothing(
    tenants: tuple[_HttpServer, Path], keys: Keys
) -> None:
    """Acceptance: expired, not yet valid, wrong issuer, wrong audience, alg none, HS256
    with the public key, a tampered signature, an unknown kid, a tenant with path tricks:
    401 with the resource metadata's URL, and no tenant folder is made."""
    server, agents = tenants
    metadata = "https://memory.example.test/.well-known/oauth-protected-resource/mcp"
    wrong = []
    for name, (token, _) in bad_tokens(keys).items():
        for body in (INITIALIZE, _call("memory_save", {"text": FACT})):
            answer = _post(server.url, body, token, **{"X-Harnessmem-Tenant": "alice"})
            www = answer.headers.get("www-authenticate", "")
            if answer.status_code != 401 or f'resource_metadata="{metadata}"' not in www:
                wrong.append((name, answer.status_code, www, answer.text))
    assert wrong == []
    no_token = _post(server.url, INITIALIZE, None)
    assert no_token.status_code == 401
    assert sorted(p.name for p in agents.parent.iterdir()) == ["agents"]
    assert list(agents.iterdir()) == []


def test_scopes_decide_which_tools(tmp_path: Path, key_set: KeySetServer, keys: Keys) -> None:
    """Acceptance: a token without the writing scope cannot call memory_save (403,
    insufficient_scope naming the scope); it lists and calls the reading tools. One
    workspace (-w), forget on: each class has its tool."""
    workspace = tmp_path / "ws"
    server = _HttpServer(workspace, HARNESSMEM_TOOLS__FORGET="true", **_jwt_env(key_set))
    read_only = keys.token(scope="memory:read")
    write_only = keys.token(scope="memory:write")

    async def scenario() -> None:
        async with _http(server.url, read_only) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert listed == READ_TOOLS
            found = await client.call_tool("memory_search", {"query": "frequent flyer"})
            assert not found.is_error
            await client.read_resource("harnessmem://MEMORY.md")
            with pytest.raises(MCPError):
                await client.call_tool("memory_save", {"text": FACT})
        async with _http(server.url, write_only) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert listed == ["memory_save"]
            saved = await client.call_tool("memory_save", {"text": FACT})
            assert not saved.is_error, _text(saved)

    try:
        _run(scenario)
        refusals = {
            (read_only, "memory_save"): "memory:write",
            (read_only, "memory_forget"): "memory:forget",
            (write_only, "memory_search"): "memory:read",
            (write_only, "memory_forget"): "memory:forget",
        }
        for (token, tool), scope in refusals.items():
            answer = _post(server.url, _call(tool, {"text": FACT, "query": "x"}), token)
            assert answer.status_code == 403, (tool, answer.text)
            www = answer.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in www
            assert f'scope="{scope}"' in www
        read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "x"}}
        assert _post(server.url, read, write_only).status_code == 403
    finally:
        server.stop()
    assert (workspace / "MEMORY.md").read_text().count("HA-5521-778") == 1  # write_only's


def test_the_protected_resource_metadata(tenants: tuple[_HttpServer, Path]) -> None:
    """Acceptance: RFC 9728 metadata at the well-known path of the resource URL (and at the
    bare well-known path, where clients look next), with no token."""
    server, _ = tenants
    base = server.url.removesuffix("/mcp")
    with httpx2.Client(timeout=TIMEOUT) as http:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            answer = http.get(base + path)
            assert answer.status_code == 200, (path, answer.text)
            assert answer.headers["content-type"].startswith("application/json")
            document = answer.json()
            assert document["resource"] == AUDIENCE
            assert document["authorization_servers"] == [ISSUER]
            assert document["scopes_supported"] == ["memory:read", "memory:write", "memory:forget"]
            assert document["bearer_methods_supported"] == ["header"]


def test_the_handlers_check_the_grant_too(
    tmp_path: Path, key_set: KeySetServer, keys: Keys
) -> None:
    """Behind the HTTP guard, each handler refuses what the token's scopes do not grant,
    whatever body got past the guard (a protocol error, nothing written)."""
    verifier = JwtVerifier(McpJwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=key_set.url))

    async def context(scope: str) -> Any:
        token = await JwtTokens(verifier).verify_token(keys.token(scope=scope))
        assert token is not None
        return SimpleNamespace(request=SimpleNamespace(scope={"user": AuthenticatedUser(token)}))

    with MemoryHarness.open(tmp_path / "ws") as harness:
        server = build_server(harness)

        async def handle(method: str, ctx: Any, params: Any) -> Any:
            """What the server's handler of ``method`` answers, as the SDK calls it."""
            entry = server.get_request_handler(method)
            assert entry is not None, method
            return await entry.handler(ctx, params)

        async def scenario() -> None:
            reader = await context("memory:read")
            save = types.CallToolRequestParams(name="memory_save", arguments={"text": FACT})
            with pytest.raises(MCPError, match="memory:write"):
                await handle("tools/call", reader, save)
            writer = await context("memory:write")
            with pytest.raises(MCPError, match="memory:read"):
                await handle(
                    "resources/read",
                    writer,
                    types.ReadResourceRequestParams(uri="harnessmem://MEMORY.md"),
                )
            with pytest.raises(MCPError, match="memory:read"):
                await handle(
                    "prompts/get", writer, types.GetPromptRequestParams(name="memory_context")
                )
            assert not (await handle("tools/call", writer, save)).is_error

        _run(scenario)
    assert (tmp_path / "ws" / "MEMORY.md").read_text().count("HA-5521-778") == 1


def test_a_bad_key_file_stops_the_command_before_the_workspace(tmp_path: Path) -> None:
    import subprocess

    from tests.test_mcp import _env

    done = subprocess.run(
        [*COMMAND, "-w", str(tmp_path / "ws"), "--http", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_env(
            HARNESSMEM_MCP__AUTH="jwt",
            HARNESSMEM_MCP__JWT__PUBLIC_KEY_FILE=str(tmp_path / "missing.pem"),
            HARNESSMEM_MCP__JWT__ISSUER=ISSUER,
            HARNESSMEM_MCP__JWT__AUDIENCE=AUDIENCE,
        ),
    )
    assert done.returncode == 3, done.stderr
    assert "cannot read mcp.jwt.public_key_file" in done.stderr
    assert not (tmp_path / "ws").exists()
