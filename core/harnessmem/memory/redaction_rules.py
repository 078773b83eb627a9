"""The rules of the secret redactor (see :mod:`harnessmem.memory.redaction`): what a secret looks
like, and what each match is replaced with.

Public for a plugin that looks for secrets its own way (a scan before text leaves for a model,
a check of a file outside the workspace) with the same definitions, and for the test that
checks :func:`~harnessmem.memory.redaction.redact` against a pass of each rule over the whole
text. :func:`~harnessmem.memory.redaction.redact` is what applies them, in order.

Each pattern is run where its finder in redaction.py says a match can begin; a change
here needs its finder checked (tests/test_redaction.py compares both with a pass over the
whole text). The formats were compared with gitleaks' default rules and detect-secrets'
plugins for coverage; the patterns are our own.
"""

from __future__ import annotations

import re
from functools import partial

__all__ = [
    "ASSIGNMENT",
    "AUTH_HEADER",
    "COMMAND",
    "FLAG",
    "KEY_NAME",
    "NOT_SECRETS",
    "PASSWORD_KEYS",
    "PRIVATE_KEY",
    "PROSE",
    "PUTTY_KEY",
    "SEPARATOR",
    "TOKENS",
    "URL_PASSWORD",
    "is_secret_like",
    "replace_assignment",
    "replace_command",
    "replace_flag",
    "replace_header",
    "replace_prose",
    "replace_url_password",
]

PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:[\s\S]*?-----END \1-----|[A-Za-z0-9+/=\s\\]*)"
)
# scheme://user:password@host — the password is what goes. It may hold "/" (people type
# them raw) and "@" when another "@" follows before any "/"; see replace_url_password for the
# port-and-path look-alike ("http://host:8080/path@v2").
URL_PASSWORD = re.compile(
    r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)([^\s@/][^\s@]*(?:@[^\s@/]+(?=@))*)(@)"
)
# PuTTY's private key file: header to MAC line.
PUTTY_KEY = re.compile(r"PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|$)")
TOKENS = re.compile(
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
AUTH_HEADER = re.compile(
    r"\b(Bearer|Basic|Token)(\s+)(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{16,}"
)
PASSWORD_KEYS = r"password|passwd|pwd|passphrase|passcode"
_TOKEN_KEYS = (
    r"secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token"
    r"|access[_-]?token|refresh[_-]?token|client[_-]?secret|session[_-]?token|token"
    r"|(?:account|master|encryption|signing|license|app|client)[_-]?key|secret[_-]?key[_-]?base"
)
# key = value / "key": "value"; the key may carry a prefix such as DB_ or aws_. Any
# identifier before ":" or "=" matches here (cheap: no keyword alternation at every
# position); the replacement checks that it ends with a secret's keyword.
KEY_NAME = r"\b([A-Za-z0-9_.-]+)"
SEPARATOR = r"""["']?\s*[:=]"""
# A quoted value may hold backslash escapes: arguments are JSON text ("pa\\"ss").
ASSIGNMENT = re.compile(
    rf"""{KEY_NAME}({SEPARATOR}\s*)("(?:[^"\\\n]|\\.)+"|'(?:[^'\\\n]|\\.)+'|[^\s"',;]+)"""
)
# "pass" only as a word of its own (DB_PASS, smtp.pass), not "bypass" or "compass".
_PASS_KEY = re.compile(r"(?i)(?:^|[_.-])pass$")
_SECRET_KEY = re.compile(
    rf"(?i)(?:{PASSWORD_KEYS}|{_TOKEN_KEYS}|(?:^|[_.-])(?:pass|auth|creds?|credentials?))$"
)
# Values of a "pass" key that are settings, not passwords (first_pass=1, PASS=true).
_SETTING = re.compile(r"(?i)\d{1,3}|true|false|yes|no|on|off|none|null")
PROSE = re.compile(
    rf"(?i)\b((?:{PASSWORD_KEYS})|pin(?: code)?|api key|secret key|access key|access token"
    r"|auth token|token|secret)(\s+(?:is|was|are|:)\s+)([\"']?)([^\s\"']+?)(\3)"
    r"(?=[.,;:!?)]*(?:[\s\"'\\]|$))"  # or the end of a JSON string
)
# Passwords on command lines, after the flag of the tool that takes them: mysql -pSECRET,
# sshpass -p SECRET, redis-cli -a SECRET, docker login -p SECRET, curl -u user:SECRET,
# smbclient -U user%SECRET, htpasswd -b file user SECRET, .netrc's "login u password SECRET".
# ``[^\n;|&]*?`` stays within one command of the line.
_ARG = r"[^\n;|&]*?[ \t]"  # the blank before the flag: its finder looks for " -" and "\t-"
COMMAND = re.compile(
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
# --password VALUE, --db-token VALUE (with "=" they are assignments).
FLAG = re.compile(
    r"(?<![\w-])(--?(?:[A-Za-z0-9]+[-_])*(?:password|passwd|passphrase|pass|pwd|token|secret"
    r"|api-?key|access-key|secret-key|private-key|client-secret)[^\S\n]+)"
    r"""(?:'([^'\n]+)'|"([^"\n]+)"|([^\s'";|&]+))"""
)
# Words that follow "password is" without being one ("the password is changed weekly").
NOT_SECRETS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "a an the not no now still too very being been changed reset set updated incorrect "
        "wrong expired required stored saved missing empty unknown invalid valid correct same "
        "different weak strong secure insecure long short new old needed rotated shared "
        "hidden public private available here there in on at"
    ).split()
)


