"""The MCP server of one harness: the memory tools, the memory files as resources, a prompt.

Built on the SDK's low-level :class:`mcp.server.lowlevel.Server`, which takes each tool's
input schema as given: the schemas are those of :mod:`harnessmem.tools` (the ones
``Session.tools`` returns), and every call runs :func:`harnessmem.tools.run_tool`, so the
confinement, the limits and the ``Error: ...`` texts are the agent tools' own. The harness
is synchronous; each call runs in a worker thread, as the lifecycle methods' async twins do.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from harnessmem.access import METHOD_ACCESS, TOOL_ACCESS
from harnessmem.audit import acting_as
from harnessmem.errors import AccessDenied, HarnessMemError, WorkspaceFileNotFound
from harnessmem.layout import MEMORY_DIR, MEMORY_FILE, is_daily_log
from harnessmem.mcp._auth import grant_of
from harnessmem.tools import FLUSH_SESSION, run_tool, tool_schemas

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness
    from harnessmem.pool import HarnessPool

__all__ = [
    "PROMPT_NAME",
    "SCHEME",
    "TENANT_HEADER",
    "build_pool_server",
    "build_server",
    "serve_stdio",
]

logger = logging.getLogger("harnessmem.mcp")

#: URI scheme of the resources: ``harnessmem://MEMORY.md``, ``harnessmem://memory/<day>.md``.
SCHEME = "harnessmem://"
SESSIONS_URI = f"{SCHEME}sessions"
DAILY_TEMPLATE = f"{SCHEME}{MEMORY_DIR}/{{date}}.md"
PROMPT_NAME = "memory_context"
_MARKDOWN = "text/markdown"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Tools that only read: a client may run them without asking its user.
_READ_ONLY = frozenset({"memory_search", "memory_get", "session_search"})
_INSTRUCTIONS = (
    "Long-term memory that lasts across conversations. Before answering anything that may "
    "depend on earlier conversations (preferences, people, projects, decisions, dates), "
    "search it with memory_search and read around a match with memory_get; save stable "
    "facts the user tells you with memory_save. The prompt memory_context gives the "
    "curated memory (MEMORY.md) as a block for the system prompt."
)

T = TypeVar("T")
Context = ServerRequestContext[Any, Any]


def _version() -> str:
    try:
        return version("harnessmem")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


async def _in_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))


def _failure(name: str, exc: BaseException) -> str:
    """The tool error for a failure of the harness itself (a closed harness, a broken
    index, an unreachable store): what failed, and the hint when there is one."""
    if isinstance(exc, HarnessMemError):
        text = f"Error: {name} failed: {exc.message}"
        return f"{text} ({exc.hint})" if exc.hint else text
    return (
        f"Error: {name} failed unexpectedly ({type(exc).__name__}: {exc}); "
        "the server's log has the details."
    )


def _client(ctx: Context) -> str:
    """The audit log's actor for a request: ``mcp:<the client's name>`` (``mcp`` when the
    client gave none)."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    name = getattr(getattr(params, "client_info", None), "name", None)
    return f"mcp:{name}" if isinstance(name, str) and name.strip() else "mcp"


