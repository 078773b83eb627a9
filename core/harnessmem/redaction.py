"""The built-in secret redactor: a ``transform_memory_text`` plugin.

Every text harnessmem is about to persist (flushed facts, ``memory_save`` entries,
consolidated MEMORY.md, offloaded transcripts, evicted tool output) passes through it. It
replaces secrets with ``[REDACTED]`` and keeps the rest of the sentence, so that "the deploy
key is sk-proj-… and expires Friday" is remembered as "the deploy key is [REDACTED] and
expires Friday". What it recognises:

- private key blocks (``-----BEGIN … PRIVATE KEY-----`` … ``-----END … -----``);
- passwords in URLs (``postgres://user:pw@host`` keeps the user and the host);
- well-known token formats: OpenAI / Anthropic (``sk-…``), AWS access key ids, GitHub,
  GitLab, Slack, Google API, Stripe, Hugging Face and npm tokens, JSON Web Tokens;
- ``Authorization: Bearer …`` / ``Basic …`` / ``Token …`` credentials;
- assignments such as ``DB_PASSWORD=…``, ``"api_key": "…"``, ``client_secret: …``;
- prose such as "my password is hunter2" or "the access token is 3f9a…".

Options (``[plugins.settings.redaction]``): ``patterns``, extra regular expressions whose
matches are replaced; ``replacement``, the text put in their place. Disable the plugin with
``plugins.disable = ["redaction"]``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harnessmem.errors import ConfigError
from harnessmem.plugins import hookimpl

if TYPE_CHECKING:
    from harnessmem.settings import HarnessSettings

__all__ = ["RedactionOptions", "SecretRedactor", "redact"]

PLUGIN_NAME = "redaction"
REPLACEMENT = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:[\s\S]*?-----END \1-----|[A-Za-z0-9+/=\s\\]*)"
)
# scheme://user:password@host — the password is what goes.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)(@)")
_TOKENS = re.compile(
    r"\b(?:"
    r"sk-(?:proj-|ant-(?:api\d+-)?|svcacct-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
# A credential after an auth scheme must hold a digit, so "Basic authentication" survives.
_AUTH_HEADER = re.compile(
    r"\b(Bearer|Basic|Token)(\s+)(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{16,}"
)
_PASSWORD_KEYS = r"password|passwd|pwd|passphrase|passcode"
_TOKEN_KEYS = (
    r"secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token"
    r"|access[_-]?token|refresh[_-]?token|client[_-]?secret|session[_-]?token|token"
)
# key = value / "key": "value"; the key may carry a prefix such as DB_ or aws_. Any
# identifier before ":" or "=" matches here (cheap: no keyword alternation at every
# position); the replacement checks that it ends with a secret's keyword.
_ASSIGNMENT = re.compile(
    r"""\b([A-Za-z0-9_.-]+)(["']?\s*[:=]\s*)("[^"\n]+"|'[^'\n]+'|[^\s"',;]+)"""
)
_SECRET_KEY = re.compile(rf"(?i)(?:{_PASSWORD_KEYS}|{_TOKEN_KEYS})$")
_PROSE = re.compile(
    rf"(?i)\b((?:{_PASSWORD_KEYS})|pin(?: code)?|api key|secret key|access key|access token"
    r"|auth token|token|secret)(\s+(?:is|was|are|:)\s+)([\"']?)([^\s\"']+?)(\3)"
    r"(?=[.,;:!?)]*(?:\s|$))"
)
# Words that follow "password is" without being one ("the password is changed weekly").
_NOT_SECRETS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "a an the not no now still too very being been changed reset set updated incorrect "
        "wrong expired required stored saved missing empty unknown invalid valid correct same "
        "different weak strong secure insecure long short new old needed rotated shared "
        "hidden public private available here there in on at"
    ).split()
)


def _is_secret_like(value: str) -> bool:
    """For tokens and keys in prose: only values that look generated, not words."""
    return len(value) >= 16 or (len(value) >= 8 and any(ch.isdigit() for ch in value))


def redact(text: str, replacement: str = REPLACEMENT) -> str:
    """``text`` with every secret the built-in rules recognise replaced by ``replacement``."""
    text = _PRIVATE_KEY.sub(replacement, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m[1]}{replacement}{m[3]}", text)
    text = _TOKENS.sub(replacement, text)
    text = _AUTH_HEADER.sub(lambda m: f"{m[1]}{m[2]}{replacement}", text)

    def assignment(match: re.Match[str]) -> str:
        key, sep, value = match[1], match[2], match[3]
        bare = value.strip("\"'")
        if bare == replacement or not bare or not _SECRET_KEY.search(key):
            return match[0]
        is_password = re.search(_PASSWORD_KEYS, key, re.IGNORECASE) is not None
        if not is_password and not _is_secret_like(bare):
            return match[0]
        quote = value[0] if value[0] in "\"'" else ""
        return f"{key}{sep}{quote}{replacement}{quote}"

    text = _ASSIGNMENT.sub(assignment, text)

    def prose(match: re.Match[str]) -> str:
        key, verb, quote, value = match[1], match[2], match[3], match[4]
        if value == replacement or value.casefold() in _NOT_SECRETS:
            return match[0]
        is_password = re.fullmatch(rf"(?i){_PASSWORD_KEYS}|pin(?: code)?", key) is not None
        if not is_password and not _is_secret_like(value):
            return match[0]
        return f"{key}{verb}{quote}{replacement}{quote}"

    return _PROSE.sub(prose, text)


class RedactionOptions(BaseModel):
    """Options of the secret redactor (``plugins.settings.redaction``)."""

    model_config = ConfigDict(extra="forbid")

    patterns: list[str] = Field(
        default_factory=list, description="Extra regular expressions whose matches are replaced."
    )
    replacement: str = Field(REPLACEMENT, description="Text put in place of each secret.")


class SecretRedactor:
    """The ``transform_memory_text`` plugin (entry point ``redaction``); one per harness."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.options = RedactionOptions()
        self._extra: list[re.Pattern[str]] = []

    @hookimpl
    def harnessmem_configure(self, settings: HarnessSettings) -> None:
        where = f"plugins.settings.{PLUGIN_NAME}"
        try:
            self.options = RedactionOptions.model_validate(
                settings.plugins.settings.get(PLUGIN_NAME, {})
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            dotted = ".".join([where, *map(str, first["loc"])])
            raise ConfigError(f"{dotted}: {first['msg']} (got {first.get('input')!r})") from None
        self._extra = []
        for position, pattern in enumerate(self.options.patterns):
            try:
                self._extra.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(
                    f"{where}.patterns[{position}]: invalid regular expression {pattern!r}: {exc}",
                    hint="use Python re syntax; escape literal characters such as '.' or '+'",
                ) from None

    # trylast: other transforms (word filters, ...) run first, so the redactor sees the
    # final text and nothing added after it can reintroduce a secret.
    @hookimpl(trylast=True)
    def transform_memory_text(self, text: str, source: str) -> str:
        replacement = self.options.replacement
        text = redact(text, replacement)
        for pattern in self._extra:
            text = pattern.sub(replacement, text)
        return text
