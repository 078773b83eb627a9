"""The built-in secret redactor: a ``transform_memory_text`` plugin.

Every text harnessmem is about to persist (flushed facts, ``memory_save`` entries,
consolidated MEMORY.md, offloaded transcripts, evicted tool output) passes through it. It
replaces secrets with ``[REDACTED]`` and keeps the rest of the sentence, so that "the deploy
key is sk-proj-… and expires Friday" is remembered as "the deploy key is [REDACTED] and
expires Friday". What it recognises:

- private key blocks (``-----BEGIN … PRIVATE KEY-----`` … ``-----END … -----``), PuTTY keys;
- passwords in URLs (``postgres://user:pw@host`` keeps the user and the host; the password
  may hold "/" and "@");
- token formats by prefix (OpenAI / Anthropic ``sk-…``, AWS, GitHub, GitLab, Slack, Google,
  Stripe, Hugging Face, npm, PyPI and some forty more; docs/memory.md lists them), JWTs;
- passwords on command lines (``mysql -p…``, ``sshpass -p …``, ``curl -u user:…``,
  ``--password …``, …);
- ``Authorization: Bearer …`` / ``Basic …`` / ``Token …`` credentials;
- assignments such as ``DB_PASSWORD=…``, ``"api_key": "…"``, ``client_secret: …``;
- prose such as "my password is hunter2" or "the access token is 3f9a…".

Options (``[plugins.settings.redaction]``): ``patterns``, extra regular expressions whose
matches are replaced; ``replacement``, the text put in their place. Disable the plugin with
``plugins.disable = ["redaction"]``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from harnessmem.errors import ConfigError
from harnessmem.memory.redaction_rules import (
    ASSIGNMENT,
    AUTH_HEADER,
    COMMAND,
    FLAG,
    KEY_NAME,
    PRIVATE_KEY,
    PROSE,
    PUTTY_KEY,
    SEPARATOR,
    TOKENS,
    URL_PASSWORD,
    replace_assignment,
    replace_command,
    replace_flag,
    replace_header,
    replace_prose,
    replace_url_password,
)
from harnessmem.plugins import hookimpl, plugin_options

if TYPE_CHECKING:
    from harnessmem.settings import HarnessSettings

__all__ = ["RedactionOptions", "SecretRedactor", "redact"]

PLUGIN_NAME = "redaction"
REPLACEMENT = "[REDACTED]"


# -- where a rule can match ----------------------------------------------------------------
#
# Running every rule over the whole text cost six passes of the regex engine over each
# character, most of the time it takes to evict a 150,000-character tool output. Each rule
# is now tried only where a match can begin, found by substring searches for what it must
# contain (a token's prefix, a keyword, "://"), with ``pattern.match(text, start)`` on the
# whole text, so ``\b`` and the look-arounds see the same characters as before. The rules
# still run one after another, each on the previous one's output, so the result is the
# same as ``pattern.sub`` for each in turn (tests/test_redaction.py checks it against the
# former implementation). Where there are more places to try than about one in _SPARSE
# characters, trying each costs more than a pass: the rule then runs over the whole text.

# Trying one place costs about what a pass over this many characters does.
_SPARSE = 50
_SCHEME_CHARS = string.ascii_letters + string.digits + "+.-"
_SCHEME_START = re.compile(r"\b[A-Za-z]")
# ASSIGNMENT up to its separator: searched for with an end bound, unlike the whole of it.
_ASSIGNMENT_HEAD = re.compile(KEY_NAME + SEPARATOR)
_AFTER_KEY = re.compile(SEPARATOR)
# Each token format holds one of these characters at a fixed distance from its start. A
# pattern that begins with one literal character is scanned for fast; one that begins
# with a set of several is not (about 20x slower), hence one pattern per character.
_TOKEN_ANCHORS = (
    # The character before "-" is tested first: most hyphens (drwxr-xr-x) stop there.
    (
        re.compile(
            r"-(?<=[kstpiKUEXxy]-)(?:(?<=sk-)|(?<=gl[a-z]{2}-)|(?<=gl[a-z]{3}-)"
            r"|(?<=gl[a-z]{4}-)|(?<=gl[a-z]{5}-)|(?<=xapp-)|(?<=pypi-)|(?<=PMAK-)|(?<=NRAK-)"
            r"|(?<=HRKU-)|(?<=AGE-)|(?<=GOCSPX-)|(?<=xai-)|(?<=pplx-)|(?<=key-))"
        ),
        (2, 3, 4, 5, 6, 7),
    ),
    (re.compile(r"xox(?=[abposr]-)"), (0,)),
    (
        re.compile(
            r"_(?:(?<=[rs]k_)|(?<=hf_)|(?<=r8_)|(?<=gh._)|(?<=npm_)|(?<=api_)|(?<=do._)"
            r"|(?<=lin_)|(?<=sbp_)|(?<=glc_)|(?<=glsa_)|(?<=gsk_)|(?<=ntn_)|(?<=ops_)"
            r"|(?<=shp.._)|(?<=whsec_)|(?<=sntry._)|(?<=secret_)|(?<=github_))"
        ),
        (2, 3, 4, 5, 6),
    ),
    (
        re.compile(
            r"\.(?<=[Gpsbr91]\.)(?:(?<=SG\.)|(?<=dp\.)|(?<=hv.\.)|(?<=ya29\.)|(?<=dt0c01\.)"
            r"|(?<=\.atlasv1\.))"
        ),
        (2, 3, 4, 6, 22),
    ),
    (re.compile(r"A(?=KIA|SIA|GPA|IDA|ROA|NPA|Iza|TATT3|A[CM])"), (0, 1)),
    (re.compile(r"J(?<=eyJ)"), (2,)),
    (
        re.compile(r":(?=AA|//(?:hooks\.slack\.com/|(?:ptb\.|canary\.)?discord(?:app)?\.com/))"),
        (5, 8, 9, 10),
    ),
    (re.compile(r"~(?<=Q~)"), (5,)),
    (re.compile(r"SK(?=[0-9a-fA-F]{32})"), (0,)),
    (re.compile(r"dapi(?=[0-9a-f]{32})"), (0,)),
)
# The words every key that _SECRET_KEY takes ends with, by the word searched for.
_KEY_ENDINGS = {
    "pass": ("pass", "passwd", "password", "passphrase", "passcode"),
    "pwd": ("pwd",),
    "secret": ("secret",),
    "key": ("key", "key_base", "key-base"),
    "token": ("token",),
    "auth": ("auth",),
    "cred": ("cred", "creds", "credential", "credentials"),
}
# The words each FLAG key ends with, by the word searched for.
_FLAG_WORDS = ("pass", "pwd", "secret", "key", "token")
_FLAG_CHARS = string.ascii_letters + string.digits + "-_"
# The commands of COMMAND searched for by name (the others are found from "pass"): on
# each line holding a flag, or in the whole text when more than _FLAG_LINES lines do.
_FLAG_LINES = 32
_COMMAND_WORDS = ("mysql", "mariadb", "redis-cli", "docker", "curl", "smbclient")
# Where a keyword of PROSE starts, before a word it contains ("api key": 4 before "key").
_PROSE_OFFSETS = {
    "pass": (0,),
    "pwd": (0,),
    "pin": (0,),
    "secret": (0,),
    "key": (4, 7),
    "token": (0, 5, 7),
}
# The characters besides A-Z that case-insensitive patterns take for a-z and that
# str.lower() does not lower to them (it does KELVIN SIGN; U+0130 it makes two characters).
_FOLD_CHARS = "\u0130\u0131\u017f"
_FOLD = str.maketrans(dict.fromkeys(_FOLD_CHARS[:2], "i") | {_FOLD_CHARS[2]: "s"})


class _Dense(Exception):
    """More places to try one by one than a pass over the whole text would cost."""


def _limit(text: str) -> int:
    return len(text) // _SPARSE + 8


def _find_all(text: str, needle: str, limit: int) -> list[int]:
    """Every index of ``needle`` in ``text``; :class:`_Dense` past ``limit`` of them."""
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        if len(found) == limit:
            raise _Dense
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _sorted(starts: Iterable[int], limit: int) -> list[int]:
    found = sorted(set(starts))
    if len(found) > limit:
        raise _Dense
    return found


def _run_start(text: str, end: int, chars: str | None = None) -> int:
    """Start of the run of ``chars`` (white space when None) that ends at ``end``."""
    width = 64
    while True:
        low = max(0, end - width)
        kept = len(text[low:end].rstrip(chars))
        if kept or low == 0:
            return low + kept
        width *= 8


def _lines_with(text: str, needle: str, most: int) -> list[tuple[int, int]] | None:
    """(start, end) of each line holding ``needle``; None past ``most`` such lines."""
    spans: list[tuple[int, int]] = []
    at = text.find(needle)
    while at >= 0:
        if len(spans) == most:
            return None
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        spans.append((text.rfind("\n", 0, at) + 1, end))
        at = text.find(needle, end)
    return spans


def _word_start(text: str, end: int) -> int:
    """Start of the run of non-white-space characters that ends at ``end``."""
    low = max(0, end - 256)
    while True:
        piece = text[low:end]
        split = (
            len(piece) - len(piece.split()[-1]) if piece and not piece[-1].isspace() else len(piece)
        )
        if split or low == 0:
            return low + split
        low = max(0, low - 2048)


def _run_end(text: str, start: int) -> int:
    """End of the run of white space that starts at ``start``."""
    width = 64
    while True:
        high = min(len(text), start + width)
        left = len(text[start:high].lstrip())
        if left or high == len(text):
            return high - left
        width *= 8


def _fold(text: str) -> str:
    """``text`` lowercased to the same length: a word found in it is where ``(?i)`` finds it."""
    if text.isascii():
        return text.lower()
    if any(ch in text for ch in _FOLD_CHARS):
        text = text.translate(_FOLD)
    return text.lower()


class _Words:
    """Where the keywords of the header, assignment and prose rules occur in one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.limit = _limit(text)
        self._folded = _fold(text)
        self._found: dict[str, list[int]] = {}

    def __call__(self, word: str) -> list[int]:
        """Indexes of ``word`` (lowercase), found case-insensitively as ``(?i)`` does."""
        if (found := self._found.get(word)) is None:
            found = self._found[word] = _find_all(self._folded, word, self.limit)
        return found

    def header_starts(self) -> list[int]:
        """Where AUTH_HEADER can match."""
        text, limit = self.text, self.limit
        found = (
            *self("token"),
            *_find_all(text, "Bearer", limit),
            *_find_all(text, "Basic", limit),
        )
        return _sorted(found, limit)

    def command_starts(self) -> list[int]:
        """Where COMMAND can match: at each command's name on a line that holds a flag
        (a space or tab, then "-"), or anywhere when many lines do; sshpass, htpasswd and
        .netrc's "login … password" from the "pass" in them (a word searched for anyway)."""
        text, folded = self.text, self._folded
        found: list[int] = []
        spans = _lines_with(text, " -", _FLAG_LINES)
        tabs = _lines_with(text, "\t-", _FLAG_LINES)
        if spans is None or tabs is None or len(spans) + len(tabs) > _FLAG_LINES:
            found += (at for word in _COMMAND_WORDS for at in self(word))
        else:
            for line_start, line_end in (*spans, *tabs):
                for word in _COMMAND_WORDS:
                    at = folded.find(word, line_start, line_end)
                    while at >= 0:
                        found.append(at)
                        at = folded.find(word, at + 1, line_end)
        for at in self("pass"):
            if folded.startswith("sshpass", at - 3):
                found.append(at - 3)
            if folded.startswith("htpasswd", at - 2):
                found.append(at - 2)
            if folded.startswith("password", at):
                # login USER password: the word before the word before "password".
                user_start = _word_start(text, _run_start(text, at))
                found.append(_run_start(text, user_start) - 5)
        return _sorted((at for at in found if at >= 0), self.limit)

    def flag_starts(self) -> list[int]:
        """Where FLAG can match: where the run of flag characters before a keyword starts,
        if that is a "-" (a match starts after a character that is neither a word character
        nor "-")."""
        text = self.text
        starts = (
            _run_start(text, at, _FLAG_CHARS)
            for word in _FLAG_WORDS
            for at in self(word)
            if at and text[at - 1] in _FLAG_CHARS  # else the run starts with the keyword
        )
        return _sorted((at for at in starts if text.startswith("-", at)), self.limit)

    def prose_starts(self) -> list[int]:
        """Where PROSE can match."""
        return _sorted(
            (
                at - offset
                for word, offsets in _PROSE_OFFSETS.items()
                for at in self(word)
                for offset in offsets
                if at >= offset
            ),
            self.limit,
        )

    def secret_keys(self) -> Iterator[tuple[int, int]]:
        """(start, end) of each word that ends a secret key (case-insensitively)."""
        for word, endings in _KEY_ENDINGS.items():
            for at in self(word):
                for ending in endings:
                    if self._folded.startswith(ending, at):
                        yield at, at + len(ending)