def _as_client(actor: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with acting_as(actor):
        return func(*args, **kwargs)


def _allow(ctx: Context, access: str | None, what: str) -> None:
    """A protocol error unless the request's JWT grants ``access`` (with the shared token, or
    none, everything is granted)."""
    grant = grant_of(ctx.request)
    if grant is None:
        return
    try:
        grant.require(access, what)
    except AccessDenied as exc:
        raise MCPError(types.INVALID_REQUEST, exc.message) from None


class _MemoryServer:
    """The handlers of one harness's server; :func:`build_server` hands them to the SDK."""

    def __init__(self, harness: MemoryHarness) -> None:
        self.harness = harness
        self.lifecycle = harness.settings.mcp.flush_tool
        self.tools = [
            types.Tool(
                name=schema["function"]["name"],
                description=schema["function"]["description"],
                input_schema=schema["function"]["parameters"],
                annotations=types.ToolAnnotations(
                    read_only_hint=schema["function"]["name"] in _READ_ONLY,
                    destructive_hint=False,
                    open_world_hint=False,
                ),
            )
            for schema in tool_schemas(harness.settings, lifecycle=self.lifecycle)
        ]
        self.tool_names = {tool.name for tool in self.tools}

    # tools ----------------------------------------------------------------------------------

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        grant = grant_of(ctx.request)
        return types.ListToolsResult(
            tools=[
                tool.model_copy(deep=True)
                for tool in self.tools
                if grant is None or grant.permits(TOOL_ACCESS.get(tool.name))
            ]
        )

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        if name not in self.tool_names:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {name!r}; this server's tools: {', '.join(sorted(self.tool_names))}",
            )
        _allow(ctx, TOOL_ACCESS.get(name), name)
        try:
            self.harness.kernel.check_open()
            result = await _in_thread(
                _as_client,
                _client(ctx),
                run_tool,
                self.harness.kernel,
                name,
                params.arguments,
                lifecycle=self.lifecycle,
            )
        except Exception as exc:
            logger.error("tool %s failed", name, exc_info=not isinstance(exc, HarnessMemError))
            return types.CallToolResult(
                content=[types.TextContent(text=_failure(name, exc))], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(text=result.text)], is_error=result.is_error
        )

    # resources ------------------------------------------------------------------------------

    def _resources(self) -> list[types.Resource]:
        workspace = self.harness.workspace
        found = [
            types.Resource(
                uri=f"{SCHEME}{MEMORY_FILE}",
                name=MEMORY_FILE,
                title="Long-term memory (MEMORY.md)",
                description="The curated facts, rewritten by consolidation from the daily logs.",
                mime_type=_MARKDOWN,
            )
        ]
        for info in workspace.scan(MEMORY_DIR, recursive=False):
            name = info.path.rsplit("/", 1)[-1]
            if is_daily_log(name):
                found.append(
                    types.Resource(
                        uri=f"{SCHEME}{info.path}",
                        name=info.path,
                        title=f"Daily log {name.removesuffix('.md')}",
                        description="Facts noted after the conversations of that day.",
                        mime_type=_MARKDOWN,
                        size=info.size,
                    )
                )
        found.append(
            types.Resource(
                uri=SESSIONS_URI,
                name="sessions",
                title="Session logs",
                description="The raw message logs of earlier conversations: id, path, size, "
                "last change (read one with memory_get, search them with session_search).",
                mime_type="application/json",
            )
        )
        return found

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        _allow(ctx, METHOD_ACCESS["resources/list"], "resources/list")
        self.harness.kernel.check_open()
        return types.ListResourcesResult(resources=await _in_thread(self._resources))

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        _allow(ctx, METHOD_ACCESS["resources/templates/list"], "resources/templates/list")
        template = types.ResourceTemplate(
            uri_template=DAILY_TEMPLATE,
            name="daily-log",
            title="Daily log by date",
            description="The daily log of one day, date as YYYY-MM-DD (archived ones too).",
            mime_type=_MARKDOWN,
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    def _sessions_index(self) -> str:
        rows = []
        for info in self.harness.workspace.scan("sessions", recursive=False):
            if not info.path.endswith(".log.jsonl"):
                continue
            modified = info.modified
            rows.append(
                {
                    "session_id": info.path.rsplit("/", 1)[-1].removesuffix(".log.jsonl"),
                    "path": info.path,
                    "bytes": info.size,
                    "modified": datetime.fromtimestamp(modified, UTC).isoformat()
                    if modified is not None
                    else None,
                }
            )
        return json.dumps({"sessions": rows}, indent=2, ensure_ascii=False)

    def _daily(self, day: str) -> str:
        """A daily log by date, from memory/ or, once expired, memory/archive/."""
        try:
            date.fromisoformat(day)
        except ValueError:
            raise MCPError(types.INVALID_PARAMS, f"{day!r} is not a date: use YYYY-MM-DD") from None
        for path in (f"{MEMORY_DIR}/{day}.md", f"{MEMORY_DIR}/archive/{day}.md"):
            try:
                return self.harness.get(path)
            except WorkspaceFileNotFound:
                continue
        raise MCPError(types.INVALID_PARAMS, f"no daily log for {day}")

    def _read(self, uri: str) -> tuple[str, str]:
        """(text, MIME type) of a resource URI; MCPError for one that names no resource."""
        if not uri.startswith(SCHEME):
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}: not {SCHEME}...")
        path = uri.removeprefix(SCHEME)
        if path.rstrip("/") == "sessions":
            return self._sessions_index(), "application/json"
        # A client that normalises URLs lowercases the host: memory.md is MEMORY.md.
        if path.lower() == MEMORY_FILE.lower():
            try:
                return self.harness.get(MEMORY_FILE), _MARKDOWN
            except WorkspaceFileNotFound:
                return "", _MARKDOWN  # nothing saved or consolidated yet: an empty memory
        folder, _, name = path.partition("/")
        if folder == MEMORY_DIR and is_daily_log(name) and _DATE.fullmatch(name[:-3]):
            return self._daily(name[:-3]), _MARKDOWN
        raise MCPError(
            types.INVALID_PARAMS,
            f"unknown resource {uri!r}; resources: {SCHEME}{MEMORY_FILE}, "
            f"{DAILY_TEMPLATE}, {SESSIONS_URI}",
        )

    async def read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        _allow(ctx, METHOD_ACCESS["resources/read"], "resources/read")
        self.harness.kernel.check_open()
        text, mime = await _in_thread(self._read, params.uri)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type=mime, text=text)]
        )

    # prompts --------------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        _allow(ctx, METHOD_ACCESS["prompts/list"], "prompts/list")
        prompt = types.Prompt(
            name=PROMPT_NAME,
            title="Long-term memory for the system prompt",
            description="MEMORY.md as a bounded data block to put in the system prompt "
            "(what Session.system_context() gives an agent loop).",
            arguments=[
                types.PromptArgument(
                    name="session_id",
                    description=f"The conversation it is for (default {FLUSH_SESSION!r}).",
                    required=False,
                )
            ],
        )
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        _allow(ctx, METHOD_ACCESS["prompts/get"], "prompts/get")
        if params.name != PROMPT_NAME:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {params.name!r}; prompts: {PROMPT_NAME}"
            )
        session_id = (params.arguments or {}).get("session_id") or FLUSH_SESSION
        session = self.harness.session(session_id)
        text = await _in_thread(session.system_context)
        return types.GetPromptResult(
            description="Long-term memory (MEMORY.md) for the system prompt",
            messages=[
                types.PromptMessage(
                    role="user",
                    content=types.TextContent(text=text or "(No long-term memory yet.)"),
                )
            ],
        )


