"""The built-in secret redactor (a transform_memory_text plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessmem import ConfigError, HarnessSettings, MemoryHarness, hookimpl
from harnessmem.plugins import HookFacade, make_plugin_manager
from harnessmem.redaction import SecretRedactor, redact

OPENAI = "sk-proj-AbCdEf1234567890abcdefGHIJ"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
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
    ],
)
def test_secrets_go_and_the_sentence_stays(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected, "idempotent"


@pytest.mark.parametrize(
    "text",
    [
        "The password is changed weekly.",
        "Token is valid until Friday",
        "Basic authentication is enabled",
        "max_tokens=4000 and a token budget: 5",
        "The key: be kind. Note: call Ana at 5",
        "see https://example.com/path?q=1 for the docs",
        "Ana's secret is that she sings",
    ],
)
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
        assert harness.hooks.transform_memory_text("fact", "save") == (
            "fact (copied with key [REDACTED])"
        )


def test_can_be_disabled(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws", plugins={"disable": ["redaction"]}, maintenance={"enabled": False}
    ) as harness:
        assert harness.hooks.transform_memory_text(OPENAI, "save") == OPENAI


def test_plugin_class_default_options() -> None:
    plugin = SecretRedactor()
    assert plugin.transform_memory_text(f"use {OPENAI}", "flush") == "use [REDACTED]"
