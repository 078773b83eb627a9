"""Tests for overflow recovery: recognising context-length errors and returning a list that fits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import flight_chat

from harnessmem import ContextOverflowError, MemoryHarness
from harnessmem.backends.overflow import OVERFLOW_PHRASES, is_context_overflow, overflow_limits
from harnessmem.compaction import parse_anchor
from harnessmem.errors import ModelUnavailableError
from harnessmem.messages import validate_messages
from harnessmem.testing import ScriptedModel
from harnessmem.tokens import TokenCounter

Message = dict[str, Any]

SUMMARY = "## SESSION INTENT\nx\n## SUMMARY\ny\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
LAST_USER = "Now compare the two fares and book the cheaper one, please."


class ContextWindowExceededError(Exception):
    """Named like litellm's class; recognised by name, without importing litellm."""


class BadRequestError(ContextWindowExceededError):
    """litellm raises subclasses of it; the base class name counts too."""


class CodedError(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class RateLimitError(Exception):
    pass


#: (provider, what it raises) for every provider message the recogniser knows.
PROVIDER_ERRORS: list[tuple[str, BaseException]] = [
    (
        "openai",
        Exception(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9120 tokens. Please reduce the length of the messages."
        ),
    ),
    ("openai-code", CodedError("Invalid request", "context_length_exceeded")),
    (
        "azure",
        Exception(
            "Error code: 400 - {'error': {'message': 'Too long', 'code': "
            "'context_length_exceeded'}}"
        ),
    ),
    ("anthropic", Exception("prompt is too long: 208310 tokens > 200000 maximum")),
    (
        "anthropic-max-tokens",
        Exception(
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
    ),
    (
        "gemini",
        Exception(
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576)."
        ),
    ),
    (
        "bedrock",
        Exception(
            "An error occurred (ValidationException) when calling the InvokeModel operation: "
            "Input is too long for requested model."
        ),
    ),
    ("bedrock-converse", Exception("ValidationException: too many input tokens")),
    (
        "vllm",
        Exception(
            "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
            "Make sure that `max_model_len` is no smaller than the number of text tokens."
        ),
    ),
    ("vllm-setting", Exception("max_model_len=4096 is smaller than the prompt")),
    ("ollama", Exception("the input length exceeds the context length")),
    ("llama.cpp", Exception("the request exceeds the available context size, try increasing it")),
    (
        "mistral",
        Exception(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
            "maximum context length"
        ),
    ),
    (
        "cohere",
        Exception("too many tokens: total number of tokens in the prompt cannot exceed 4081"),
    ),
    (
        "xai",
        Exception("This model's maximum prompt length is 131072 but the request contains 140000"),
    ),
    ("generic", Exception("Request exceeds the model's context window")),
    ("anthropic-stop-reason", Exception("stop_reason: model_context_window_exceeded")),
    ("litellm-class", ContextWindowExceededError("litellm.ContextWindowExceededError: ...")),
    ("litellm-subclass", BadRequestError("bad request")),
    ("harnessmem", ContextOverflowError("the prompt did not fit")),
]


def test_every_listed_phrase_has_a_test() -> None:
    texts = [str(error).lower() for _, error in PROVIDER_ERRORS]
    for provider, phrase in OVERFLOW_PHRASES:
        assert any(phrase in text for text in texts), f"no test for {provider}: {phrase!r}"


@pytest.mark.parametrize(
    "error", [e for _, e in PROVIDER_ERRORS], ids=[p for p, _ in PROVIDER_ERRORS]
)
def test_provider_errors_are_recognised(error: BaseException) -> None:
    assert is_context_overflow(error)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("boom"),
        RuntimeError("connection reset"),
        RateLimitError("Request too large for gpt-4o on tokens per min (TPM): Limit 30000"),
        Exception("Rate limit reached: too many tokens per min"),
        KeyError("context"),
    ],
)
def test_other_errors_are_not(error: BaseException) -> None:
    assert not is_context_overflow(error)


def test_the_cause_chain_is_searched() -> None:
    def step() -> None:
        try:
            raise ContextOverflowError("too long")
        except ContextOverflowError as inner:
            raise RuntimeError("the agent step failed") from inner

    with pytest.raises(RuntimeError) as info:
        step()
    assert is_context_overflow(info.value)
    assert not is_context_overflow(RuntimeError("the agent step failed"))


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, (8192, 9120)), (3, (200000, 208310)), (5, (1048576, 1200000)), (8, (4096, None))],
)
def test_limits_are_read_from_the_message(index: int, expected: tuple[int, int | None]) -> None:
    assert overflow_limits(PROVIDER_ERRORS[index][1]) == expected
    assert overflow_limits(ValueError("no numbers")) == (None, None)


# ---------------------------------------------------------------- recovery through the session


