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
# scheme://user:password@host — the password is what goes. It may hold "/" (people type
# them raw) and "@" when another "@" follows before any "/"; see _url_password for the
# port-and-path look-alike ("http://host:8080/path@v2").
_URL_PASSWORD = re.compile(
    r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)([^\s@/][^\s@]*(?:@[^\s@/]+(?=@))*)(@)"
)
# PuTTY's private key file: header to MAC line.
_PUTTY_KEY = re.compile(r"PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|$)")
_TOKENS = re.compile(
    r"\b(?:"
    r"sk-(?:proj-|ant-(?:api\d+-)?|svcacct-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|gl(?:pat|dt|rt|ptt|soat|cbt|ffct|imt|agent|oas|ft)-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{20,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|[rs]k_(?:live|test|prod)_[0-9A-Za-z]{16,}"
    r"|whsec_[A-Za-z0-9]{24,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|api_org_[A-Za-z0-9]{30,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-AgE[A-Za-z0-9_-]{50,}"
    r"|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"
    r"|do[opr]_v1_[a-f0-9]{64}"
    r"|lin_api_[A-Za-z0-9]{40}"
    r"|sbp_[a-f0-9]{40}"
    r"|glc_[A-Za-z0-9+/]{32,}={0,2}"
    r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
    r"|gsk_[A-Za-z0-9]{48,}"
    r"|r8_[A-Za-z0-9]{37}"
    r"|sntry[su]_[A-Za-z0-9+/=_-]{40,}"
    r"|ntn_[A-Za-z0-9]{40,}"
    r"|secret_[A-Za-z0-9]{43}"
    r"|ops_eyJ[A-Za-z0-9+/=_-]{40,}"
    r"|(?:PMAK-[a-f0-9]{24}-[a-f0-9]{34}|NRAK-[A-Z0-9]{27}|HRKU-[A-Za-z0-9_-]{36,})"
    r"|AGE-SECRET-KEY-1[0-9A-Z]{58}"
    r"|GOCSPX-[A-Za-z0-9_-]{28}"
    r"|xai-[A-Za-z0-9]{60,}"
    r"|pplx-[A-Za-z0-9]{40,}"
    r"|key-[0-9a-f]{32}"
    r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"
    r"|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"
    r"|hv[sbr]\.[A-Za-z0-9_-]{24,}"
    r"|ya29\.[A-Za-z0-9_-]{30,}"
    r"|[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"
    r"|dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"
    r"|ATATT3[A-Za-z0-9_=-]{180,}"
    r"|\d{8,10}:AA[A-Za-z0-9_-]{33}"
    r"|[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"
    r"|SK[0-9a-fA-F]{32}"
    r"|dapi[a-f0-9]{32}"
    r"|EAA[CM][A-Za-z0-9]{100,}"
    r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}"
    r"|https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}"
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
    r"|(?:account|master|encryption|signing|license|app|client)[_-]?key|secret[_-]?key[_-]?base"
)
# key = value / "key": "value"; the key may carry a prefix such as DB_ or aws_. Any
# identifier before ":" or "=" matches here (cheap: no keyword alternation at every
# position); the replacement checks that it ends with a secret's keyword.
_KEY = r"\b([A-Za-z0-9_.-]+)"
_SEPARATOR = r"""["']?\s*[:=]"""
# A quoted value may hold backslash escapes: arguments are JSON text ("pa\\"ss").
_ASSIGNMENT = re.compile(
    rf"""{_KEY}({_SEPARATOR}\s*)("(?:[^"\\\n]|\\.)+"|'(?:[^'\\\n]|\\.)+'|[^\s"',;]+)"""
)
# "pass" only as a word of its own (DB_PASS, smtp.pass), not "bypass" or "compass".
_PASS_KEY = re.compile(r"(?i)(?:^|[_.-])pass$")
_SECRET_KEY = re.compile(
    rf"(?i)(?:{_PASSWORD_KEYS}|{_TOKEN_KEYS}|(?:^|[_.-])(?:pass|auth|creds?|credentials?))$"
)
# Values of a "pass" key that are settings, not passwords (first_pass=1, PASS=true).
_SETTING = re.compile(r"(?i)\d{1,3}|true|false|yes|no|on|off|none|null")
_PROSE = re.compile(
    rf"(?i)\b((?:{_PASSWORD_KEYS})|pin(?: code)?|api key|secret key|access key|access token"
    r"|auth token|token|secret)(\s+(?:is|was|are|:)\s+)([\"']?)([^\s\"']+?)(\3)"
    r"(?=[.,;:!?)]*(?:[\s\"'\\]|$))"  # or the end of a JSON string
)
# Passwords on command lines, after the flag of the tool that takes them: mysql -pSECRET,
# sshpass -p SECRET, redis-cli -a SECRET, docker login -p SECRET, curl -u user:SECRET,
# smbclient -U user%SECRET, htpasswd -b file user SECRET, .netrc's "login u password SECRET".
# ``[^\n;|&]*?`` stays within one command of the line.
_ARG = r"[^\n;|&]*?[^\S\n]"
_COMMAND = re.compile(
    r"\b(?:"
    rf"(?:mysql[a-z]*|mariadb[a-z-]*)\b{_ARG}-p(?=[^\s-])"
    rf"|sshpass\b{_ARG}-p[^\S\n]*"
    rf"|redis-cli\b{_ARG}(?:-a|--pass)[^\S\n]+"
    rf"|docker[^\S\n]+login\b{_ARG}-p[^\S\n]+"
    rf"|curl\b{_ARG}(?:-u|--user)(?:[^\S\n]+|=)['\"]?[^\s:'\"]*:"
    rf"|smbclient\b{_ARG}(?:-U|--user)(?:[^\S\n]+|=)['\"]?[^\s%'\"]+%"
    r"|htpasswd[^\S\n]+-[a-zA-Z]*b[a-zA-Z]*(?:[^\S\n]+-\S+)*(?:[^\S\n]+[^\s-]\S*){2}[^\S\n]+"
    r"|login[^\S\n]+\S+[^\S\n]+password[^\S\n]+"
    r")"
    r"""(?:'([^'\n]+)'|"([^"\n]+)"|([^\s'";|&]+))"""
)
_COMMAND_WORDS = ("mysql", "mariadb", "redis-cli", "docker", "curl", "smbclient")
# --password VALUE, --db-token VALUE (with "=" they are assignments).
_FLAG = re.compile(
    r"(?<![\w-])(--?(?:[A-Za-z0-9]+[-_])*(?:password|passwd|passphrase|pass|pwd|token|secret"
    r"|api-?key|access-key|secret-key|private-key|client-secret)[^\S\n]+)"
    r"""(?:'([^'\n]+)'|"([^"\n]+)"|([^\s'";|&]+))"""
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
# _ASSIGNMENT up to its separator: searched for with an end bound, unlike the whole of it.
_ASSIGNMENT_HEAD = re.compile(_KEY + _SEPARATOR)
_AFTER_KEY = re.compile(_SEPARATOR)
_PASSWORD_KEY = re.compile(_PASSWORD_KEYS, re.IGNORECASE)
_PASSWORD_WORD = re.compile(rf"(?i){_PASSWORD_KEYS}|pin(?: code)?")
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
            r"\.(?<=[Gpsbr91]\.)(?:(?<=SG\.)|(?<=dp\.)|(?<=hv.\.)|(?<=ya29\.)|(?<=dt0c01\.))"
        ),
        (2, 3, 4, 6),
    ),
    (re.compile(r"\.atlasv1\."), (14,)),
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
    "key": ("key",),
    "token": ("token",),
    "auth": ("auth",),
    "cred": ("cred", "creds", "credential", "credentials"),
    "base": ("base",),
}
# The words each _FLAG key ends with, by the word searched for.
_FLAG_WORDS = ("pass", "pwd", "secret", "key", "token")
_FLAG_CHARS = string.ascii_letters + string.digits + "-_"
# Where a keyword of _PROSE starts, before a word it contains ("api key": 4 before "key").
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
        """Where _AUTH_HEADER can match."""
        text, limit = self.text, self.limit
        found = (
            *self("token"),
            *_find_all(text, "Bearer", limit),
            *_find_all(text, "Basic", limit),
        )
        return _sorted(found, limit)

    def command_starts(self) -> list[int]:
        """Where _COMMAND can match: at each command's name; sshpass, htpasswd and .netrc's
        "login … password" from the "pass" in them (a word searched for anyway)."""
        text = self.text
        found = [at for word in _COMMAND_WORDS for at in self(word)]
        for at in self("pass"):
            found += (at - 3, at - 2)  # sshpass, htpasswd
            # login USER password: the word before the word before "password".
            user_end = _run_start(text, at)
            user_start = _word_start(text, user_end)
            found.append(_run_start(text, user_start) - 5)
        return _sorted((at for at in found if at >= 0), self.limit)

    def flag_starts(self) -> list[int]:
        """Where _FLAG can match: where the run of flag characters before a keyword starts
        (a match starts after a character that is neither a word character nor "-")."""
        text = self.text
        return _sorted(
            (_run_start(text, at, _FLAG_CHARS) for word in _FLAG_WORDS for at in self(word)),
            self.limit,
        )

    def prose_starts(self) -> list[int]:
        """Where _PROSE can match."""
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
    """Where _URL_PASSWORD can match: where a scheme can start before each "://"."""
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
    """Where _TOKENS can match: at each offset before each anchor character."""
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
    """An index in ``[low, before]`` that no _ASSIGNMENT match spans; ``low`` if none is near.

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


def _url_password(match: re.Match[str], replacement: str) -> str:
    port, slash, _ = match[2].partition("/")
    if slash and port.isdigit():  # http://host:8080/path@v2: a port and a path
        return match[0]
    return f"{match[1]}{replacement}{match[3]}"


def _quoted(match: re.Match[str], first: int, replacement: str) -> str:
    """``match`` with the value in groups ``first`` ('…'), +1 ("…") or +2 (bare) replaced."""
    group = next(g for g in (first, first + 1, first + 2) if match[g] is not None)
    head = match[0][: match.start(group) - match.start()]
    quote = "'" if group == first else '"' if group == first + 1 else ""
    return f"{head}{replacement}{quote}"


def _reference(value: str, replacement: str) -> bool:
    """A value that names a secret instead of holding one: $PASS, ${PASS}, $(cat f),
    %PASS%, <password>, {{ pass }} (or the replacement itself)."""
    return value == replacement or _REFERENCE.match(value) is not None


_REFERENCE = re.compile(r"\$[A-Z_{(]|%[A-Za-z_]\w*%|\{\{|<[A-Za-z][\w -]*>?$")


def _command(match: re.Match[str], replacement: str) -> str:
    value = match[1] or match[2] or match[3]
    if _reference(value, replacement):
        return match[0]
    return _quoted(match, 1, replacement)


def _flag(match: re.Match[str], replacement: str) -> str:
    key, value = match[1], match[2] or match[3] or match[4]
    if _reference(value, replacement) or value[0] == "-" or key.lstrip("-").startswith("no-"):
        return match[0]
    if _FLAG_PASSWORD.search(key):
        # A typed password holds a digit, a capital or a sign; "--password flag" is prose.
        if value.isalpha() and value.islower() and len(value) < 12:
            return match[0]
    elif not _is_secret_like(value):
        return match[0]
    return _quoted(match, 2, replacement)


_FLAG_PASSWORD = re.compile(r"pass|pwd")


def _assignment(match: re.Match[str], replacement: str) -> str:
    key, sep, value = match[1], match[2], match[3]
    bare = value.strip("\"'")
    if not _SECRET_KEY.search(key):
        # "cmd": "DB_PASSWORD=…": the quoted value of another key may hold an assignment.
        if len(value) > 2 and value[0] in "\"'" and ("=" in bare or ":" in bare):
            inner = _ASSIGNMENT.sub(partial(_assignment, replacement=replacement), value[1:-1])
            return f"{key}{sep}{value[0]}{inner}{value[-1]}"
        return match[0]
    if not bare or _reference(bare, replacement):
        return match[0]
    if _PASS_KEY.search(key):
        if _SETTING.fullmatch(bare):
            return match[0]
    elif not _PASSWORD_KEY.search(key) and not _is_secret_like(bare):
        return match[0]
    quote = value[0] if value[0] in "\"'" else ""
    return f"{key}{sep}{quote}{replacement}{quote}"


def _redact_assignments(text: str, words: _Words, replacement: str) -> str:
    """``_ASSIGNMENT.sub`` with :func:`_assignment`, run only near secret keys.

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
        return _ASSIGNMENT.sub(lambda m: _assignment(m, replacement), text)
    pieces: list[str] = []
    copied = consumed = done = 0
    for separator in sorted(targets):
        pos = max(consumed, _safe_start(text, targets[separator], done))
        while head := _ASSIGNMENT_HEAD.search(text, pos, separator + 1):
            if (match := _ASSIGNMENT.match(text, head.start())) is None:
                pos = head.end(1)  # the same key from further in fails alike
                continue
            pos = consumed = match.end()
            if (new := _assignment(match, replacement)) != match[0]:
                pieces += (text[copied : match.start()], new)
                copied = consumed
        done = separator + 1
    if not pieces:
        return text
    pieces.append(text[copied:])
    return "".join(pieces)