def is_secret_like(value: str) -> bool:
    """For tokens and keys in prose: only values that look generated, not words."""
    return len(value) >= 16 or (len(value) >= 8 and any(ch.isdigit() for ch in value))


_PASSWORD_KEY = re.compile(PASSWORD_KEYS, re.IGNORECASE)
_PASSWORD_WORD = re.compile(rf"(?i){PASSWORD_KEYS}|pin(?: code)?")


def replace_url_password(match: re.Match[str], replacement: str) -> str:
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


def replace_command(match: re.Match[str], replacement: str) -> str:
    value = match[1] or match[2] or match[3]
    if _reference(value, replacement):
        return match[0]
    return _quoted(match, 1, replacement)


def replace_flag(match: re.Match[str], replacement: str) -> str:
    key, value = match[1], match[2] or match[3] or match[4]
    if _reference(value, replacement) or value[0] == "-" or key.lstrip("-").startswith("no-"):
        return match[0]
    if _FLAG_PASSWORD.search(key):
        # A typed password holds a digit, a capital or a sign; "--password flag" is prose.
        if value.isalpha() and value.islower() and len(value) < 12:
            return match[0]
    elif not is_secret_like(value):
        return match[0]
    return _quoted(match, 2, replacement)


_FLAG_PASSWORD = re.compile(r"pass|pwd")


def replace_assignment(match: re.Match[str], replacement: str) -> str:
    key, sep, value = match[1], match[2], match[3]
    bare = value.strip("\"'")
    if not _SECRET_KEY.search(key):
        # "cmd": "DB_PASSWORD=…": the quoted value of another key may hold an assignment.
        if len(value) > 2 and value[0] in "\"'" and ("=" in bare or ":" in bare):
            inner = ASSIGNMENT.sub(
                partial(replace_assignment, replacement=replacement), value[1:-1]
            )
            return f"{key}{sep}{value[0]}{inner}{value[-1]}"
        return match[0]
    if not bare or _reference(bare, replacement):
        return match[0]
    if _PASS_KEY.search(key):
        if _SETTING.fullmatch(bare):
            return match[0]
    elif not _PASSWORD_KEY.search(key) and not is_secret_like(bare):
        return match[0]
    quote = value[0] if value[0] in "\"'" else ""
    return f"{key}{sep}{quote}{replacement}{quote}"


def replace_prose(match: re.Match[str], replacement: str) -> str:
    key, verb, quote, value = match[1], match[2], match[3], match[4]
    if value == replacement or value.casefold() in NOT_SECRETS:
        return match[0]
    if not _PASSWORD_WORD.fullmatch(key) and not is_secret_like(value):
        return match[0]
    return f"{key}{verb}{quote}{replacement}{quote}"


def replace_header(match: re.Match[str], replacement: str) -> str:
    return f"{match[1]}{match[2]}{replacement}"
