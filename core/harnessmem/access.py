"""Bearer access tokens for the HTTP faces: the JWTs of an OAuth 2.1 authorization server,
checked as a resource server checks them, and what each lets its holder do.

With ``mcp.auth = "jwt"``, ``harnessmem mcp --http`` and ``harnessmem inspect`` (beyond
loopback) take a token only when PyJWT finds all of this true: the signature verifies
against a key of ``mcp.jwt.jwks_url`` (the one its ``kid`` names) or of
``mcp.jwt.public_key_file``, with one of the asymmetric ``mcp.jwt.algorithms`` (``none`` and
the HMAC ones are never accepted); ``iss`` is ``mcp.jwt.issuer``; ``aud`` holds
``mcp.jwt.audience``, this server's resource URL; ``exp`` has not passed and ``nbf`` has,
within ``mcp.jwt.leeway``. Its ``mcp.jwt.tenant_claim`` claim must then be a valid tenant id
(:func:`harnessmem.pool.check_tenant_id`: no ``..``, no ``/``): it is whose memory the token
reaches. Its scopes (the ``scope`` claim, or ``scp`` as some providers write it) grant
classes of request by ``mcp.jwt.scopes``: :data:`READ`, :data:`WRITE`, :data:`FORGET`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harnessmem.errors import AccessDenied, ConfigError

if TYPE_CHECKING:
    from harnessmem.settings.mcp import McpJwtSettings

__all__ = [
    "FORGET",
    "METHOD_ACCESS",
    "READ",
    "TOOL_ACCESS",
    "WRITE",
    "Grant",
    "JwtVerifier",
]

logger = logging.getLogger("harnessmem.access")

#: The classes of request a scope grants (``mcp.jwt.scopes.read`` and so on).
READ = "read"
WRITE = "write"
FORGET = "forget"
#: The class of each tool. A tool not named here is granted to no token, so a new tool
#: stays out of reach until it is classed (tests/test_access.py checks every tool is).
TOOL_ACCESS: Mapping[str, str] = MappingProxyType(
    {
        "memory_search": READ,
        "memory_get": READ,
        "session_search": READ,
        "memory_save": WRITE,
        "memory_flush": WRITE,
        "memory_forget": FORGET,
    }
)
#: The class of each MCP method that reads memory other than through a tool. The rest
#: (``initialize``, ``ping``, ``tools/list``: the list holds only the tools a token may
#: call) need a valid token and nothing more.
METHOD_ACCESS: Mapping[str, str] = MappingProxyType(
    {
        "resources/list": READ,
        "resources/templates/list": READ,
        "resources/read": READ,
        "resources/subscribe": READ,
        "prompts/list": READ,
        "prompts/get": READ,
    }
)
#: How long the JWK set is kept before it is fetched again, and the wait for an answer.
_JWKS_LIFESPAN = 300.0
_JWKS_TIMEOUT = 10.0


@dataclass(frozen=True)
class Grant:
    """What one verified access token lets its holder do: reach ``tenant``'s memory with
    the classes of request in ``allows``. ``scope_names`` maps each class to the scope that
    grants it (to say which one a refused request lacked)."""

    tenant: str
    subject: str | None
    client_id: str
    issuer: str
    scopes: tuple[str, ...]
    allows: frozenset[str]
    scope_names: Mapping[str, str]
    #: ``exp`` plus the leeway: past it the token is refused.
    expires_at: int | None

    def permits(self, access: str | None) -> bool:
        """Whether requests of class ``access`` are granted (``None``: an unclassed tool,
        never)."""
        return access is not None and access in self.allows

    def require(self, access: str | None, what: str) -> None:
        """``AccessDenied`` naming the scope ``what`` needs, unless it is granted."""
        if self.permits(access):
            return
        if access is None:
            raise AccessDenied(f"{what} is granted to no access token")
        raise AccessDenied(
            f"{what} needs the scope {self.scope_names[access]!r}, which this access token "
            "does not hold",
            hint="ask the authorization server for a token with that scope",
        )


def _scopes(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The scopes of ``claims``: ``scope`` (RFC 9068, space-separated) and ``scp`` (a list,
    or a space-separated string), together."""
    found: list[str] = []
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found += value.split()
        elif isinstance(value, list):
            found += [item for item in value if isinstance(item, str)]
    return tuple(dict.fromkeys(found))


