"""``harnessmem inspect``: the local web page over a workspace."""

from __future__ import annotations

import os

import click

from harnessmem.cli._common import (
    check_port_free,
    command_harness,
    common_options,
    load_settings,
    stopped_by_sigterm,
)


@click.command("inspect")
@common_options(as_json=False)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--token",
    default=None,
    help="Required of every request; needed on an address other than loopback "
    "(default: $HARNESSMEM_INSPECT_TOKEN).",
)
def inspect_command(
    config: str | None, workspace: str | None, host: str, port: int, token: str | None
) -> None:
    """Serve a web page that shows the workspace: MEMORY.md and its history, daily logs,
    search, sessions with their compactions, and model usage.

    Listens on 127.0.0.1 unless --host says otherwise; another address needs a token
    (open the page once with ?token=TOKEN), or with mcp.auth = 'jwt' takes the MCP
    server's JWT access tokens. Ctrl-C stops it. Needs the 'inspect' extra.
    """
    from harnessmem.inspector import check_exposure, serve
    from harnessmem.settings.exposure import is_loopback

    token = token or os.environ.get("HARNESSMEM_INSPECT_TOKEN") or None
    # Before the workspace is opened: the exposure check, or the JWT key file read.
    settings, _ = load_settings(config, workspace)
    verifier = None
    if settings.mcp.auth == "jwt" and not is_loopback(host):
        from harnessmem.access import JwtVerifier

        verifier = JwtVerifier(settings.mcp.jwt)
    else:
        check_exposure(host, token)
    check_port_free(host, port, "--port")

    def ready(url: str) -> None:
        click.echo(f"harnessmem inspect: {url} (Ctrl-C stops it)", err=True)

    with stopped_by_sigterm() as caught, command_harness(config, workspace, existing=True) as h:
        serve(h, host=host, port=port, token=token, verifier=verifier, ready=ready)
    if caught:
        click.echo("harnessmem inspect: stopped (SIGTERM); the workspace is closed", err=True)
