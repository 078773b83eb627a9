"""The ``[mcp]`` section: the MCP server of ``harnessmem mcp``, and how its HTTP transport
authenticates callers (one shared token, or the JWT access tokens of an OAuth 2.1
authorization server, :mod:`harnessmem.access`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from harnessmem.settings._section import Section
from harnessmem.settings.exposure import is_loopback

#: The signature algorithms a resource server may accept: asymmetric only. ``none`` and the
#: HMAC ones (a secret shared with the issuer, and the classic key-confusion attack when the
#: "secret" is a public key) are not on the list, so no setting can let them in.
JwtAlgorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]
_DEFAULT_ALGORITHMS: tuple[JwtAlgorithm, ...] = ("RS256",)
#: RFC 6749 §3.3 scope-token: printable ASCII but space, ``"`` and ``\\``.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _http_url(value: str, *, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL such as 'https://auth.example.com/'")
    if parts.fragment:
        raise ValueError(f"{what} must not have a #fragment")
    return value


class McpScopeSettings(Section):
    """The scope a JWT access token must hold for each class of MCP request."""

    read: str = Field(
        "memory:read",
        description=(
            "Scope for memory_search, memory_get, session_search, the harnessmem:// resources "
            "and the memory_context prompt (and the inspector's pages)."
        ),
    )
    write: str = Field("memory:write", description="Scope for memory_save and memory_flush.")
    forget: str = Field(
        "memory:forget",
        description="Scope for memory_forget (and the inspector's forget and edit).",
    )

    @field_validator("read", "write", "forget")
    @classmethod
    def _scope_token(cls, value: str) -> str:
        if not _SCOPE_TOKEN.fullmatch(value):
            raise ValueError(
                "a scope name is one word of printable ASCII (no spaces, quotes or backslashes)"
            )
        return value


class McpJwtSettings(Section):
    """How the HTTP transport checks JWT access tokens when ``mcp.auth = "jwt"``."""

    jwks_url: str | None = Field(
        None,
        description=(
            "URL of the authorization server's JSON Web Key Set (its jwks_uri), fetched when a "
            "token names a key not yet seen and cached 5 minutes; https, or http on a loopback "
            "address. Give this or public_key_file."
        ),
    )
    public_key_file: Path | None = Field(
        None,
        description=(
            "PEM file of the one public key tokens are signed with, instead of jwks_url "
            "(read once at start)."
        ),
    )
    issuer: str | None = Field(
        None,
        description=(
            "The iss every token must carry, exactly as the authorization server writes it "
            "(a trailing slash counts); also published as the authorization server in the "
            "protected-resource metadata."
        ),
    )
    audience: str | None = Field(
        None,
        description=(
            "This server's resource URL, as clients reach it (e.g. "
            "'https://memory.example.com/mcp'): every token's aud must hold it; it is the "
            "resource of the protected-resource metadata."
        ),
    )
    tenant_claim: str = Field(
        "sub",
        description=(
            "The claim that names the caller's tenant (the claim's name as is: no dotted "
            "paths). With --tenants the request is served from that tenant's workspace; a "
            "token without it, or whose value is not a valid tenant id, is refused."
        ),
    )
    algorithms: list[JwtAlgorithm] = Field(
        default_factory=lambda: list(_DEFAULT_ALGORITHMS),
        min_length=1,
        description=(
            "Signature algorithms accepted (RS*, PS*, ES*, EdDSA); 'none' and the HMAC ones "
            "never are."
        ),
    )
    leeway: float = Field(
        30,
        ge=0,
        le=300,
        description="Seconds of clock difference allowed when checking exp and nbf.",
    )
    scopes: McpScopeSettings = Field(
        default_factory=McpScopeSettings,
        description="The scope names per class of request (read, write, forget).",
    )

    @field_validator("jwks_url")
    @classmethod
    def _key_set_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        _http_url(value, what="the JWKS URL")
        parts = urlsplit(value)
        if parts.scheme != "https" and not is_loopback(parts.hostname or ""):
            raise ValueError(
                "the JWKS URL must be https (plain http only on a loopback address): the keys "
                "decide who gets in"
            )
        return value

    @field_validator("issuer", "audience")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        # OAuth issuers are https URLs (RFC 8414), and the audience is this server's URL.
        return None if value is None else _http_url(value, what="it")

    @field_validator("tenant_claim")
    @classmethod
    def _claim_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a claim, such as 'sub'")
        return value


class McpSettings(Section):
    """The MCP server of ``harnessmem mcp`` (needs ``pip install 'harnessmem[mcp]'``)."""

    auth: Literal["token", "jwt"] = Field(
        "token",
        description=(
            "How HTTP requests authenticate: 'token', the one shared mcp.token; 'jwt', "
            "per-user JWT access tokens of an OAuth 2.1 authorization server (mcp.jwt), the "
            "tenant from a claim, the tools by scope."
        ),
    )
    token: SecretStr | None = Field(
        None,
        description=(
            "Bearer token every HTTP request must carry (Authorization: Bearer <token>); "
            "without it the server answers 401. Required to serve on a non-loopback address. "
            "Not used over stdio."
        ),
    )
    jwt: McpJwtSettings = Field(
        default_factory=McpJwtSettings,
        description="JWT access tokens, with mcp.auth = 'jwt'.",
    )
    path: str = Field("/mcp", description="URL path of the streamable HTTP endpoint.")
    flush_tool: bool = Field(
        False,
        description=(
            "Also offer the memory_flush tool: a client hands over its messages and their new "
            "facts go to today's daily log."
        ),
    )

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or any(c in value for c in "?# "):
            raise ValueError("must be a URL path such as '/mcp'")
        return value

    @model_validator(mode="after")
    def _complete_auth(self) -> McpSettings:
        if self.auth != "jwt":
            return self
        missing = [
            f"mcp.jwt.{name}" for name in ("issuer", "audience") if not getattr(self.jwt, name)
        ]
        if not self.jwt.jwks_url and not self.jwt.public_key_file:
            missing.append("mcp.jwt.jwks_url (or mcp.jwt.public_key_file)")
        if missing:
            raise ValueError(f"mcp.auth = 'jwt' needs {', '.join(missing)}")
        if self.jwt.jwks_url and self.jwt.public_key_file:
            raise ValueError("give mcp.jwt.jwks_url or mcp.jwt.public_key_file, not both")
        if self.token is not None:
            raise ValueError(
                "mcp.token is set but mcp.auth is 'jwt': a shared token would pass the "
                "per-user checks by; unset mcp.token (HARNESSMEM_MCP__TOKEN) or use auth 'token'"
            )
        return self