class JwtVerifier:
    """Checks bearer access tokens against ``settings`` (``mcp.jwt``): :meth:`verify` gives
    the :class:`Grant` of a good one and raises :class:`AccessDenied` for any other.

    Building it reads ``public_key_file`` (``ConfigError`` when it holds no public key);
    the JWK set of ``jwks_url`` is fetched when the first token arrives, then kept for five
    minutes and fetched again at once, at most every 30 s, for a ``kid`` it lacks (a rotated
    key). PyJWT verifies; nothing here parses a signature.
    """

    def __init__(self, settings: McpJwtSettings) -> None:
        try:
            import jwt
        except ImportError as exc:
            raise ConfigError(
                f"mcp.auth = 'jwt' needs PyJWT with its cryptography ({exc.name} is missing)",
                hint="pip install 'harnessmem[jwt]'",
            ) from None
        self._jwt = jwt
        self.settings = settings
        assert settings.issuer  # McpSettings checks them
        assert settings.audience
        self.issuer = settings.issuer
        self.audience = settings.audience
        self.scope_names = MappingProxyType(
            {
                READ: settings.scopes.read,
                WRITE: settings.scopes.write,
                FORGET: settings.scopes.forget,
            }
        )
        self._key_set: Any = None
        self._key: Any = None
        if settings.jwks_url:
            self._key_set = jwt.PyJWKClient(
                settings.jwks_url,
                cache_jwk_set=True,
                lifespan=_JWKS_LIFESPAN,
                timeout=_JWKS_TIMEOUT,
            )
        else:
            assert settings.public_key_file is not None  # McpSettings checks it
            self._key = _public_key(settings.public_key_file)

    def verify(self, token: str) -> Grant:
        """The grant of ``token``; ``AccessDenied`` saying why when it lets no one in.

        May block while the JWK set is fetched: call it from a worker thread."""
        jwt = self._jwt
        try:
            key = self._key_set.get_signing_key_from_jwt(token) if self._key_set else self._key
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self.settings.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud"], "enforce_minimum_key_length": True},
            )
        except jwt.PyJWKClientConnectionError as exc:
            logger.warning("cannot fetch the JWK set %s: %s", self.settings.jwks_url, exc)
            raise AccessDenied(
                f"bearer token refused: the keys at {self.settings.jwks_url} are out of reach",
                hint="check mcp.jwt.jwks_url and that this host can reach it",
            ) from exc
        except jwt.PyJWTError as exc:
            raise AccessDenied(f"bearer token refused: {exc}") from exc
        return self._grant(claims)

    def _grant(self, claims: Mapping[str, Any]) -> Grant:
        from harnessmem.pool import check_tenant_id

        name = self.settings.tenant_claim
        if name not in claims:
            raise AccessDenied(
                f"bearer token refused: it has no claim {name!r}, the tenant (mcp.jwt.tenant_claim)"
            )
        try:
            tenant = check_tenant_id(claims.get(name))
        except ValueError as exc:
            raise AccessDenied(f"bearer token refused: its claim {name!r}: {exc}") from None
        scopes = _scopes(claims)
        subject = claims.get("sub")
        client = claims.get("client_id") or claims.get("azp") or claims.get("cid")
        exp = claims.get("exp")
        return Grant(
            tenant=tenant,
            subject=subject if isinstance(subject, str) else None,
            client_id=client if isinstance(client, str) else "",
            issuer=self.issuer,
            scopes=scopes,
            allows=frozenset(k for k, scope in self.scope_names.items() if scope in scopes),
            scope_names=self.scope_names,
            expires_at=int(exp) + math.ceil(self.settings.leeway)
            if isinstance(exp, int | float)
            else None,
        )


def _public_key(path: Any) -> Any:
    """The public key of the PEM file ``path``; ``ConfigError`` naming the file otherwise."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    hint = "mcp.jwt.public_key_file names the PEM file of the issuer's public key"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read mcp.jwt.public_key_file {str(path)!r}: {exc.strerror or exc}", hint=hint
        ) from exc
    try:
        return load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"mcp.jwt.public_key_file {str(path)!r} holds no PEM public key "
            "('-----BEGIN PUBLIC KEY-----')",
            hint=hint,
        ) from exc