def _url_starts(text: str) -> list[int]:
    """Where URL_PASSWORD can match: where a scheme can start before each "://"."""
    limit = _limit(text)
    return _sorted(
        (
            m.start()
            for colon in _find_all(text, "://", limit)
            for m in _SCHEME_START.finditer(text, _run_start(text, colon, _SCHEME_CHARS), colon)
        ),
        limit,
    )


def _token_starts(text: str) -> list[int]:
    """Where TOKENS can match: at each offset before each anchor character."""
    return _sorted(
        (
            hit.start() - offset
            for anchor, offsets in _TOKEN_ANCHORS
            for hit in anchor.finditer(text)
            for offset in offsets
            if hit.start() >= offset
        ),
        _limit(text),
    )


def _rule(
    pattern: re.Pattern[str],
    text: str,
    starts: Callable[[], list[int]],
    replace: Callable[[re.Match[str]], str],
) -> str:
    """``pattern.sub(replace, text)``, trying only the indexes ``starts()`` returns (every
    one where a match can begin, ascending); over the whole text when it raises _Dense.

    ``text`` itself when nothing changed.
    """
    try:
        found = starts()
    except _Dense:
        return pattern.sub(replace, text)
    pieces: list[str] = []
    copied = consumed = 0
    for start in found:
        if start < consumed or (match := pattern.match(text, start)) is None:
            continue
        consumed = match.end()
        if (new := replace(match)) != match[0]:
            pieces += (text[copied:start], new)
            copied = consumed
    if not pieces:
        return text
    pieces.append(text[copied:])
    return "".join(pieces)


