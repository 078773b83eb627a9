"""Tests for harnessmem.tokens: exact counts, framing, estimate, fallback, cache."""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harnessmem import tokens
from harnessmem.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    TokenCounter,
    estimate_tokens,
)

TAU = "tau-bench/gpt-4o-airline-dev.json"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tau_runs(shared_file: Callable[[str], Path]) -> list[list[dict[str, Any]]]:
    return [run["traj"] for run in json.loads(shared_file(TAU).read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    counter = TokenCounter()
    assert counter.backend == "tiktoken", "tiktoken must load offline from litellm's BPE files"
    return counter


@pytest.fixture(scope="module")
def encoding(counter: TokenCounter) -> Any:
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def _tokens_len(encoding: Any, text: str | None) -> int:
    return len(encoding.encode(text)) if text else 0


def _expected_message_tokens(encoding: Any, message: dict[str, Any]) -> int:
    """OpenAI's framing, written out independently of the module under test."""
    total = MESSAGE_OVERHEAD + _tokens_len(encoding, message["role"])
    total += _tokens_len(encoding, message.get("content"))
    if message.get("name"):
        total += NAME_OVERHEAD + _tokens_len(encoding, message["name"])
    total += _tokens_len(encoding, message.get("tool_call_id"))
    for call in message.get("tool_calls") or []:
        total += TOOL_CALL_OVERHEAD
        total += _tokens_len(encoding, call["function"]["name"])
        total += _tokens_len(encoding, call["function"]["arguments"])
    return total


def _python(code: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# ---------------------------------------------------------------- loading


def test_import_does_not_load_tiktoken_or_litellm() -> None:
    code = (
        "import sys, harnessmem, harnessmem.tokens, harnessmem.messages\n"
        "c = harnessmem.tokens.TokenCounter()\n"
        "print(sorted(m for m in ('tiktoken', 'litellm') if m in sys.modules))"
    )
    assert _python(code, dict(os.environ)) == "[]"


def test_unset_cache_dir_points_at_litellm_bundle_without_importing_litellm() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
    }
    code = (
        "import os, sys\n"
        "from harnessmem.tokens import TokenCounter\n"
        "c = TokenCounter()\n"
        "print(c.count_text('hello world'), c.backend, 'litellm' in sys.modules)\n"
        "print(os.environ['TIKTOKEN_CACHE_DIR'])"
    )
    first, cache_dir = _python(code, env).splitlines()
    assert first == "2 tiktoken False"
    assert cache_dir.endswith(os.path.join("litellm", "litellm_core_utils", "tokenizers"))
    assert (Path(cache_dir) / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()


def test_user_cache_dir_is_respected_and_never_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    counter = TokenCounter()
    with caplog.at_level(logging.WARNING, logger="harnessmem.tokens"):
        assert counter.count_text("one two three") == estimate_tokens("one two three")
    assert counter.backend == "estimate"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert "TIKTOKEN_CACHE_DIR" in caplog.text


def test_missing_tiktoken_falls_back_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` fail
    counter = TokenCounter()
    with caplog.at_level(logging.WARNING, logger="harnessmem.tokens"):
        assert counter.backend == "estimate"
        assert counter.count_text("你好世界") == 4
        counter.count_messages([{"role": "user", "content": "hello there"}])
        counter.count_message({"role": "assistant", "content": "more text"})
    warnings = [r for r in caplog.records if r.name == "harnessmem.tokens"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "ModuleNotFoundError" in warnings[0].getMessage()


def test_any_loader_error_falls_back_once_per_counter(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def broken(name: str) -> Any:
        calls.append(name)
        raise RuntimeError("corrupt BPE file")

    monkeypatch.setattr(tokens, "_load_tiktoken_encoding", broken)
    counter = TokenCounter("cl100k_base")
    with caplog.at_level(logging.WARNING, logger="harnessmem.tokens"):
        for text in ("a", "b c", "d e f"):
            counter.count_text(text)
    assert calls == ["cl100k_base"]
    assert [r.getMessage().count("corrupt BPE file") for r in caplog.records] == [1]


# ---------------------------------------------------------------- exact counts


def test_count_text_equals_tiktoken_on_every_tau_text(
    tau_runs: list[list[dict[str, Any]]], counter: TokenCounter, encoding: Any
) -> None:
    checked = 0
    for run in tau_runs:
        for message in run:
            texts = [message.get("content"), message.get("name"), message.get("tool_call_id")]
            for call in message.get("tool_calls") or []:
                texts += [call["function"]["name"], call["function"]["arguments"]]
            for text in texts:
                if text:
                    assert counter.count_text(text) == len(encoding.encode(text))
                    checked += 1
    assert checked > 5000


def test_count_message_follows_openai_framing_on_tau(
    tau_runs: list[list[dict[str, Any]]], counter: TokenCounter, encoding: Any
) -> None:
    for run in tau_runs:
        expected = [_expected_message_tokens(encoding, m) for m in run]
        assert [counter.count_message(m) for m in run] == expected
        assert counter.count_messages(run) == sum(expected) + REPLY_PRIMING
        sums = counter.count_prefix_sums(run)
        assert sums[0] == 0
        assert sums[-1] == sum(expected)
        assert [b - a for a, b in itertools.pairwise(sums)] == expected


def test_cookbook_example_framing(counter: TokenCounter) -> None:
    # OpenAI's cookbook: a user message "hi" is 3 + role (1) + content (1), plus 3 for the reply.
    assert counter.count_messages([{"role": "user", "content": "hi"}]) == 8
    named = {"role": "user", "content": "hi", "name": "bob"}
    assert counter.count_message(named) == 5 + NAME_OVERHEAD + counter.count_text("bob")


def test_content_parts_and_images(counter: TokenCounter) -> None:
    parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "text", "text": "Be brief."},
        ],
    }
    expected = (
        MESSAGE_OVERHEAD
        + counter.count_text("user")
        + counter.count_text("What is in this picture?")
        + counter.count_text("Be brief.")
        + IMAGE_TOKENS
    )
    assert counter.count_message(parts) == expected


def test_special_token_text_counts_as_text(counter: TokenCounter) -> None:
    assert counter.count_text("<|endoftext|>") > 1


def test_legacy_function_call_and_dict_arguments_are_counted(counter: TokenCounter) -> None:
    legacy = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    }
    bare = {"role": "assistant", "content": None}
    assert counter.count_message(legacy) == (
        counter.count_message(bare) + TOOL_CALL_OVERHEAD + counter.count_text("f") + 1
    )
    as_dict = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}],
    }
    assert counter.count_message(as_dict) > counter.count_message(bare)


# ---------------------------------------------------------------- estimate


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好世界", 4),
        ("こんにちは", 5),
        ("カタカナ", 4),
        ("안녕하세요", 5),
        ("\uff21\uff22\uff23\uff01", 4),  # fullwidth "ABC!"
        ("x", 1),
        ("你好 world", 3),
        ("", 0),
        ("12345", 2),
        ("internationalization", 4),
        ("a  b", 3),
        ('{"a":', 3),
    ],
)
def test_estimate_rules(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_tracks_tiktoken_on_tau(
    tau_runs: list[list[dict[str, Any]]], counter: TokenCounter
) -> None:
    texts = [m["content"] for run in tau_runs for m in run if m.get("content")]
    exact = sum(counter.count_text(t) for t in texts)
    estimate = sum(estimate_tokens(t) for t in texts)
    # Errs high (safe for budgets) but stays close.
    assert 1.0 <= estimate / exact <= 1.3


# ---------------------------------------------------------------- cache


def test_in_place_mutation_changes_the_count(counter: TokenCounter) -> None:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": "c1", "content": "short"}
    before = counter.count_message(message)
    message["content"] = "short, and now a good deal longer than it was"
    after = counter.count_message(message)
    assert after == TokenCounter().count_message(dict(message))
    assert after > before

    parts: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "one"}]}
    before = counter.count_message(parts)
    parts["content"][0]["text"] = "one two three four five"
    assert counter.count_message(parts) > before

    call: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    before = counter.count_message(call)
    call["tool_calls"][0]["function"]["arguments"] = '{"query": "a much longer argument"}'
    assert counter.count_message(call) > before
    call["tool_calls"].append(
        {"id": "d", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    )
    assert counter.count_message(call) > before


def test_equal_copy_hits_the_cache() -> None:
    counter = TokenCounter()
    message = {"role": "user", "content": "a message that is counted once"}
    first = counter.count_message(message)
    info = counter.cache_info()
    assert counter.count_message(json.loads(json.dumps(message))) == first
    after = counter.cache_info()
    assert (after.hits, after.misses) == (info.hits + 1, info.misses)


def test_cache_is_bounded() -> None:
    counter = TokenCounter(max_entries=10)
    for i in range(50):
        counter.count_message({"role": "user", "content": f"message {i}"})
    assert counter.cache_info().size == 10
    counter.clear_cache()
    assert counter.cache_info().size == 0
    with pytest.raises(ValueError, match="max_entries"):
        TokenCounter(max_entries=0)


@pytest.fixture
def encode_spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every text tiktoken encodes for counters created while it is active."""
    import tiktoken

    encoded: list[str] = []
    original = tiktoken.Encoding.encode_ordinary

    def spy(self: Any, text: str) -> list[int]:
        encoded.append(text)
        return original(self, text)

    monkeypatch.setattr(tiktoken.Encoding, "encode_ordinary", spy)
    return encoded


def test_growing_conversation_encodes_only_new_messages(
    tau_runs: list[list[dict[str, Any]]], encode_spy: list[str]
) -> None:
    conversation = [m for run in tau_runs for m in run][:1000]
    counter = TokenCounter()
    first = counter.count_messages(conversation)
    assert counter.backend == "tiktoken"
    assert encode_spy, "the spy must see the initial count"

    encode_spy.clear()
    new = {"role": "user", "content": "One more question about baggage allowance, please."}
    # A caller building a fresh list each turn, holding the same dicts.
    grown = [*conversation, new]
    assert counter.count_messages(grown) == first + counter.count_message(new)
    assert encode_spy == ["user", new["content"]]

    encode_spy.clear()
    counter.count_messages(list(grown))
    assert encode_spy == []


def test_concurrent_counting_agrees(tau_runs: list[list[dict[str, Any]]]) -> None:
    conversation = [m for run in tau_runs[:20] for m in run]
    expected = TokenCounter().count_messages(conversation)
    counter = TokenCounter(max_entries=64)  # small bound: eviction races with lookups
    barrier = threading.Barrier(8)

    def work(offset: int) -> int:
        barrier.wait()
        return counter.count_messages(conversation[offset:] + conversation[:offset])

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(0, 80, 10)))
    assert results == [expected] * 8