def conversation(turns: int = 12) -> list[Message]:
    return flight_chat(turns, LAST_USER)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[MemoryHarness]:
    reply = lambda messages, purpose: SUMMARY if purpose == "summary" else "NO_REPLY"  # noqa: E731
    with MemoryHarness.open(
        tmp_path / "ws",
        model=ScriptedModel(reply),
        maintenance={"enabled": False},
        flush={"enabled": False},
    ) as opened:
        yield opened


@pytest.mark.parametrize(
    "error", [e for _, e in PROVIDER_ERRORS], ids=[p for p, _ in PROVIDER_ERRORS]
)
def test_recovery_returns_a_shorter_list_for_every_provider(
    harness: MemoryHarness, error: BaseException
) -> None:
    messages = conversation()
    counter = TokenCounter()
    retry = harness.session("o").recover_overflow(messages, error)
    assert counter.count_messages(retry) < counter.count_messages(messages)
    assert retry[0] == messages[0]
    assert parse_anchor(retry[1]) is not None
    validate_messages(retry, require_pairing=True)
    assert retry[-1] == {"role": "user", "content": LAST_USER}


def test_the_retry_fits_the_limit_the_provider_stated(harness: MemoryHarness) -> None:
    messages = conversation(30)
    counter = TokenCounter()
    tokens = counter.count_messages(messages)
    error = Exception(
        f"This model's maximum context length is {tokens // 3} tokens. However, your "
        f"messages resulted in {tokens} tokens."
    )
    retry = harness.session("o").recover_overflow(messages, error)
    assert counter.count_messages(retry) < tokens // 3


def test_the_last_user_message_is_never_duplicated(harness: MemoryHarness) -> None:
    messages = conversation()
    retry = harness.session("o").recover_overflow(messages, ContextOverflowError("too long"))
    texts = [m.get("content") or "" for m in retry]
    assert sum(LAST_USER in text for text in texts) == 1


def test_other_errors_are_re_raised_untouched(harness: MemoryHarness) -> None:
    error = ValueError("boom")
    with pytest.raises(ValueError, match="boom") as info:
        harness.session("o").recover_overflow(conversation(), error)
    assert info.value is error


def test_overflow_with_compaction_disabled_is_re_raised(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        model=ScriptedModel(SUMMARY),
        compaction={"enabled": False},
        maintenance={"enabled": False},
    ) as harness:
        error = ContextOverflowError("too long")
        with pytest.raises(ContextOverflowError) as info:
            harness.session("o").recover_overflow(conversation(), error)
        assert info.value is error


def test_a_kept_message_too_large_alone_is_shrunk_through_eviction(
    harness: MemoryHarness,
) -> None:
    huge = "Terms and conditions. " * 3_000
    messages: list[Message] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": f"Summarise this contract:\n{huge}"},
    ]
    counter = TokenCounter()
    error = Exception(
        f"This model's maximum context length is 4096 tokens. However, your messages "
        f"resulted in {counter.count_messages(messages)} tokens."
    )
    retry = harness.session("big").recover_overflow(messages, error)
    assert counter.count_messages(retry) < 4096
    assert len(retry) == 2
    (path,) = harness.workspace.list("large_tool_results")
    assert path in retry[1]["content"]
    assert harness.workspace.read_text(path) == messages[1]["content"]


def test_nothing_to_shorten_re_raises(harness: MemoryHarness) -> None:
    error = ContextOverflowError("too long")
    with pytest.raises(ContextOverflowError):
        harness.session("o").recover_overflow([{"role": "user", "content": "hi"}], error)


def test_a_failing_summariser_under_overflow_still_fits(tmp_path: Path) -> None:
    def reply(messages: list[Message], purpose: str) -> str:
        if purpose == "summary":
            raise ModelUnavailableError("summariser down")
        return "NO_REPLY"

    with MemoryHarness.open(
        tmp_path / "ws",
        model=ScriptedModel(reply),
        maintenance={"enabled": False},
        flush={"enabled": False},
    ) as harness:
        messages = conversation(30)
        counter = TokenCounter()
        tokens = counter.count_messages(messages)
        error = Exception(f"maximum context length is {tokens // 4} tokens")
        retry = harness.session("o").recover_overflow(messages, error)
        assert counter.count_messages(retry) < tokens // 4
        assert "automatic summary, built without a model" in retry[1]["content"]
        assert "sessions/o.log.jsonl" in retry[1]["content"]
        logged = harness.workspace.read_text("sessions/o.log.jsonl").splitlines()
        anchor = parse_anchor(retry[1])
        assert anchor is not None
        assert len(logged) == anchor.covers
        assert retry[-1]["content"] == LAST_USER


def test_async_twin(harness: MemoryHarness) -> None:
    messages = conversation()
    retry = asyncio.run(
        harness.session("a").arecover_overflow(messages, ContextOverflowError("too long"))
    )
    assert len(retry) < len(messages)
