"""``harnessmem mcp``: serve a workspace's memory to MCP clients (:mod:`harnessmem.mcp`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from harnessmem.cli._common import (
    check_port_free,
    common_options,
    load_settings,
    open_harness,
    shown_url,
    stopped_by_sigterm,
)

if TYPE_CHECKING:
    from harnessmem.access import JwtVerifier


@click.command("mcp")
@common_options(as_json=False)
@click.option(
    "--http",
    "address",
    default=None,
    metavar="HOST:PORT",
    help="Serve the streamable HTTP transport on HOST:PORT instead of stdio (port 0: any "
    "free port; the URL is printed on stderr). Requests must carry mcp.token as a bearer "
    "token (a HOST other than a loopback address refuses to start without one), or with "
    "mcp.auth = 'jwt' a JWT access token of mcp.jwt.issuer.",
)
@click.option(
    "--flush-tool/--no-flush-tool",
    "flush_tool",
    default=None,
    help="Offer the memory_flush tool (messages in, facts to today's log); default: "
    "mcp.flush_tool (off).",
)
@click.option(
    "--tenants",
    "template",
    default=None,
    metavar="URL_TEMPLATE",
    help="With --http: serve every tenant of a workspace URL with {tenant} in it (e.g. "
    "'s3://bucket/agents/{tenant}'), each request from the harness of the tenant its "
    "X-Harnessmem-Tenant header names (with mcp.auth = 'jwt': the token's tenant claim); "
    "instead of -w.",
)
@click.option(
    "--max-open",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="With --tenants: most tenants' harnesses open at once (the least recently used closes).",
)
def mcp_command(
    config: str | None,
    workspace: str | None,
    address: str | None,
    flush_tool: bool | None,
    template: str | None,
    max_open: int,
) -> None:
    """Serve the workspace's memory to MCP clients such as Claude Desktop, Claude Code or Cursor.

    Tools memory_search, memory_get, session_search and memory_save (the agent tools
    of Session.tools), MEMORY.md, the daily logs and the session index as harnessmem://
    resources, and the prompt memory_context. Over stdio by default: a client starts
    one server per workspace. Needs pip install 'harnessmem[mcp]'; see docs/mcp.md.
    """
    # The SDK first: without the extra, the error says how to get it and nothing is created.
    import harnessmem.mcp as server_api

    sections: dict[str, Any] = {}
    if flush_tool is not None:
        sections["mcp"] = {"flush_tool": flush_tool}
    settings, _ = load_settings(config, workspace, **sections)
    token = settings.mcp.token.get_secret_value() if settings.mcp.token else None
    host = port = None
    verifier = None
    if address is not None:
        host, port = server_api.parse_address(address)
        # Before the workspace is opened: the exposure check, or the JWT key file read.
        if settings.mcp.auth == "jwt":
            from harnessmem.access import JwtVerifier

            verifier = JwtVerifier(settings.mcp.jwt)
            jwt = settings.mcp.jwt
            click.echo(
                f"harnessmem mcp: JWT access tokens of {jwt.issuer} for {jwt.audience}", err=True
            )
        else:
            server_api.check_exposure(host, token)
        check_port_free(host, port, "--http HOST:PORT")
    if template is not None:
        if host is None or port is None:
            raise click.UsageError("--tenants serves over HTTP: give --http HOST:PORT too")
        if workspace is not None:
            raise click.UsageError("give --tenants or -w, not both")
        with stopped_by_sigterm() as caught:
            _serve_tenants(
                server_api, template, config, sections, host, port, token, verifier, max_open
            )
        _say_stopped(caught)
        return
    with stopped_by_sigterm() as caught, open_harness(settings, maintenance=True) as harness:
        server = server_api.build_server(harness)
        if host is None or port is None:
            server_api.serve_stdio(server)
            return
        app = server_api.http_app(
            server, host=host, path=settings.mcp.path, token=token, verifier=verifier
        )
        if not token and verifier is None:
            click.echo(
                "warning: no mcp.token: any program on this machine can use this server",
                err=True,
            )

        def ready(url: str) -> None:
            click.echo(f"harnessmem mcp: {shown_url(harness.workspace.url)} on {url}", err=True)

        server_api.serve_http(app, host, port, path=settings.mcp.path, ready=ready)
    _say_stopped(caught)


def _say_stopped(caught: list[int]) -> None:
    """One line when SIGTERM stopped the server (its harnesses closed, queues drained)."""
    if caught:
        click.echo("harnessmem mcp: stopped (SIGTERM); the workspaces are closed", err=True)


def _serve_tenants(
    server_api: Any,
    template: str,
    config: str | None,
    sections: dict[str, Any],
    host: str,
    port: int,
    token: str | None,
    verifier: JwtVerifier | None,
    max_open: int,
) -> None:
    from harnessmem.pool import HarnessPool

    path = load_settings(config, None, **sections)[0].mcp.path
    with HarnessPool(template, max_open=max_open, config=config, **sections) as pool:
        app = server_api.http_app(
            server_api.build_pool_server(pool), host=host, path=path, token=token, verifier=verifier
        )
        if not token and verifier is None:
            click.echo(
                "warning: no mcp.token: any program on this machine can use this server",
                err=True,
            )

        named_by = (
            f"the token's claim {verifier.settings.tenant_claim!r}"
            if verifier is not None
            else f"header {server_api.TENANT_HEADER}"
        )

        def ready(url: str) -> None:
            click.echo(f"harnessmem mcp: tenants of {template} ({named_by}) on {url}", err=True)

        server_api.serve_http(app, host, port, path=path, ready=ready)
