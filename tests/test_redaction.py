"""The built-in secret redactor (a transform_memory_text plugin)."""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem import ConfigError, HarnessSettings, MemoryHarness, hookimpl
from harnessmem.memory import redaction_rules as rules
from harnessmem.memory.redaction import REPLACEMENT, SecretRedactor, redact
from harnessmem.memory.redaction_rules import (
    ASSIGNMENT,
    AUTH_HEADER,
    NOT_SECRETS,
    PASSWORD_KEYS,
    PRIVATE_KEY,
    PROSE,
    TOKENS,
    URL_PASSWORD,
    is_secret_like,
)
from harnessmem.plugins import HookFacade, make_plugin_manager

OPENAI = "sk-proj-AbCdEf1234567890abcdefGHIJ"

EXAMPLES = [
    (
        f"My OpenAI key is {OPENAI} and it expires Friday.",
        "My OpenAI key is [REDACTED] and it expires Friday.",
    ),
    (
        "Reports come from postgres://admin:hunter2@db.internal:5432/app daily.",
        "Reports come from postgres://admin:[REDACTED]@db.internal:5432/app daily.",
    ),
    (
        "run with DB_PASSWORD=s3cr3t-pass; then make",
        "run with DB_PASSWORD=[REDACTED]; then make",
    ),
    ('{"api_key": "abcd1234efgh5678", "n": 2}', '{"api_key": "[REDACTED]", "n": 2}'),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = [REDACTED]",
    ),
    ("my password is hunter2.", "my password is [REDACTED]."),
    ("The wifi passcode is 'tulip-42' at home", "The wifi passcode is '[REDACTED]' at home"),
    ("the access token is 3f9a2b7c9d1e, use it", "the access token is [REDACTED], use it"),
    ("Authorization: Bearer abcdef1234567890abcdef", "Authorization: Bearer [REDACTED]"),
    ("AWS key AKIAIOSFODNN7EXAMPLE was rotated", "AWS key [REDACTED] was rotated"),
    ("ghp_" + "a1" * 18 + " is the CI token", "[REDACTED] is the CI token"),
    ("slack xoxb-1234567890-abcdefghij posts", "slack [REDACTED] posts"),
    ("google AIza" + "B" * 35 + " quota", "google [REDACTED] quota"),
    ("stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + " ok", "stripe [REDACTED] ok"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N done",
        "jwt [REDACTED] done",
    ),
    (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc==\n"
        "-----END RSA PRIVATE KEY-----\nkeep this line",
        "key:\n[REDACTED]\nkeep this line",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "[REDACTED]"),
]
ORDINARY = [
    "The password is changed weekly.",
    "Token is valid until Friday",
    "Basic authentication is enabled",
    "max_tokens=4000 and a token budget: 5",
    "The key: be kind. Note: call Ana at 5",
    "see https://example.com/path?q=1 for the docs",
    "Ana's secret is that she sings",
]


