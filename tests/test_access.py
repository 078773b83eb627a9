"""harnessmem.access: JWT access tokens checked as an OAuth resource server checks them.

Keys are made here; the JWK set is served by a tiny HTTP server on loopback. No test waits:
a token's exp and nbf are set relative to the real clock, hours away from it, and the
leeway is tested with times inside and outside it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

jwt = pytest.importorskip("jwt", reason="PyJWT is not installed: pip install 'harnessmem[jwt]'")

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from harnessmem.access import FORGET, READ, TOOL_ACCESS, WRITE, JwtVerifier  # noqa: E402
from harnessmem.errors import AccessDenied, ConfigError  # noqa: E402
from harnessmem.settings import HarnessSettings, McpJwtSettings  # noqa: E402
from harnessmem.tools import tool_schemas  # noqa: E402

ISSUER = "https://auth.example.test/"
AUDIENCE = "https://memory.example.test/mcp"
KID = "key-1"
ALL_SCOPES = "memory:read memory:write memory:forget"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Keys:
    """An RSA key pair of the issuer's, the JWK set that publishes it, and tokens."""

    def __init__(self) -> None:
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        self.jwks = {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice",
            "exp": now + 3600,
            "iat": now,
            "scope": ALL_SCOPES,
            "client_id": "test-client",
        }
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, *, kid: str = KID, key: Any = None, alg: str = "RS256", **changes: Any) -> str:
        return jwt.encode(
            self.claims(**changes), key or self.private, algorithm=alg, headers={"kid": kid}
        )

    def unsigned(self, **changes: Any) -> str:
        """``alg: none``, no signature (PyJWT would not verify it; it is built by hand)."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": KID}).encode())
        return f"{header}.{_b64(json.dumps(self.claims(**changes)).encode())}."

    def hs256_with_public_key(self, **changes: Any) -> str:
        """The key-confusion attack: HS256 with the issuer's public key as the secret."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KID}).encode())
        body = _b64(json.dumps(self.claims(**changes)).encode())
        mac = hmac.new(self.public_pem, f"{header}.{body}".encode(), hashlib.sha256).digest()
        return f"{header}.{body}.{_b64(mac)}"

    def tampered(self) -> str:
        """A good token whose signature has one byte changed."""
        header, body, signature = self.token().split(".")
        raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
        raw[len(raw) // 2] ^= 0x01
        return f"{header}.{body}.{_b64(bytes(raw))}"

    def swapped_claims(self) -> str:
        """A good token's signature over claims changed to bob's."""
        header, _, signature = self.token().split(".")
        return f"{header}.{_b64(json.dumps(self.claims(sub='bob')).encode())}.{signature}"


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


class KeySetServer:
    """The JWK set at ``url``, served on loopback; ``fetches`` counts the requests."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.fetches = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps(jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def key_set(keys: Keys) -> Iterator[KeySetServer]:
    server = KeySetServer(keys.jwks)
    yield server
    server.close()


def _settings(**values: Any) -> McpJwtSettings:
    return McpJwtSettings(issuer=ISSUER, audience=AUDIENCE, **values)


@pytest.fixture
def verifier(key_set: KeySetServer) -> JwtVerifier:
    return JwtVerifier(_settings(jwks_url=key_set.url))


def bad_tokens(keys: Keys) -> dict[str, tuple[str, str]]:
    """Every token the acceptance list says must let no one in: name -> (token, the words
    of the reason PyJWT or the tenant check gives)."""
    now = int(time.time())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path_trick = "holds a path separator or '..'"
    return {
        "expired": (keys.token(exp=now - 3600), "expired"),
        "not yet valid": (keys.token(nbf=now + 3600), "not yet valid"),
        "wrong issuer": (keys.token(iss="https://evil.example.test/"), "Invalid issuer"),
        "wrong audience": (keys.token(aud="https://other.example.test/mcp"), "Audience"),
        "no audience": (keys.token(aud=None), 'missing the "aud"'),
        "no expiry": (keys.token(exp=None), 'missing the "exp"'),
        "alg none": (keys.unsigned(), "alg value is not allowed"),
        "HS256 signed with the public key": (keys.hs256_with_public_key(), "alg value"),
        "tampered signature": (keys.tampered(), "Signature verification failed"),
        "claims swapped under a signature": (keys.swapped_claims(), "Signature verification"),
        "unknown kid": (keys.token(kid="key-2", key=other), "signing key that matches"),
        "known kid, another key": (keys.token(key=other), "Signature verification failed"),
        "not a JWT": ("t0ken-for-tests-xxxxxxxx", "segments"),
        "tenant ../bob": (keys.token(sub="../bob"), path_trick),
        "tenant alice/../bob": (keys.token(sub="alice/../bob"), path_trick),
        "tenant a/b": (keys.token(sub="a/b"), path_trick),
        "tenant ..": (keys.token(sub=".."), path_trick),
        "tenant with a backslash": (keys.token(sub="..\\bob"), path_trick),
        "tenant with a NUL": (keys.token(sub="alice\x00"), "control characters"),
        "tenant empty": (keys.token(sub=""), "it is empty"),
        "tenant missing": (keys.token(sub=None), "no claim 'sub'"),
        "tenant not a string": (keys.token(sub=["alice"]), "must be a string"),
        "tenant the pool's index": (keys.token(sub="memory_index.db-wal"), "the pool's own"),
    }


# ------------------------------------------------------------------------------ verify


def test_a_good_token_grants_its_tenant_and_scopes(verifier: JwtVerifier, keys: Keys) -> None:
    grant = verifier.verify(keys.token())
    assert grant.tenant == "alice"
    assert grant.subject == "alice"
    assert grant.client_id == "test-client"
    assert grant.allows == {READ, WRITE, FORGET}


def test_every_bad_token_is_refused_saying_why(verifier: JwtVerifier, keys: Keys) -> None:
    """Acceptance: expired, not yet valid, wrong issuer or audience, alg none, HS256 with the
    public key, a tampered signature, an unknown kid, a tenant with path tricks."""
    wrong = []
    for name, (token, reason) in bad_tokens(keys).items():
        try:
            grant = verifier.verify(token)
        except AccessDenied as exc:
            if not exc.message.startswith("bearer token refused") or reason not in exc.message:
                wrong.append((name, exc.message))
        else:
            wrong.append((name, f"accepted: {grant}"))
    assert wrong == []


def test_the_same_tokens_against_a_public_key_file(tmp_path: Path, keys: Keys) -> None:
    pem = tmp_path / "issuer.pem"
    pem.write_bytes(keys.public_pem)
    verifier = JwtVerifier(_settings(public_key_file=pem))
    assert verifier.verify(keys.token()).tenant == "alice"
    for name, (token, _) in bad_tokens(keys).items():
        with pytest.raises(AccessDenied, match="bearer token refused"):
            verifier.verify(token)
        assert name  # the case, in the traceback when one is accepted


def test_exp_and_nbf_have_the_leeway_and_no_more(verifier: JwtVerifier, keys: Keys) -> None:
    now = int(time.time())
    assert verifier.verify(keys.token(exp=now - 10)).tenant == "alice"  # leeway 30 s
    assert verifier.verify(keys.token(nbf=now + 10)).tenant == "alice"
    for late in (keys.token(exp=now - 120), keys.token(nbf=now + 120)):
        with pytest.raises(AccessDenied, match=r"expired|not yet valid"):
            verifier.verify(late)
    strict = JwtVerifier(_settings(jwks_url=verifier.settings.jwks_url, leeway=0))
    with pytest.raises(AccessDenied):
        strict.verify(keys.token(exp=now - 10))


def test_only_the_configured_algorithms(key_set: KeySetServer, keys: Keys) -> None:
    es_only = JwtVerifier(_settings(jwks_url=key_set.url, algorithms=["ES256"]))
    with pytest.raises(AccessDenied, match="alg"):
        es_only.verify(keys.token())
    for forbidden in (["none"], ["HS256"], []):
        with pytest.raises(ValueError, match="algorithms"):
            _settings(jwks_url=key_set.url, algorithms=forbidden)


def test_an_ec_key_from_a_public_key_file(tmp_path: Path, keys: Keys) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "ec.pem"
    pem.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    verifier = JwtVerifier(_settings(public_key_file=pem, algorithms=["ES256"]))
    assert verifier.verify(keys.token(key=private, alg="ES256")).tenant == "alice"
    with pytest.raises(AccessDenied):  # the RSA key's token: another algorithm, another key
        verifier.verify(keys.token())


def test_the_key_set_is_fetched_once_for_many_tokens(
    verifier: JwtVerifier, key_set: KeySetServer, keys: Keys
) -> None:
    for _ in range(5):
        verifier.verify(keys.token())
    with pytest.raises(AccessDenied):  # an unknown kid right after a fetch: no new fetch
        verifier.verify(keys.token(kid="key-2"))
    assert key_set.fetches == 1


def test_an_unreachable_key_set_refuses_and_says_where(keys: Keys) -> None:
    gone = KeySetServer(keys.jwks)
    gone.close()
    verifier = JwtVerifier(_settings(jwks_url=gone.url))
    with pytest.raises(AccessDenied, match="out of reach"):
        verifier.verify(keys.token())


def test_scopes_grant_classes(verifier: JwtVerifier, keys: Keys) -> None:
    """``scope`` (a string) or ``scp`` (a list, as some providers write it)."""
    read_only = verifier.verify(keys.token(scope="memory:read"))
    assert read_only.allows == {READ}
    with pytest.raises(AccessDenied, match="'memory:write'"):
        read_only.require(WRITE, "memory_save")
    assert verifier.verify(keys.token(scope=None, scp=["memory:write"])).allows == {WRITE}
    assert verifier.verify(keys.token(scope="openid profile")).allows == frozenset()
    with pytest.raises(AccessDenied, match="no access token"):
        verifier.verify(keys.token()).require(None, "a tool of no class")


def test_scope_names_and_the_tenant_claim_are_settings(key_set: KeySetServer, keys: Keys) -> None:
    verifier = JwtVerifier(
        _settings(
            jwks_url=key_set.url,
            tenant_claim="https://memory.example.test/tenant",
            scopes={"read": "mem.read", "write": "mem.write", "forget": "mem.forget"},
        )
    )
    grant = verifier.verify(
        keys.token(
            sub="auth0|64f0",  # not a tenant id; the configured claim is the tenant
            scope="mem.read mem.forget",
            **{"https://memory.example.test/tenant": "team-7"},
        )
    )
    assert (grant.tenant, grant.allows) == ("team-7", {READ, FORGET})


def test_every_tool_has_a_class() -> None:
    """A new tool left out of TOOL_ACCESS would be callable by no token: class it."""
    settings = HarnessSettings(tools={"forget": True})
    names = {f["function"]["name"] for f in tool_schemas(settings, lifecycle=True)}
    assert names == set(TOOL_ACCESS)


# ------------------------------------------------------------------------------ settings


def test_jwt_settings_must_be_complete() -> None:
    with pytest.raises(ConfigError) as caught:
        HarnessSettings(mcp={"auth": "jwt"})
    assert "mcp.jwt.issuer, mcp.jwt.audience, mcp.jwt.jwks_url" in str(caught.value)
    complete = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": "https://a.example.test/k"}
    assert HarnessSettings(mcp={"auth": "jwt", "jwt": complete}).mcp.auth == "jwt"
    refused = {
        "both keys": {"mcp": {"auth": "jwt", "jwt": {**complete, "public_key_file": "k.pem"}}},
        "and a token": {"mcp": {"auth": "jwt", "token": "t", "jwt": complete}},
        "plain http": {"mcp": {"jwt": {"jwks_url": "http://keys.example.test/k"}}},
        "no URL": {"mcp": {"jwt": {"audience": "memory"}}},
        "a scope with a space": {"mcp": {"jwt": {"scopes": {"read": "memory read"}}}},
    }
    for name, values in refused.items():
        with pytest.raises(ConfigError):
            HarnessSettings(**values)
        assert name


def test_a_public_key_file_that_is_not_one(tmp_path: Path, keys: Keys) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match=r"cannot read mcp\.jwt\.public_key_file"):
        JwtVerifier(_settings(public_key_file=missing))
    private = tmp_path / "private.pem"
    private.write_bytes(
        keys.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ConfigError, match="holds no PEM public key"):
        JwtVerifier(_settings(public_key_file=private))


# ------------------------------------------------------------------------------ inspector


def test_the_inspector_beyond_loopback_takes_the_same_tokens(
    tmp_path: Path, verifier: JwtVerifier, keys: Keys
) -> None:
    """The reading scope for the pages, the forgetting scope for forget; a bad token 401."""
    pytest.importorskip("starlette", reason="the inspector needs the 'inspect' extra")
    pytest.importorskip("markdown_it", reason="the inspector needs the 'inspect' extra")
    from starlette.testclient import TestClient

    from harnessmem import MemoryHarness
    from harnessmem.inspector import create_app

    settings = HarnessSettings(
        workspace={"url": str(tmp_path / "ws")}, maintenance={"enabled": False}
    )
    reader, forgetter = keys.token(scope="memory:read"), keys.token()
    with MemoryHarness(settings) as harness:
        harness.save("- Maya's cat is called Mirko")
        app = create_app(harness, host="0.0.0.0", verifier=verifier)
        with TestClient(app) as client:
            assert client.get("/memory").status_code == 401
            for name, (token, _) in bad_tokens(keys).items():
                refused = client.get("/memory", headers={"Authorization": f"Bearer {token}"})
                assert (name, refused.status_code) == (name, 401)
                assert "Mirko" not in refused.text
            page = client.get("/memory", headers={"Authorization": f"Bearer {reader}"})
            assert page.status_code == 200
            assert "Mirko" in page.text
            no_scope = keys.token(scope="memory:write")
            assert (
                client.get("/memory", headers={"Authorization": f"Bearer {no_scope}"}).status_code
                == 403
            )
            first = client.get(f"/forget?q=Mirko&token={reader}", follow_redirects=False)
            assert first.status_code == 303
            preview = client.get("/forget", params={"q": "Mirko"})  # the cookie from now on
            assert preview.status_code == 200
            csrf = preview.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            form = {"q": "Mirko", "csrf": csrf}
            denied = client.post("/forget", data=form)
            assert denied.status_code == 403
            assert "'memory:forget'" in denied.text
            assert "Mirko" in harness.workspace.read_text("MEMORY.md")
            client.cookies.clear()
            done = client.post(
                "/forget", data=form, headers={"Authorization": f"Bearer {forgetter}"}
            )
            assert done.status_code == 200, done.text
        assert "Mirko" not in harness.workspace.read_text("MEMORY.md")


def test_inspect_beyond_loopback_reads_the_key_before_the_workspace(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from harnessmem.cli import main

    env = {
        "HARNESSMEM_MCP__AUTH": "jwt",
        "HARNESSMEM_MCP__JWT__PUBLIC_KEY_FILE": str(tmp_path / "missing.pem"),
        "HARNESSMEM_MCP__JWT__ISSUER": ISSUER,
        "HARNESSMEM_MCP__JWT__AUDIENCE": AUDIENCE,
    }
    result = CliRunner(env=env).invoke(
        main, ["inspect", "--host", "0.0.0.0", "-w", str(tmp_path / "w")]
    )
    assert result.exit_code == 3, result.output
    assert "cannot read mcp.jwt.public_key_file" in result.output
    assert "without a token" not in result.output
    assert not (tmp_path / "w").exists()
