"""``mcp.auth = "jwt"``: the streamable HTTP app as an OAuth 2.1 resource server, as the MCP
authorization specification describes it, built from the SDK's own parts.

- The SDK's bearer middleware asks :class:`JwtTokens` (a ``TokenVerifier`` over
  :class:`harnessmem.access.JwtVerifier`) about each request's token: a bad one gets ``401``
  with ``WWW-Authenticate: Bearer ... resource_metadata="..."`` before anything runs.
- The protected-resource metadata (RFC 9728) is served at
  ``/.well-known/oauth-protected-resource`` plus the resource URL's path, and at
  ``/.well-known/oauth-protected-resource`` itself (where clients look next): the
  resource (``mcp.jwt.audience``), the authorization server (``mcp.jwt.issuer``), the scopes.
- :class:`_AccessGuard`, after the bearer middleware, answers ``403`` to a request whose
  ``X-Harnessmem-Tenant`` header names a tenant other than the token's, and to a call the
  token's scopes do not grant (``error="insufficient_scope"`` with the scope it needs, so a
  client can ask for it: step-up authorization). The handlers check the grant again
  (:func:`grant_of`), so what reaches a harness is what the token allows whatever the body.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from pydantic import AnyHttpUrl, ConfigDict, SkipValidation
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harnessmem.access import FORGET, METHOD_ACCESS, READ, TOOL_ACCESS, WRITE, Grant, JwtVerifier
from harnessmem.errors import AccessDenied

__all__ = ["JwtTokens", "grant_of", "jwt_app"]

logger = logging.getLogger("harnessmem.mcp")
#: RFC 9728 §3: the metadata's well-known path (the resource's path is appended to it).
WELL_KNOWN = "/.well-known/oauth-protected-resource"


class GrantedToken(AccessToken):
    """The SDK's ``AccessToken`` carrying the :class:`~harnessmem.access.Grant` it stands for."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    grant: SkipValidation[Grant]


class JwtTokens:
    """A :class:`mcp.server.auth.provider.TokenVerifier` for the JWT access tokens that
    ``verifier`` accepts: ``None`` (so ``401``) for any other, the reason in the log."""

    def __init__(self, verifier: JwtVerifier) -> None:
        self.verifier = verifier

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            grant = await anyio.to_thread.run_sync(self.verifier.verify, token)
        except AccessDenied as exc:
            logger.info("%s", exc.message)
            return None
        return GrantedToken(
            token=token,
            client_id=grant.client_id,
            scopes=list(grant.scopes),
            # exp plus the leeway, so the SDK's own expiry check agrees with PyJWT's.
            expires_at=grant.expires_at,
            resource=self.verifier.audience,
            subject=grant.subject,
            claims={"iss": grant.issuer, "tenant": grant.tenant},
            grant=grant,
        )


def grant_of(request: Any) -> Grant | None:
    """The grant of the JWT that authenticated ``request`` (a Starlette request or an ASGI
    scope); ``None`` when the server takes the shared token or none."""
    scope = request if isinstance(request, dict) else getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    return token.grant if isinstance(token, GrantedToken) else None


def _needs(body: bytes) -> set[str | None]:
    """The classes of request a JSON-RPC body asks for (``None``: a tool no class grants);
    empty when it is not JSON-RPC the guard can read (the SDK answers that, and the
    handlers check the grant in any case)."""
    try:
        message = json.loads(body)
    except ValueError:
        return set()
    needs: set[str | None] = set()
    for item in message if isinstance(message, list) else [message]:
        if not isinstance(item, dict) or not isinstance(item.get("method"), str):
            continue
        params = item.get("params")
        if item["method"] == "tools/call":
            name = params.get("name") if isinstance(params, dict) else None
            needs.add(TOOL_ACCESS.get(name) if isinstance(name, str) else None)
        elif item["method"] in METHOD_ACCESS:
            needs.add(METHOD_ACCESS[item["method"]])
    return needs


