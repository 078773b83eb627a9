"""The secret redactor against a corpus: real-shaped secrets in every field of every message
must reach no file, and look-alikes must come through unchanged.

The formats follow what maintained secret scanners (gitleaks' default rules, detect-secrets'
plugins) look for, plus the command-line and URL shapes agents print; the values are made up
from a seeded generator, never real credentials. docs/memory.md lists the coverage.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem.memory.redaction import redact
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.testing import ScriptedModel

if TYPE_CHECKING:
    from conftest import HarnessFactory, WorkspaceTarget

_RNG = random.Random(17)
_LOWER_DIGITS = string.ascii_lowercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"
_URLSAFE = _ALNUM + "_-"


def _r(alphabet: str, n: int) -> str:
    """``n`` characters drawn from ``alphabet``, with at least one digit when it has some."""
    while True:
        value = "".join(_RNG.choice(alphabet) for _ in range(n))
        if not any(c.isdigit() for c in alphabet) or any(c.isdigit() for c in value):
            return value


def _key_body() -> str:
    return _r(_ALNUM + "+/", 64)


def _pem(kind: str, body: str) -> str:
    return f"-----BEGIN {kind}-----\n{body}\n{_r(_ALNUM, 40)}==\n-----END {kind}-----"


# (text as an agent would see it, the part of it that must never be stored)
_SHAPED: list[tuple[str, str]] = []


def _token(template: str, secret: str) -> None:
    _SHAPED.append((template.format(secret), secret))


for _prefix, _alphabet, _n in [
    ("sk-proj-", _URLSAFE, 48),
    ("sk-", _ALNUM, 48),
    ("sk-svcacct-", _URLSAFE, 40),
    ("sk-ant-api03-", _URLSAFE, 90),
    ("sk-ant-admin01-", _URLSAFE, 90),
    ("sk-or-v1-", _HEX, 64),
    ("ghp_", _ALNUM, 36),
    ("gho_", _ALNUM, 36),
    ("ghu_", _ALNUM, 36),
    ("ghs_", _ALNUM, 36),
    ("ghr_", _ALNUM, 36),
    ("github_pat_", _ALNUM + "_", 82),
    ("glpat-", _URLSAFE, 20),
    ("gldt-", _URLSAFE, 20),
    ("glrt-", _URLSAFE, 20),
    ("glptt-", _HEX, 40),
    ("glsoat-", _URLSAFE, 20),
    ("glcbt-", _URLSAFE, 24),
    ("glffct-", _URLSAFE, 20),
    ("glimt-", _URLSAFE, 25),
    ("glagent-", _URLSAFE, 50),
    ("gloas-", _URLSAFE, 64),
    ("xoxb-", _LOWER_DIGITS + "-", 50),
    ("xoxp-", _LOWER_DIGITS + "-", 60),
    ("xoxa-2-", _LOWER_DIGITS, 40),
    ("xapp-1-", string.ascii_uppercase + string.digits + "-", 40),
    ("AIza", _URLSAFE, 35),
    ("ya29.", _URLSAFE, 120),
    ("GOCSPX-", _URLSAFE, 28),
    ("sk_live_", _ALNUM, 24),
    ("sk_test_", _ALNUM, 99),
    ("rk_live_", _ALNUM, 24),
    ("whsec_", _ALNUM, 32),
    ("hf_", _ALNUM, 34),
    ("api_org_", _ALNUM, 34),
    ("npm_", _ALNUM, 36),
    ("pypi-AgEIcHlwaS5vcmc", _URLSAFE, 70),
    ("shpat_", _HEX, 32),
    ("shpss_", _HEX, 32),
    ("shpca_", _HEX, 32),
    ("shppa_", _HEX, 32),
    ("dop_v1_", _HEX, 64),
    ("doo_v1_", _HEX, 64),
    ("dor_v1_", _HEX, 64),
    ("lin_api_", _ALNUM, 40),
    ("sbp_", _HEX, 40),
    ("glc_", _ALNUM + "+/", 60),
    ("gsk_", _ALNUM, 52),
    ("r8_", _ALNUM, 37),
    ("sntrys_", _ALNUM, 90),
    ("sntryu_", _HEX, 64),
    ("ntn_", _ALNUM, 46),
    ("secret_", _ALNUM, 43),
    ("ops_eyJ", _ALNUM, 120),
    ("NRAK-", string.ascii_uppercase + string.digits, 27),
    ("HRKU-", _URLSAFE, 60),
    ("xai-", _ALNUM, 80),
    ("pplx-", _HEX, 48),
    ("key-", _HEX, 32),
    ("hvs.", _URLSAFE, 90),
    ("hvb.", _URLSAFE, 130),
    ("dapi", _HEX, 32),
    ("EAAC", _ALNUM, 120),
    ("SK", _HEX, 32),
]:
    _token(f"the CI uses {{}} for {_prefix.rstrip('_-.')}", _prefix + _r(_alphabet, _n))

_token("aws {} in us-east-1", "AKIA" + _r(string.ascii_uppercase + string.digits, 16))
_token("temporary {} creds", "ASIA" + _r(string.ascii_uppercase + string.digits, 16))
_token("glsa {} grafana", f"glsa_{_r(_ALNUM, 32)}_{_r(_HEX, 8)}")
_token("postman {} key", f"PMAK-{_r(_HEX, 24)}-{_r(_HEX, 34)}")
_token("age key {}", "AGE-SECRET-KEY-1" + _r(string.ascii_uppercase + string.digits, 58))
_token("sendgrid {}", f"SG.{_r(_URLSAFE, 22)}.{_r(_URLSAFE, 43)}")
_token("doppler {}", f"dp.pt.{_r(_ALNUM, 43)}")
_token("terraform {}", f"{_r(_LOWER_DIGITS, 14)}.atlasv1.{_r(_URLSAFE, 67)}")
_token("dynatrace {}", f"dt0c01.{_r('ABCDEFGHIJ0123456789', 24)}.{_r('ABCDEF0123456789', 64)}")
_token("jira {}", "ATATT3" + _r(_URLSAFE, 186))
_token("telegram bot {}", f"{_r(string.digits, 10)}:AA{_r(_URLSAFE, 33)}")
_token("azure client secret {}", f"{_r(_ALNUM, 3)}8Q~{_r(_ALNUM + '_~.-', 34)}")
_token("jwt {} expired", f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI{_r(_ALNUM, 20)}.{_r(_URLSAFE, 43)}")
_token(
    "post to {}",
    "https://hooks.slack.com/services/"
    f"T{_r('ABCDEFGH0123', 8)}/B{_r('XYZ0123', 9)}/{_r(_ALNUM, 24)}",
)
_token("discord {}", f"https://discord.com/api/webhooks/{_r(string.digits, 18)}/{_r(_URLSAFE, 68)}")
for _kind in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"):
    _body = _key_body()
    _SHAPED.append((f"here is the key:\n{_pem(_kind, _body)}\nthanks", _body))
_body = _key_body()
_SHAPED.append((_pem("ENCRYPTED PRIVATE KEY", _body), _body))
_body = _key_body()
_SHAPED.append((_pem("PGP PRIVATE KEY BLOCK", _body), _body))
_body = _key_body()
_SHAPED.append(
    (
        f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ana\nPublic-Lines: 2\n"
        f"AAAAC3NzaC1lZDI1NTE5AAAAI\nPrivate-Lines: 1\n{_body}\nPrivate-MAC: {_r(_HEX, 64)}",
        _body,
    )
)
# passwords: URLs, command lines, assignments, headers, prose
_PASSWORDS = [
    ("mysql://root:{}@10.0.0.5/app", "pa55/w0rd!Zq"),
    ("postgres://admin:{}@db.internal:5432/app", "Hunter2Pg"),
    ("postgresql://svc:{}@pg:5432/x?sslmode=require", "p@ss@w0rd"),
    ("redis://default:{}@cache:6379/0", "R3disPa55"),
    ("mongodb+srv://ana:{}@cluster0.ab1cd.mongodb.net/db", "M0ngoSecret"),
    ("amqp://guest:{}@rabbit:5672/", "Amqp/Secret9"),
    ("git clone https://ana:{}@git.example.com/team/repo.git", "G1tHttpPass"),
    ("mysql -u root -p{}", "Tr0ub4dor3Zeta"),
    ("mysqldump -uroot -p{} shop > dump.sql", "DumpPa55word"),
    ("mariadb -h db -u app -p'{}' app", "Mar1a Db Pw"),
    ("sshpass -p '{}' ssh deploy@10.0.0.7", "S5hpassHunter22"),
    ("sshpass -p{} scp f host:", "SshpassAttached9"),
    ("redis-cli -h cache -a {} ping", "RedisCli5ecret"),
    ("docker login -u ana -p {} registry.example.com", "D0ckerLoginPw"),
    ("curl -u ana:{} https://api.example.com", "CurlBasic7pw"),
    ('curl --user "ci:{}" https://x.example', "CurlUserPw8"),
    ("smbclient //srv/share -U ana%{}", "SmbPa55word"),
    ("htpasswd -bc .htpasswd admin {}", "HtPasswd9x"),
    ("machine api.example.com login ana password {}", "NetrcPass7"),
    ("psql --password {} -h db", "PsqlFlag99"),
    ("vault login --db-password '{}' now", "Db Flag Pw 3"),
    ("tool --api-key {} run", _r(_ALNUM, 32)),
    ("gh auth login --token {}", _r(_ALNUM, 40)),
    ("app --client-secret {}", _r(_ALNUM, 24)),
    ("DB_PASSWORD={}", "s3cr3t-pass"),
    ("PGPASSWORD={} psql", "PgEnvSecret1"),
    ("MYSQL_ROOT_PASSWORD: {}", "RootPw2026"),
    ("SMTP_PASS={}", "SmtpPassw0rd"),
    ("export REDIS_AUTH={}", _r(_ALNUM, 24)),
    ("GOOGLE_CREDENTIALS={}", _r(_ALNUM, 40)),
    ('{{"api_key": "{}", "n": 2}}', _r(_ALNUM, 24)),
    ('{{"password": "{}"}}', "Json Pw With Spaces"),
    ("client_secret: '{}'", _r(_ALNUM, 24)),
    ("aws_secret_access_key = {}", _r(_ALNUM + "/+", 40)),
    (
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={};EndpointSuffix=core",
        _r(_ALNUM, 86) + "==",
    ),
    ("Server=db;User Id=sa;Password={};", "SqlServer9Pw"),
    ("secret_key_base = {}", _r(_HEX, 64)),
    ('"apiKey": "{}"', _r(_ALNUM, 32)),
    ("auth_token: {}", _r(_ALNUM, 32)),
    ("Authorization: Bearer {}", _r(_ALNUM, 40)),
    ("Authorization: Basic {}", _r(_ALNUM, 28) + "=="),
    ("Authorization: Token {}", _r(_HEX, 40)),
    ("X-Api-Key: {}", _r(_ALNUM, 32)),
    ("my password is {}.", "Hunter2Prose"),
    ("the pin code is {}", "4711"),
    ("the access token is {}, use it", _r(_HEX, 24)),
    ("wifi passcode: '{}' at home", "tulip-42"),
]
for _template, _secret in _PASSWORDS:
    _SHAPED.append((_template.format(_secret), _secret))

# Text that shares a shape with a secret and must come through unchanged.
LOOK_ALIKES = [
    "The password is changed weekly.",
    "Token is valid until Friday",
    "Basic authentication is enabled",
    "Bearer tokens expire after an hour",
    "max_tokens=4000 and a token budget: 5",
    "token_count: 12",
    "The key: be kind. Note: call Ana at 5",
    "Ana's secret is that she sings",
    "my boarding pass is ready",
    "I forgot my password again",
    "the pin code is required",
    "see https://example.com/path?q=1 for the docs",
    "http://host:8080/path@v2",
    "https://example.com:443/users/@me",
    "http://localhost:3000/api?email=ana@example.com",
    "https://ana@git.example.com/repo.git",
    "ssh://git@github.com:22/org/repo.git",
    "git@github.com:org/repo.git",
    "mailto:ana@example.com",
    "https://medium.com/@ana/a-post",
    "jdbc:mysql://db:3306/app",
    "redis://cache:6379/0",
    "mysql -u root -p app",
    "mysql -h db -P3306 -u app",
    "mkdir -p build/out",
    "ssh -p 2222 deploy@host",
    "docker run -p 8080:80 nginx",
    "pip install -r requirements.txt",
    "sshpass -f ~/.pw ssh host",
    "curl -u ana https://api.example.com",
    "docker login --password-stdin registry.example.com",
    "tool --password $DB_PASS",
    'tool --token "$GITHUB_TOKEN"',
    "llm --max-tokens 4096",
    "use the --password flag to set it",
    "tool --no-password mode",
    "tool --token-file ./token.txt",
    "kubectl get secret --secret-name prod-db",
    "redis-cli -h localhost ping",
    "docker login registry.example.com",
    "htpasswd -c .htpasswd admin",
    "first_pass=1",
    "compass=north",
    "bypass=true",
    "SMTP_PASS=true",
    "passport=XK12",
    "keyboard=us",
    "primary_key=id",
    "password_length=16",
    "token_limit: 8000",
    "auth=basic",
    "auth: none",
    "cred_id=42",
    "password=${DB_PASSWORD}",
    "password: {{ vault_db_password }}",
    "api_key=$API_KEY",
    "commit 3f9a2b7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "scikit-learn uses sk-learn style names",
    "task-force disk-usage",
    "hf_hub_download(repo)",
    "npm_config_cache=/tmp/npm",
    "github_actions ran",
    "secret_santa list",
    "a key-value store",
    "key-0123",
    "SG.example is a domain",
    "ya29 is a prefix",
    "dapi is a word",
    "SKU12345 in stock",
    "xai-grok-beta model",
    "pplx-api client",
    "AGE-SECRET-KEY-1 is a header",
    "PMAK-123",
    "glpat-short",
    "sk_live_short",
    "AIzaShort",
    "eyJhbGciOiJIUzI1NiJ9 is one segment",
    "dt0c01.short",
    "12345678:AAbc",
    "at 12:00:00 on 10.0.0.5:8080",
    "abc1Q~short",
    "AKIAIOSFODNN7",
    "drwxr-xr-x  2 agent agent 4096 Nov 30 12:00 some/build/output/path.o",
    "def get_password(self) -> str:",
    "ghp_ is GitHub's prefix",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx ana@laptop",
    "PuTTY-User-Key-File is a format",
    "Private-Lines: 14",
    "https://hooks.slack.com/ is Slack",
    "https://discord.com/api/webhooks/ docs",
    "login ana then password reset",
    "the token is valid",
    "access_token_url=https://auth.example.com/token",
    "secret_name=prod-db",
    "error: password authentication failed for user app",
    "Enter password:",
    "pk_live_" + "x" * 24,
]


def test_the_corpus_is_large_enough() -> None:
    assert len(_SHAPED) >= 100
    assert len(set(LOOK_ALIKES)) >= 100
    assert len({secret for _, secret in _SHAPED}) == len(_SHAPED), "each secret once"


@pytest.mark.parametrize(("text", "secret"), _SHAPED, ids=[s[:24] for _, s in _SHAPED])
def test_every_shaped_secret_is_redacted(text: str, secret: str) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert "[REDACTED]" in redacted
    assert redact(redacted) == redacted, "idempotent"


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_no_look_alike_is_redacted(text: str) -> None:
    assert redact(text) == text


# -- every field of every message, every file ------------------------------------------------


def _messages(index: int, text: str) -> list[dict[str, Any]]:
    """``text`` in each field a client library may send: content, parts, reasoning, calls."""
    call = f"call_{index}"
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "tool_result", "tool_use_id": f"toolu_{index}", "content": text},
                {"type": "image_url", "image_url": {"url": text}},
            ],
        },
        {
            "role": "assistant",
            "content": text,
            "reasoning_content": text,
            "function_call": {"name": "legacy", "arguments": json.dumps({"cmd": text})},
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "shell", "arguments": {"cmd": text, "env": [text]}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": text},
        {"role": "user", "content": text},
    ]


def test_no_secret_of_the_corpus_reaches_a_file(
    open_harness: HarnessFactory, workspace_target: WorkspaceTarget, tmp_path: Path
) -> None:
    """The corpus through compaction (session log, index), flush (daily log), save and
    consolidation (MEMORY.md, memory/.history/): no secret in any byte stored, and every
    look-alike in the session log as it was sent.

    When it fails: the path named holds the secret; find which writer skipped the
    ``transform_memory_text`` chain or which rule missed the text."""
    texts = [text for text, _ in _SHAPED] + LOOK_ALIKES
    facts = "\n".join(f"- {text}" for text in texts)

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if purpose in ("flush", "consolidation"):
            return facts
        return "A summary."

    harness = open_harness(
        ScriptedModel(reply),
        compaction={"trigger_messages": 10, "keep_messages": 2, "trigger_tokens": 0},
        consolidation={"max_entry_loss": 1.0},
    )
    conversation: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for index, text in enumerate(texts):
        conversation += _messages(index, text)
    conversation += [{"role": "user", "content": "last"}, {"role": "assistant", "content": "ok"}]
    harness.session("corpus").before_reasoning(conversation)
    harness.save(facts)
    harness.consolidate()
    harness.reindex(full=True)

    records = SessionTranscript(harness.workspace, "corpus").records()
    assert len(records) == len(conversation) - 3, "every message but the kept tail was logged"
    logged = {
        r.message["content"]
        for r in records
        if r.message["role"] == "user" and isinstance(r.message["content"], str)
    }
    missing = [text for text in LOOK_ALIKES if text not in logged]
    assert not missing, "look-alikes changed in the session log"
    history = list(harness.workspace.list("memory/.history"))
    assert history, "consolidation kept the former MEMORY.md"
    harness.close()
    files = workspace_target.stored_bytes(tmp_path)
    names = {path.rsplit("/", 1)[-1] for path in files}
    assert {"MEMORY.md", "corpus.log.jsonl", "memory_index.db"} <= names
    leaks = [
        (secret, path)
        for path, data in files.items()
        for _, secret in _SHAPED
        if secret.encode() in data
    ]
    assert not leaks