def build_server(harness: MemoryHarness) -> Server[Any]:
    """The SDK server for ``harness``: its tools (``memory_flush`` too when
    ``mcp.flush_tool`` is on), resources, resource template and prompt.

    Serve it with :func:`harnessmem.mcp.serve_stdio` or :func:`harnessmem.mcp.serve_http`,
    or mount ``server.streamable_http_app()`` in an application of your own. The harness
    stays the caller's to close.
    """
    handlers = _MemoryServer(harness)
    return Server(
        "harnessmem",
        version=_version(),
        title="harnessmem memory",
        instructions=_INSTRUCTIONS,
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_resource_templates,
        on_read_resource=handlers.read_resource,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
    )


#: The request header that names the tenant of a :func:`build_pool_server` server.
TENANT_HEADER = "X-Harnessmem-Tenant"


class _TenantServer:
    """Handlers that serve each request from the harness of the tenant its header names.

    The tenant's harness stays open (pinned in the pool) while its request runs; opening
    it happens in a worker thread (the pool closes the least recently used one, to make
    room, on a thread of its own).
    """

    def __init__(self, pool: HarnessPool, header: str) -> None:
        self.pool = pool
        self.header = header

    def tenant(self, ctx: Context) -> str:
        """The tenant of the request's JWT (the header, if sent, must name the same one),
        else the one its header names."""
        from harnessmem.pool import check_tenant_id

        headers = getattr(ctx.request, "headers", None)
        value = headers.get(self.header) if headers is not None else None
        grant = grant_of(ctx.request)
        if grant is not None:
            if value is not None and value != grant.tenant:
                raise MCPError(
                    types.INVALID_REQUEST,
                    f"{self.header} names another tenant than this access token's; leave it out",
                )
            return grant.tenant
        if not value:
            raise MCPError(
                types.INVALID_PARAMS,
                f"this server serves many tenants: send the header {self.header}: <tenant id>",
            )
        try:
            return check_tenant_id(value)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, f"{self.header}: {exc}") from None

    def handler(self, name: str) -> Any:
        async def run(ctx: Context, params: Any) -> Any:
            pinned = self.pool.use(self.tenant(ctx))
            harness = await _in_thread(pinned.__enter__)
            try:
                return await getattr(_MemoryServer(harness), name)(ctx, params)
            finally:
                await _in_thread(pinned.__exit__, None, None, None)

        return run


def build_pool_server(pool: HarnessPool, *, header: str = TENANT_HEADER) -> Server[Any]:
    """One SDK server for every tenant of ``pool``: each request is served by the harness
    of the tenant that its ``header`` names (HTTP only: stdio carries no headers), with the
    tools, resources and prompt of :func:`build_server`. A request without the header, or
    with an invalid tenant id, is refused with a protocol error and touches nothing. The
    tenants' memories stay apart as the pool keeps them (one index, each its own entries).
    """
    handlers = _TenantServer(pool, header)
    return Server(
        "harnessmem",
        version=_version(),
        title="harnessmem memory",
        instructions=_INSTRUCTIONS,
        on_list_tools=handlers.handler("list_tools"),
        on_call_tool=handlers.handler("call_tool"),
        on_list_resources=handlers.handler("list_resources"),
        on_list_resource_templates=handlers.handler("list_resource_templates"),
        on_read_resource=handlers.handler("read_resource"),
        on_list_prompts=handlers.handler("list_prompts"),
        on_get_prompt=handlers.handler("get_prompt"),
    )


def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client closes stdin.

    While it serves, the SDK points file descriptor 1 at stderr, so nothing but protocol
    messages reaches the client (a stray print goes to the log)."""

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
