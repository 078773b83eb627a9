"""The streamable HTTP transport: the SDK's app behind a bearer token, served by uvicorn.

The token check is the SDK's own bearer middleware with a verifier that knows one token
(compared in constant time): a request without it, or with another, is answered 401
before it reaches the MCP session manager, so it reads and writes nothing. With
``mcp.auth = "jwt"`` the verifier takes JWT access tokens instead (:mod:`._auth`).

On a loopback address the SDK's transport also checks ``Host`` and ``Origin`` against the
names the server was bound with (:func:`transport_security`): the SDK turns that check on
by itself only for ``127.0.0.1``, ``localhost`` and ``::1``, so a server on ``127.0.0.2``
would take the requests a rebound web page sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from harnessmem.errors import ConfigError
from harnessmem.mcp._auth import jwt_app
from harnessmem.mcp._server import TENANT_HEADER
from harnessmem.settings import exposure
from harnessmem.settings.exposure import is_loopback, loopback_names, same_secret

if TYPE_CHECKING:
    from harnessmem.access import JwtVerifier

__all__ = [
    "check_exposure",
    "http_app",
    "is_loopback",
    "parse_address",
    "serve_http",
    "transport_security",
]


class _StaticToken:
    """A :class:`mcp.server.auth.provider.TokenVerifier` for one shared bearer token."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if same_secret(token, self._token):
            return AccessToken(token=token, client_id="harnessmem", scopes=[])
        return None


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 picks a free one) as (host, port)."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"--http {address!r} is not HOST:PORT",
            hint="for example --http 127.0.0.1:8766 (port 0: any free port)",
        )
    return host, int(port)


def check_exposure(host: str, token: str | None) -> None:
    """Refuse (``ConfigError``) to serve without a token on a host that is not loopback."""
    exposure.check_exposure(
        host,
        token,
        refusal=f"refusing to serve MCP on {host}, which is not a loopback address, "
        "without a token",
        hint="set mcp.token (or HARNESSMEM_MCP__TOKEN) to a long random string, and "
        "give clients the header Authorization: Bearer <token>",
    )


def transport_security(host: str) -> TransportSecuritySettings | None:
    """The SDK's DNS rebinding check for a server bound to ``host``: on a loopback address,
    ``Host`` must be one of :func:`~harnessmem.settings.exposure.loopback_names` (any port)
    and ``Origin``, when sent, ``http://`` one of them; None (no check) elsewhere, where a
    token is required anyway."""
    names = loopback_names(host)
    if not names:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for name in names for form in (name, f"{name}:*")],
        allowed_origins=[form for name in names for form in (f"http://{name}", f"http://{name}:*")],
    )


def http_app(
    server: Server[Any],
    *,
    host: str,
    path: str,
    token: str | None,
    verifier: JwtVerifier | None = None,
) -> Starlette:
    """The SDK's streamable HTTP app for ``server`` at ``path``; every request must carry
    ``Authorization: Bearer <token>`` when ``token`` is set, or a JWT access token that
    ``verifier`` accepts when that is given (then ``token`` is not used).

    Refuses (:func:`check_exposure`) to build an app without a token or a verifier for a
    non-loopback ``host``. On a loopback host, with a token or without, the transport also
    checks the Host and Origin headers against the names ``host`` is reached by
    (:func:`transport_security`): 421 or 403 before the request reaches the session.
    """
    security = transport_security(host)
    if verifier is not None:
        return jwt_app(
            server,
            host=host,
            path=path,
            verifier=verifier,
            header=TENANT_HEADER,
            security=security,
        )
    check_exposure(host, token)
    if not token:
        return server.streamable_http_app(
            streamable_http_path=path, host=host, transport_security=security
        )
    # issuer_url is required by the SDK's settings but serves only OAuth routes, which this
    # server does not mount (no authorization server provider, no resource metadata).
    auth = AuthSettings(issuer_url=f"http://{exposure.url_host(host)}", resource_server_url=None)
    return server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=security,
        auth=auth,
        token_verifier=_StaticToken(token),
    )


def serve_http(
    app: Starlette,
    host: str,
    port: int,
    *,
    path: str = "/mcp",
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted (SIGINT, SIGTERM).

    The socket is bound before serving, so ``ready(url)`` gets the real port (useful with
    port 0) and a client that connects at once is queued rather than refused.
    """
    import uvicorn

    sock, bound = exposure.listen(host, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    if ready is not None:
        ready(f"http://{exposure.url_host(host)}:{bound}{path}")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