def _safe_start(text: str, before: int, low: int) -> int:
    """An index in ``[low, before]`` that no ASSIGNMENT match spans; ``low`` if none is near.

    Just after a line break in a run of white space that touches no ":" or "=": a match
    holds white space only around its separator and inside a quoted value, which cannot
    span lines.
    """
    for _ in range(8):
        if (index := text.rfind("\n", low, before)) < 0:
            break
        start, end = _run_start(text, index), _run_end(text, index)
        if text[start - 1 : start] not in (":", "=") and text[end : end + 1] not in (":", "="):
            return index + 1
        before = start
    return low


def _redact_assignments(text: str, words: _Words, replacement: str) -> str:
    """``ASSIGNMENT.sub`` with :func:`replace_assignment`, run only near secret keys.

    Only a key that ends with a secret's keyword can change; the matches before it still
    matter (one may swallow the key), so the engine runs from the last safe index before it
    (see :func:`_safe_start`) up to its separator, and never on the stretches between.
    """
    targets: dict[int, int] = {}  # separator -> where the keyword before it starts
    try:
        for start, end in words.secret_keys():
            if after := _AFTER_KEY.match(text, end):
                separator = after.end() - 1
                targets[separator] = min(start, targets.get(separator, start))
    except _Dense:
        return ASSIGNMENT.sub(lambda m: replace_assignment(m, replacement), text)
    pieces: list[str] = []
    copied = consumed = done = 0
    for separator in sorted(targets):
        pos = max(consumed, _safe_start(text, targets[separator], done))
        while head := _ASSIGNMENT_HEAD.search(text, pos, separator + 1):
            if (match := ASSIGNMENT.match(text, head.start())) is None:
                pos = head.end(1)  # the same key from further in fails alike
                continue
            pos = consumed = match.end()
            if (new := replace_assignment(match, replacement)) != match[0]:
                pieces += (text[copied : match.start()], new)
                copied = consumed
        done = separator + 1
    if not pieces:
        return text
    pieces.append(text[copied:])
    return "".join(pieces)