class _AccessGuard:
    """ASGI middleware behind the bearer middleware: ``403`` for a tenant header that is
    not the token's tenant, or a call of a class the token's scopes do not grant."""

    def __init__(self, app: ASGIApp, *, header: str, metadata_url: str, max_body: int) -> None:
        self.app = app
        self.header = header
        self.metadata_url = metadata_url
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        grant = grant_of(scope) if scope["type"] == "http" else None
        if grant is None:  # no token, or a bad one: the SDK's 401
            await self.app(scope, receive, send)
            return
        named = Headers(scope=scope).get(self.header)
        if named is not None and named != grant.tenant:
            await self._refuse(
                send,
                "forbidden",
                f"{self.header} names {named!r}, but this access token is for tenant "
                f"{grant.tenant!r}; leave the header out",
            )
            return
        if scope["method"] == "POST":  # only the MCP endpoint takes a POST
            body, receive = await self._read(receive)
            for needed in _needs(body) if body is not None else ():
                if not grant.permits(needed):
                    await self._insufficient(send, grant, needed)
                    return
        await self.app(scope, receive, send)

    async def _read(self, receive: Receive) -> tuple[bytes | None, Receive]:
        """The request body (``None`` past ``max_body``: the SDK refuses it with 413) and a
        ``receive`` that hands the app the same messages again."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body or not message.get("more_body", False):
                break
        complete = size <= self.max_body and messages[-1]["type"] == "http.request"
        body = b"".join(m.get("body", b"") for m in messages) if complete else None

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return body, replay

    async def _insufficient(self, send: Send, grant: Grant, needed: str | None) -> None:
        if needed is None:
            await self._refuse(send, "forbidden", "this tool is granted to no access token")
            return
        scope = grant.scope_names[needed]
        await self._refuse(
            send,
            "insufficient_scope",
            f"this request needs the scope {scope!r}",
            www=f'Bearer error="insufficient_scope", scope="{scope}", '
            f'error_description="this request needs the scope {scope}", '
            f'resource_metadata="{self.metadata_url}"',
        )

    @staticmethod
    async def _refuse(send: Send, error: str, description: str, www: str | None = None) -> None:
        body = json.dumps({"error": error, "error_description": description}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if www is not None:
            headers.append((b"www-authenticate", www.encode()))
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def jwt_app(
    server: Server[Any],
    *,
    host: str,
    path: str,
    verifier: JwtVerifier,
    header: str,
    security: TransportSecuritySettings | None = None,
) -> Starlette:
    """The SDK's streamable HTTP app for ``server`` at ``path``, taking the JWT access
    tokens ``verifier`` accepts (see the module's docstring); ``header`` is the tenant
    header the guard compares with the token's tenant, ``security`` the Host and Origin
    check of a loopback bind."""
    resource = AnyHttpUrl(verifier.audience)
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(verifier.issuer),
        resource_server_url=resource,
        validate_token_resource=True,
    )
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        auth=auth,
        token_verifier=JwtTokens(verifier),
        transport_security=security,
    )
    scopes = [verifier.scope_names[k] for k in (READ, WRITE, FORGET)]
    metadata = create_protected_resource_routes(
        resource_url=resource,
        authorization_servers=[auth.issuer_url],
        scopes_supported=list(dict.fromkeys(scopes)),
        resource_name="harnessmem memory",
    )
    routes: list[Any] = list(metadata)
    if all(getattr(route, "path", None) != WELL_KNOWN for route in metadata):
        routes.append(Route(WELL_KNOWN, endpoint=metadata[0].endpoint, methods=["GET", "OPTIONS"]))
    # First in the list, so they answer in place of the SDK's route (which lists no scopes:
    # the SDK takes them from required_scopes, which would ask every token for all of them).
    app.router.routes[:0] = routes
    # Last of the middleware, so it runs after the bearer middleware has set scope["user"].
    app.user_middleware.append(
        Middleware(
            _AccessGuard,
            header=header,
            metadata_url=str(build_resource_metadata_url(resource)),
            max_body=DEFAULT_MAX_REQUEST_BODY_SIZE,
        )
    )
    return app