@pytest.mark.parametrize(("text", "expected"), EXAMPLES)
def test_secrets_go_and_the_sentence_stays(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected, "idempotent"


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def facade(**plugin_settings: object) -> HookFacade:
    settings = HarnessSettings.load(plugins={"settings": {"redaction": plugin_settings}})
    pm = make_plugin_manager(settings.plugins, [])
    hooks = HookFacade(pm)
    hooks.configure(settings)
    return hooks


def test_registered_as_a_builtin_plugin_with_options() -> None:
    hooks = facade(patterns=[r"ACME-\d{4}"], replacement="<secret>")
    assert "redaction" in hooks.plugin_names()
    text = f"ticket ACME-1234 uses {OPENAI}"
    assert hooks.transform_memory_text(text, "flush") == "ticket <secret> uses <secret>"


def test_bad_options_name_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.settings\.redaction\.patterns\[0\]"):
        facade(patterns=["(unclosed"])
    with pytest.raises(ConfigError, match=r"plugins\.settings\.redaction\.colour"):
        facade(colour="red")


def test_runs_after_other_transforms(tmp_path: Path) -> None:
    class AddsASecret:
        @hookimpl
        def transform_memory_text(self, text: str) -> str:
            return f"{text} (copied with key {OPENAI})"

    with MemoryHarness.open(
        tmp_path / "ws", plugins=[AddsASecret()], maintenance={"enabled": False}
    ) as harness:
        assert harness.kernel.hooks.transform_memory_text("fact", "save") == (
            "fact (copied with key [REDACTED])"
        )


def test_can_be_disabled(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws", plugins={"disable": ["redaction"]}, maintenance={"enabled": False}
    ) as harness:
        assert harness.kernel.hooks.transform_memory_text(OPENAI, "save") == OPENAI


def test_plugin_class_default_options() -> None:
    plugin = SecretRedactor()
    assert plugin.transform_memory_text(f"use {OPENAI}", "flush") == "use [REDACTED]"


# -- the same redaction as the former implementation ---------------------------------------
#
# redact() tries each rule only where a match can begin (see "where a rule can match" in
# harnessmem/redaction.py). The oracle below is the implementation it replaced: every rule
# run with pattern.sub over the whole text, one after another. Both must agree on every
# text, secret or not.


def _former_redact(text: str, replacement: str = REPLACEMENT) -> str:
    """redact() as it was: one pass of pattern.sub over the whole text per rule."""
    text = PRIVATE_KEY.sub(replacement, text)
    text = rules.PUTTY_KEY.sub(replacement, text)
    text = URL_PASSWORD.sub(lambda m: rules.replace_url_password(m, replacement), text)
    text = TOKENS.sub(replacement, text)
    text = AUTH_HEADER.sub(lambda m: f"{m[1]}{m[2]}{replacement}", text)
    text = rules.COMMAND.sub(lambda m: rules.replace_command(m, replacement), text)
    text = rules.FLAG.sub(lambda m: rules.replace_flag(m, replacement), text)

    text = ASSIGNMENT.sub(lambda m: rules.replace_assignment(m, replacement), text)

    def prose(match: re.Match[str]) -> str:
        key, verb, quote, value = match[1], match[2], match[3], match[4]
        if value == replacement or value.casefold() in NOT_SECRETS:
            return match[0]
        is_password = re.fullmatch(rf"(?i){PASSWORD_KEYS}|pin(?: code)?", key) is not None
        if not is_password and not is_secret_like(value):
            return match[0]
        return f"{key}{verb}{quote}{replacement}{quote}"

    return PROSE.sub(prose, text)


# One or more of each kind the rules recognise, and near misses that a rule starts on and
# then rejects (or that a neighbouring match swallows).
SECRETS = [
    *(text for text, _ in EXAMPLES),
    "-----BEGIN ENCRYPTED PRIVATE KEY-----",
    "postgres://admin:hunter2@db.internal:5432/app",
    "git+ssh://u:p@h",
    "https://:tok@example.com",
    "a.b://x:y@",
    OPENAI,
    "sk-ant-api03-" + "Ab1_" * 6,
    "sk-svcacct-" + "z" * 20,
    "AKIAIOSFODNN7EXAMPLE",
    "ASIA" + "Z9" * 8,
    "ghp_" + "a1" * 18,
    "gho_" + "B" * 30,
    "github_pat_" + "x_" * 11,
    "glpat-" + "q" * 20,
    "xoxb-1234567890-abcdefghij",
    "xoxp-1-2-3-4-5-6-7-8",
    "AIza" + "B" * 35,
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "rk_test_" + "0" * 16,
    "hf_" + "H" * 30,
    "npm_" + "n" * 36,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "Basic dXNlcjpwYXNzd29yZDEyMzQ1",
    "Token 0123456789abcdef0123",
    "DB_PASSWORD=s3cr3t-pass",
    "MYSQL_PWD=hunter2",
    "GPG_PASSPHRASE=correcthorse",
    "door.passcode: 4711",
    "client_secret: 'abcdefgh12345678'",
    "passwd:\n  hunter2",
    'PRIVATE-KEY"\t= "v a l u e"',
    "x.secret_key='k'",
    "refresh_token=abc12345",
    "API KEY was abcdef12345678!",
    "pin code: 1234)",
    "Secret are 'zzzzzzzzzzzzzzzzzz'",
    "Pa\u017f\u017fWORD is \u017fecret99",
    "Tok\u0130n=0123456789abcdef",
    "TOKEN\u212a = 0123456789abcdef",
    "mysql://root:pa55/w0rd!Zq@10.0.0.5/app",
    "postgres://u:p@ss@host/db",
    "mysql -u root -pTr0ub4dor3Zeta",
    "sshpass -p 'S5hpassHunter22' ssh h",
    "redis-cli -a R3dis99 ping",
    "docker login -u a -p D0cker9 r",
    "curl -u ana:Curl7pw https://x",
    "smbclient //s/x -U ana%Smb9",
    "htpasswd -bc f admin Ht9pw",
    "machine m login ana password N3trc",
    "tool --password Hunter2 --db-token " + "t0" * 9,
    '{"cmd": "DB_PASS=hunter2"}',
    "SMTP_PASS=Smtp9 AccountKey=" + "k1" * 20,
    'my password is Hunter2."',
    "glrt-" + "r" * 20,
    "xapp-1-" + "A1" * 10,
    "pypi-AgE" + "p" * 50,
    "shpat_" + "a1" * 16,
    "SG." + "s" * 22 + "." + "g" * 43,
    "ya29." + "y" * 30,
    "abcdefghij1234.atlasv1." + "t" * 60,
    "123456789:AA" + "b" * 33,
    "abc8Q~" + "z" * 32,
    "SK" + "0a" * 16,
    "dapi" + "0f" * 16,
    "EAAC" + "e" * 100,
    "https://hooks.slack.com/services/T0/B0/" + "h" * 24,
    "PuTTY-User-Key-File-3: x\nPrivate-MAC: 0a",
]
NEAR_MISSES = [
    *ORDINARY,
    "drwxr-xr-x  2 agent agent 4096 Nov 30 12:00 some/build/output/path.o",
    "task-force disk_usage work_dir ghost_ hf_x npm_i AKIA eyJ",
    "x=password=abc",
    "x =\n password=abc12345",
    "x\n=password=abc12345",
    "token is password is hunter2",
    "a=b.password=xyz",
    "key=",
    "secret='unterminated",
    'password""=x',
    ":=\n\n=:",
    "passwordpassword=1",
    "api_key\n\n:\n\n1234567890abcdef",
    "\u0131\u017f\u0130\u212a",
    "http://host:8080/path@v2",
    "mysql -u root -p app",
    "sshpass -f f ssh h",
    "login ana then password reset",
    "tool --password $DB_PASS --token-file t",
    "first_pass=1 compass=north",
    "password=${DB_PASSWORD}",
    "-pass- _api_ .SG. ~Q~ :AA SKU dapi EAA xox- .atlasv1.",
]
_TEXT = st.text(
    alphabet="aAkeyptsordwn0123456789 \n\t\xa0:=\"',;.!?)-_/@+%~\\\u00e9\u0131\u017f\u0130\u212a",
    max_size=30,
)
_FRAGMENT = st.one_of(st.sampled_from(SECRETS), st.sampled_from(NEAR_MISSES), _TEXT)
_JOIN = st.sampled_from(["", " ", "\n", "=", ": ", "'", '"', ",", "\n\n  "])
_REPLACEMENT = st.sampled_from([REPLACEMENT, "<secret>", "", "***", r"[\g<0>]"])


@st.composite
def _texts(draw: st.DrawFn) -> str:
    """Secrets and near misses with random text between them: at the start, at the end,
    adjacent (joined by nothing) and overlapping (cut mid-way or fused with the next)."""
    parts = draw(st.lists(_FRAGMENT, max_size=8))
    text = ""
    for part in parts:
        if draw(st.booleans()):  # cut a fragment: a prefix or suffix of a secret
            cut = draw(st.integers(0, len(part)))
            part = part[:cut] if draw(st.booleans()) else part[cut:]
        text += draw(_JOIN) + part
    return text


# redact() tries a rule's places one by one while there are fewer than about one in 50
# characters (and a few), else it runs the rule over the whole text. Both ways must agree
# with the former implementation: a long run of blank lines after the text leaves every
# rule few enough places to try each; a prefix with a place of every rule every few
# characters (a URL, token anchors, header, command and flag words, keys) makes every rule
# run over the whole text.
_ROOMY = "\n" * 100_000
_CROWDED = "a://ba://b sk-eyJ hf_Q~ Bearer Basic mysql curl docker -key -token keykey pin pwd " * 40
_WAYS = {
    "one-by-one": lambda text: text + _ROOMY,
    "as-is": lambda text: text,
    "whole-text": lambda text: _CROWDED + "\n\n" + text,
}


@pytest.mark.parametrize("way", list(_WAYS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts(), replacement=_REPLACEMENT)
def test_redacts_exactly_what_the_former_implementation_did(
    way: str, text: str, replacement: str
) -> None:
    """One rule tried where it can begin redacts what six whole-text passes did.

    When it fails one-by-one or as-is: a rule of redaction_rules.py can now match where its
    finder in redaction.py (``_url_starts``, ``_token_starts``, ``_Words``,
    ``_TOKEN_ANCHORS``, ``_KEY_ENDINGS``, ``_PROSE_OFFSETS``) does not look; whole-text: the
    fallback of ``_rule`` or ``_redact_assignments``.
    """
    text = _WAYS[way](text)
    assert redact(text, replacement) == _former_redact(text, replacement)


def test_the_generated_texts_hold_secrets() -> None:
    """The property test is only as good as its texts: most must hold something to redact."""
    changed = 0

    @settings(max_examples=200, database=None)
    @given(text=_texts())
    def count(text: str) -> None:
        nonlocal changed
        changed += _former_redact(text) != text

    count()
    assert changed > 60


def test_keywords_written_with_letters_that_fold_are_found() -> None:
    """A keyword is looked for in a lowercased copy of the text, of the same length: every
    character that a ``(?i)`` pattern takes for a-z (the long s for s, the Kelvin sign for k,
    the dotless i and the dotted capital I for i) must be found there as that letter, and
    what follows must stay where it was. Each letter of each secret is written with each
    such character in turn; redact() must agree with the whole-text passes every time.

    When it fails: a new Python release folds more characters; add them to ``_FOLD``.
    """
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    odd = {
        letter: [m[0] for m in re.finditer(f"(?i){letter}", every) if not m[0].isascii()]
        for letter in string.ascii_lowercase
    }
    assert sorted(ch for chars in odd.values() for ch in chars) == sorted(
        "\u0130\u0131\u017f\u212a"
    )
    tried = 0
    for secret in SECRETS:
        for at, char in enumerate(secret):
            for other in odd.get(char.lower(), []):
                text = (
                    f"{secret[:at]}{other}{secret[at + 1 :]} and later the token is 3f9a8b7c6d5e4f"
                )
                assert redact(text) == _former_redact(text), text
                tried += 1
    assert tried > 300  # 402 with the secrets above


def _tool_outputs(shared_file: Callable[[str], Path]) -> Iterator[str]:
    for path in sorted(shared_file("swe-agent").glob("*.traj")):
        trajectory = json.loads(path.read_text(encoding="utf-8"))
        for step in trajectory["trajectory"]:
            yield step["observation"]
        for message in trajectory["history"]:
            if message.get("role") == "tool":
                content = message["content"]
                yield content if isinstance(content, str) else str(content)
    tau = shared_file("tau-bench/gpt-4o-airline-dev.json")
    for run in json.loads(tau.read_text("utf-8")):
        for message in run["traj"]:
            if message.get("role") == "tool":
                yield message["content"]


def test_real_tool_outputs_are_redacted_as_before(shared_file: Callable[[str], Path]) -> None:
    """Real swe-agent and tau-bench tool outputs, alone, all in one, and with secrets put in
    at random places, redact as they did."""
    outputs = list(_tool_outputs(shared_file))
    assert len(outputs) > 100
    for output in outputs:
        assert redact(output) == _former_redact(output)
    whole = "\n".join(outputs)
    assert redact(whole) == _former_redact(whole)
    rng = random.Random(5)
    for output in outputs[:: max(1, len(outputs) // 200)]:
        spliced = output
        for secret in rng.sample(SECRETS, 3):
            at = rng.randrange(len(spliced) + 1)
            spliced = spliced[:at] + secret + spliced[at:]
        assert redact(spliced) == _former_redact(spliced)


def test_a_template_replacement_is_read_as_before() -> None:
    """``re.sub`` read the replacement as a template for keys and tokens; it still does."""
    text = f"{OPENAI} and -----BEGIN EC PRIVATE KEY-----\nabc"
    assert redact(text, r"<\g<0>>") == _former_redact(text, r"<\g<0>>")
    with pytest.raises(re.error):
        redact("nothing secret", r"\q")