def redact(text: str, replacement: str = REPLACEMENT) -> str:
    """``text`` with every secret the built-in rules recognise replaced by ``replacement``."""
    text = PRIVATE_KEY.sub(replacement, text)
    text = PUTTY_KEY.sub(replacement, text)
    text = _rule(
        URL_PASSWORD,
        text,
        partial(_url_starts, text),
        partial(replace_url_password, replacement=replacement),
    )
    if "\\" in replacement:  # re.sub reads it as a template (r"\g<0>"): keep that
        text = TOKENS.sub(replacement, text)
    else:
        text = _rule(TOKENS, text, partial(_token_starts, text), lambda m: replacement)
    words = _Words(text)
    for pattern, starts, replace in (
        (AUTH_HEADER, _Words.header_starts, replace_header),
        (COMMAND, _Words.command_starts, replace_command),
        (FLAG, _Words.flag_starts, replace_flag),
    ):
        text = _rule(
            pattern, text, partial(starts, words), partial(replace, replacement=replacement)
        )
        if text is not words.text:
            words = _Words(text)
    text = _redact_assignments(text, words, replacement)
    if text is not words.text:
        words = _Words(text)
    return _rule(PROSE, text, words.prose_starts, lambda m: replace_prose(m, replacement))


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
        self.options = plugin_options(settings, PLUGIN_NAME, RedactionOptions)
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