def _prose(match: re.Match[str], replacement: str) -> str:
    key, verb, quote, value = match[1], match[2], match[3], match[4]
    if value == replacement or value.casefold() in _NOT_SECRETS:
        return match[0]
    if not _PASSWORD_WORD.fullmatch(key) and not _is_secret_like(value):
        return match[0]
    return f"{key}{verb}{quote}{replacement}{quote}"


def redact(text: str, replacement: str = REPLACEMENT) -> str:
    """``text`` with every secret the built-in rules recognise replaced by ``replacement``."""
    text = _PRIVATE_KEY.sub(replacement, text)
    text = _PUTTY_KEY.sub(replacement, text)
    text = _rule(
        _URL_PASSWORD,
        text,
        partial(_url_starts, text),
        partial(_url_password, replacement=replacement),
    )
    if "\\" in replacement:  # re.sub reads it as a template (r"\g<0>"): keep that
        text = _TOKENS.sub(replacement, text)
    else:
        text = _rule(_TOKENS, text, partial(_token_starts, text), lambda m: replacement)
    words = _Words(text)
    for pattern, starts, replace in (
        (_AUTH_HEADER, _Words.header_starts, _header),
        (_COMMAND, _Words.command_starts, _command),
        (_FLAG, _Words.flag_starts, _flag),
    ):
        text = _rule(
            pattern, text, partial(starts, words), partial(replace, replacement=replacement)
        )
        if text is not words.text:
            words = _Words(text)
    text = _redact_assignments(text, words, replacement)
    if text is not words.text:
        words = _Words(text)
    return _rule(_PROSE, text, words.prose_starts, lambda m: _prose(m, replacement))


def _header(match: re.Match[str], replacement: str) -> str:
    return f"{match[1]}{match[2]}{replacement}"


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
