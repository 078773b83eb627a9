"""An MCP server for one workspace: the memory tools for any MCP client.

``harnessmem mcp -w WORKSPACE`` serves it over stdio, ``--http HOST:PORT`` over the
streamable HTTP transport (see docs/mcp.md). From Python::

    from harnessmem import MemoryHarness
    from harnessmem.mcp import build_server, serve_stdio

    with MemoryHarness.open("./ws") as harness:
        serve_stdio(build_server(harness))

Over HTTP one server can serve many tenants: ``build_pool_server(HarnessPool(...))``
answers each request from the harness of the tenant its ``X-Harnessmem-Tenant`` header
names (``harnessmem mcp --http HOST:PORT --tenants 's3://bucket/agents/{tenant}'``).
With ``mcp.auth = "jwt"`` the HTTP app is an OAuth 2.1 resource server instead: it takes
the JWT access tokens of ``mcp.jwt.issuer``, the tenant from a claim, the tools by scope
(``http_app(..., verifier=JwtVerifier(settings.mcp.jwt))``, :mod:`harnessmem.access`).
An application that mounts ``build_server(harness).streamable_http_app()`` behind the SDK's
own auth passes it ``JwtTokens(verifier)``, the SDK token verifier for those tokens: the
handlers then refuse what a token's scopes do not grant.

It needs the official MCP SDK, an optional extra: ``pip install 'harnessmem[mcp]'``.
Importing this package without it raises ``ConfigError`` saying so; nothing else in
harnessmem imports it (the ``harnessmem mcp`` command does so when it runs).
"""

from __future__ import annotations

from harnessmem.errors import ConfigError

try:
    from harnessmem.mcp._auth import JwtTokens
    from harnessmem.mcp._http import (
        check_exposure,
        http_app,
        is_loopback,
        parse_address,
        serve_http,
        transport_security,
    )
    from harnessmem.mcp._server import (
        PROMPT_NAME,
        SCHEME,
        TENANT_HEADER,
        build_pool_server,
        build_server,
        serve_stdio,
    )
except ImportError as exc:  # the SDK or one of its dependencies is missing
    raise ConfigError(
        f"the MCP server needs the MCP SDK (the 'mcp' package): {exc}",
        hint="pip install 'harnessmem[mcp]'",
    ) from exc

__all__ = [
    "PROMPT_NAME",
    "SCHEME",
    "TENANT_HEADER",
    "JwtTokens",
    "build_pool_server",
    "build_server",
    "check_exposure",
    "http_app",
    "is_loopback",
    "parse_address",
    "serve_http",
    "serve_stdio",
    "transport_security",
]
