"""Tests for harnessmem.messages: pairing, safe cuts, fingerprints, validation, normalisers."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.errors import HarnessMemError
from harnessmem.messages import (
    MessageFormatError,
    atomic_spans,
    fingerprint,
    from_anthropic,
    from_locomo,
    from_swe_agent,
    normalize_messages,
    pair_tool_calls,
    safe_cut_points,
    tool_call_ids,
    validate_messages,
)

TAU = "tau-bench/gpt-4o-airline-dev.json"
SWE = "swe-agent/marshmallow-1867.function_calling.traj"

Message = dict[str, Any]


@pytest.fixture(scope="module")
def tau_runs(shared_file: Callable[[str], Path]) -> list[list[Message]]:
    return [run["traj"] for run in json.loads(shared_file(TAU).read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def swe_trajectory(shared_file: Callable[[str], Path]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(shared_file(SWE).read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------- oracles


def _naive_parents(messages: Sequence[Message]) -> dict[int, int | None]:
    """Result index -> parent by the documented rule, found by plain scanning (O(n^2))."""
    parents: dict[int, int | None] = {}
    for j, message in enumerate(messages):
        if message["role"] != "tool":
            continue
        call_id = message["tool_call_id"]
        declares = [
            i
            for i, m in enumerate(messages)
            if m["role"] == "assistant" and call_id in [c["id"] for c in m.get("tool_calls") or []]
        ]
        before = [i for i in declares if i < j]
        parents[j] = before[-1] if before else (declares[0] if declares else None)
    return parents


def _separates(cut: int, pairs: list[tuple[int, int]]) -> bool:
    return any((a < cut) != (r < cut) for a, r in pairs)


def _assert_cuts_exact(messages: Sequence[Message]) -> None:
    """Every safe cut separates no pair, and every other cut separates one."""
    pairs = [(p, r) for r, p in _naive_parents(messages).items() if p is not None]
    safe = set(safe_cut_points(messages))
    for cut in range(len(messages) + 1):
        assert (cut in safe) == (not _separates(cut, pairs)), cut
    inside = {c for start, end in atomic_spans(messages) for c in range(start + 1, end)}
    assert inside == set(range(len(messages) + 1)) - safe


# ---------------------------------------------------------------- pairing on real data


def test_tool_call_ids() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "a", "function": {}}, {"id": "b", "function": {}}],
    }
    assert tool_call_ids(message) == ["a", "b"]
    assert tool_call_ids({"role": "user", "content": "hi"}) == []


def test_pairing_finds_every_result_on_tau(tau_runs: list[list[Message]]) -> None:
    total_calls = 0
    for run in tau_runs:
        pairing = pair_tool_calls(run)
        assert pairing.orphans == []
        assert pairing.unanswered == {}
        parents = _naive_parents(run)
        assert pairing.parents == parents
        for parent, results in pairing.results.items():
            total_calls += len(tool_call_ids(run[parent]))
            assert results, f"call at {parent} has no result"
            for r in results:
                assert run[r]["tool_call_id"] in tool_call_ids(run[parent])
    assert total_calls == 862


def test_safe_cuts_never_split_pairs_on_tau(tau_runs: list[list[Message]]) -> None:
    for run in tau_runs:
        _assert_cuts_exact(run)
        assert safe_cut_points(run)[0] == 0
        assert safe_cut_points(run)[-1] == len(run)


def _with_parallel_calls(run: list[Message], rng: random.Random) -> list[Message]:
    """Merge each run of (call, result) pairs into one parallel call, results shuffled.

    Ids are made unique first: tau-bench reuses ids, and one message cannot hold
    the same id twice.
    """
    out: list[Message] = []
    i = 0
    serial = 0
    while i < len(run):
        calls: list[dict[str, Any]] = []
        results: list[Message] = []
        j = i
        while (
            j + 1 < len(run)
            and run[j]["role"] == "assistant"
            and run[j].get("tool_calls")
            and run[j + 1]["role"] == "tool"
        ):
            for call in run[j]["tool_calls"]:
                serial += 1
                calls.append({**call, "id": f"{call['id']}-{serial}"})
                results.append({**run[j + 1], "tool_call_id": f"{call['id']}-{serial}"})
            j += 2
        if len(calls) >= 2:
            rng.shuffle(results)
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.extend(results)
            i = j
        else:
            out.append(run[i])
            i += 1
    return out


def test_parallel_calls_with_shuffled_results(tau_runs: list[list[Message]]) -> None:
    rng = random.Random(1867)
    merged_messages = 0
    for run in tau_runs:
        parallel = _with_parallel_calls(run, rng)
        pairing = pair_tool_calls(parallel)
        assert pairing.orphans == []
        assert pairing.unanswered == {}
        for parent, results in pairing.results.items():
            ids = tool_call_ids(parallel[parent])
            assert sorted(parallel[r]["tool_call_id"] for r in results) == sorted(ids)
            if len(ids) > 1:
                merged_messages += 1
                # No cut inside the call and its last result.
                assert not set(range(parent + 1, max(results) + 1)) & set(safe_cut_points(parallel))
        _assert_cuts_exact(parallel)
    assert merged_messages > 50


# ---------------------------------------------------------------- property test

_IDS = [f"c{i}" for i in range(6)]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Conversations with parallel calls, reused ids, late, early and orphan results."""
    messages: list[Message] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "text", "calls", "result", "result", "orphan"]))
        if kind == "user":
            messages.append({"role": "user", "content": "u"})
        elif kind == "text":
            messages.append({"role": "assistant", "content": "a"})
        elif kind == "calls":
            ids = draw(st.lists(st.sampled_from(_IDS), min_size=1, max_size=3, unique=True))
            calls = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif kind == "result":
            messages.append(
                {"role": "tool", "tool_call_id": draw(st.sampled_from(_IDS)), "content": "r"}
            )
        else:
            messages.append({"role": "tool", "tool_call_id": "never-declared", "content": "r"})
    return messages


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_safe_cut_points_are_exact(messages: list[Message]) -> None:
    _assert_cuts_exact(messages)
    pairing = pair_tool_calls(messages)
    naive = _naive_parents(messages)
    assert pairing.parents == {r: p for r, p in naive.items() if p is not None}
    assert pairing.orphans == [r for r, p in naive.items() if p is None]
    for parent, ids in pairing.unanswered.items():
        for call_id in ids:
            assert all(messages[r]["tool_call_id"] != call_id for r in pairing.results[parent])


def test_orphans_do_not_constrain() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "x"},
        {"role": "assistant", "content": "ok"},
    ]
    assert safe_cut_points(messages) == [0, 1, 2, 3]
    assert pair_tool_calls(messages).orphans == [1]
    assert atomic_spans(messages) == []


def test_interleaved_results_merge_into_one_span() -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "a"}]},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "user", "content": "interjection"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "assistant", "content": "done", "tool_calls": [{**call, "id": "c"}]},
    ]
    assert atomic_spans(messages) == [(1, 6)]
    assert safe_cut_points(messages) == [0, 1, 6, 7]
    assert pair_tool_calls(messages).unanswered == {6: ["c"]}


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_ignores_key_order_and_volatile_keys() -> None:
    message = {
        "role": "assistant",
        "content": "Booking now.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "book", "arguments": '{"a":1}'}}
        ],
    }
    reordered = {
        "tool_calls": message["tool_calls"],
        "content": "Booking now.",
        "role": "assistant",
    }
    noisy = {**copy.deepcopy(message), "timestamp": "2024-05-15T15:00:00Z", "agent": "main"}
    noisy["tool_calls"][0]["index"] = 0
    assert fingerprint(message) == fingerprint(reordered) == fingerprint(noisy)
    assert len(fingerprint(message)) == 32
    int(fingerprint(message), 16)
    # Pinned: stored session logs dedup by fingerprint, so it must not drift between releases.
    assert fingerprint({"role": "user", "content": "hi"}) == fingerprint(
        {"content": "hi", "role": "user", "name": None}
    )
    canonical = '{"content":"hi","name":null,"role":"user","tool_call_id":null,"tool_calls":null}'
    assert hashlib.sha256(canonical.encode()).hexdigest()[:32] == "13bcd66a95dfe82a7bd83f61be7c5397"
    assert fingerprint({"role": "user", "content": "hi"}) == "13bcd66a95dfe82a7bd83f61be7c5397"


@pytest.mark.parametrize(
    "change",
    [
        {"role": "user"},
        {"content": "Booking later."},
        {"name": "agent-7"},
        {"tool_call_id": "x"},
        {"tool_calls": [{"id": "c2", "function": {"name": "book", "arguments": '{"a":1}'}}]},
        {"tool_calls": [{"id": "c1", "function": {"name": "cancel", "arguments": '{"a":1}'}}]},
        {"tool_calls": [{"id": "c1", "function": {"name": "book", "arguments": '{"a":2}'}}]},
    ],
)
def test_fingerprint_changes_with_meaning(change: dict[str, Any]) -> None:
    message = {
        "role": "assistant",
        "content": "Booking now.",
        "tool_calls": [{"id": "c1", "function": {"name": "book", "arguments": '{"a":1}'}}],
    }
    assert fingerprint(message) != fingerprint({**message, **change})


def test_fingerprints_of_tau_are_stable_and_mostly_distinct(tau_runs: list[list[Message]]) -> None:
    run = tau_runs[0]
    prints = [fingerprint(m) for m in run]
    assert prints == [fingerprint(json.loads(json.dumps(m, sort_keys=True))) for m in run]
    assert len(set(prints)) > len(run) * 0.9


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}],
            "message 1: role 'robot'",
        ),
        ([{"role": "tool", "content": "r"}], "message 0: tool message has no tool_call_id"),
        ([{"role": "user"}], "message 0: user message has no content"),
        ([{"role": "assistant", "content": None}], "message 0: assistant message has neither"),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
            "message 0: tool call 0 has no id",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
                }
            ],
            "message 0: tool call 0: arguments must be a JSON string",
        ),
        (["hello"], "message 0: is str"),
    ],
)
def test_validate_messages_names_index_and_problem(messages: list[Any], expected: str) -> None:
    with pytest.raises(MessageFormatError) as info:
        validate_messages(messages)
    assert str(info.value).startswith(expected)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, HarnessMemError)


def test_validate_collects_all_problems_and_checks_pairing(tau_runs: list[list[Message]]) -> None:
    for run in tau_runs:
        validate_messages(run, require_pairing=True)
    bad = [{"role": "tool", "content": "r"}, {"role": "user"}]
    with pytest.raises(MessageFormatError) as info:
        validate_messages(bad)
    assert len(info.value.problems) == 2
    unpaired = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "z", "content": "r"},
    ]
    validate_messages(unpaired)
    with pytest.raises(MessageFormatError, match="message 0: tool call 'c' has no result") as info:
        validate_messages(unpaired, require_pairing=True)
    assert "message 1: tool result answers no tool call" in info.value.problems


# ---------------------------------------------------------------- SWE-agent


def test_from_swe_agent_on_real_trajectory(swe_trajectory: dict[str, Any]) -> None:
    history = swe_trajectory["history"]
    messages = from_swe_agent(swe_trajectory)
    assert messages == normalize_messages(swe_trajectory) == normalize_messages(history)
    expected_tools = sum(len(m.get("tool_call_ids") or []) for m in history)
    assert len(messages) == len(history) == 28
    assert sum(m["role"] == "tool" for m in messages) == expected_tools == 13
    for index, message in enumerate(messages):
        assert set(message) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
        assert message["content"] == history[index]["content"]
        if message["role"] == "tool":
            preceding = [
                i for i in range(index) if message["tool_call_id"] in tool_call_ids(messages[i])
            ]
            assert preceding, f"tool message {index} answers no preceding call"
            assert messages[index - 1]["role"] == "assistant"
            assert message["tool_call_id"] in tool_call_ids(messages[index - 1])
    validate_messages(messages, require_pairing=True)
    assert history[3]["tool_call_ids"] == [messages[3]["tool_call_id"]]  # input untouched


def test_from_swe_agent_splits_multi_id_observations() -> None:
    call = {"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}
    history = [
        {
            "role": "assistant",
            "content": "two",
            "tool_calls": [{**call, "id": "a"}, {**call, "id": "b"}],
            "agent": "main",
        },
        {
            "role": "tool",
            "content": "out",
            "tool_call_ids": ["a", "b"],
            "message_type": "observation",
        },
    ]
    messages = from_swe_agent({"history": history})
    assert [m.get("tool_call_id") for m in messages] == [None, "a", "b"]
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls"}'
    with pytest.raises(MessageFormatError, match="message 0: tool message has no tool_call_ids"):
        from_swe_agent([{"role": "tool", "content": "x", "tool_call_ids": []}])


# ---------------------------------------------------------------- Anthropic


def test_from_anthropic_hand_written() -> None:
    request = {
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two lookups", "signature": "s"},
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "tu_1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "tu_2",
                        "name": "weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu_2", "content": "22C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu_1",
                        "content": [{"type": "text", "text": "18C"}],
                    },
                    {"type": "text", "text": "Also this photo:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Rome is warmer."}]},
        ],
    }
    assert normalize_messages(request) == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "tu_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "tu_2",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "tu_2", "content": "22C"},
        {"role": "tool", "tool_call_id": "tu_1", "content": "18C"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Also this photo:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
            ],
        },
        {"role": "assistant", "content": "Rome is warmer."},
    ]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
            ],
            "message 1: tool_use block 0 has no id",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "content": "r"}]}],
            "message 0: block 0: tool_result",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a"}, {"type": "video"}],
                }
            ],
            "message 0: block 1: unsupported",
        ),
        ([{"role": "robot", "content": "x"}], "message 0: role 'robot'"),
    ],
)
def test_from_anthropic_errors_name_the_message(messages: list[Any], expected: str) -> None:
    with pytest.raises(MessageFormatError, match=f"^{expected}"):
        from_anthropic(messages)


def _to_anthropic(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI -> Anthropic Messages API, the reverse of what from_anthropic does."""
    system: str | None = None
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
            continue
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content") is not None:
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": json.loads(call["function"]["arguments"]),
                    }
                )
            out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
            }
        else:
            block = {"type": "text", "text": message["content"]}
        # Anthropic alternates roles: tool results and the next user text share a user turn.
        if out and out[-1]["role"] == "user" and out[-1]["content"][-1]["type"] == "tool_result":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    return system, out


def _comparable(message: Message) -> Message:
    """OpenAI fields that survive Anthropic; arguments compared as parsed JSON."""
    out = {k: v for k, v in message.items() if not (k == "name" and message["role"] == "tool")}
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {
                **c,
                "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])},
            }
            for c in out["tool_calls"]
        ]
    return out


def test_anthropic_round_trip_on_tau(tau_runs: list[list[Message]]) -> None:
    for run in tau_runs:
        system, anthropic = _to_anthropic(run)
        assert normalize_messages(anthropic)  # detected as Anthropic by its blocks
        back = normalize_messages({"system": system, "messages": anthropic})
        assert [_comparable(m) for m in back] == [_comparable(m) for m in run]


# ---------------------------------------------------------------- detection


def test_normalize_openai_lists_and_wrappers(tau_runs: list[list[Message]]) -> None:
    run = tau_runs[0]
    assert normalize_messages(run) == run
    assert normalize_messages(run) is not run
    assert normalize_messages({"traj": run, "reward": 1.0}) == run
    assert normalize_messages({"messages": run, "model": "gpt-4o"}) == run
    assert normalize_messages([]) == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (42, "cannot read messages from int"),
        ("hello", "cannot read messages from str"),
        ({"foo": []}, "cannot find messages in this object"),
        (
            [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}],
            "message 1: tool message",
        ),
    ],
)
def test_normalize_rejects_bad_input(data: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=f"^{expected}"):
        normalize_messages(data)


def test_messages_with_the_same_problem_are_named_together() -> None:
    """Five items without a role are one problem, not the same sentence five times."""
    items = [{"speaker": "Ana", "text": f"hi {n}"} for n in range(5)] + [{"role": "user"}]
    with pytest.raises(MessageFormatError) as info:
        validate_messages(items)
    headline = info.value.message
    assert headline.startswith("messages 0-4: role None is not one of ")
    assert headline.count("role None") == 1
    assert headline.endswith("(and 1 more: message 5: user message has no content)")
    assert len(info.value.problems) == 6, "the problems list keeps one line per message"


# ---------------------------------------------------------------- LoCoMo

LOCOMO_SAMPLE: dict[str, Any] = {
    "sample_id": "s-1",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_2_date_time": "12:05 am on 1 Feb, 2024",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Back from Oslo."}],
        "session_1_date_time": "7:30 pm on 31 January, 2024",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I got a puppy."},
            {
                "speaker": "Bo",
                "dia_id": "D1:2",
                "text": "Look at this!",
                "blip_caption": "a photo of a fjord",
                "img_url": ["https://example.invalid/f.jpg"],
            },
        ],
        "session_3_date_time": "9:00 am on 2 February, 2024",
        "session_3": [],
    },
    "qa": [{"question": "What did Ana get?", "answer": "a puppy", "evidence": ["D1:1"]}],
}


def test_from_locomo_makes_each_speaker_a_named_user_on_the_session_date() -> None:
    expected = [
        {
            "role": "user",
            "name": "Ana",
            "content": "I got a puppy.",
            "timestamp": "2024-01-31T19:30:00",
            "dia_id": "D1:1",
        },
        {
            "role": "user",
            "name": "Bo",
            "content": "Look at this! [shares a photo: a photo of a fjord]",
            "timestamp": "2024-01-31T19:30:00",
            "dia_id": "D1:2",
        },
        {
            "role": "user",
            "name": "Bo",
            "content": "Back from Oslo.",
            "timestamp": "2024-02-01T00:05:00",
            "dia_id": "D2:1",
        },
    ]
    assert from_locomo(LOCOMO_SAMPLE) == expected, "sessions in number order, empty ones skipped"
    assert from_locomo(LOCOMO_SAMPLE["conversation"]) == expected
    assert normalize_messages(LOCOMO_SAMPLE) == expected
    validate_messages(expected)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"session_1_date_time": "yesterday"}, "session_1_date_time is 'yesterday', not a LoCoMo"),
        ({"session_1_date_time": "7:30 pm on 31 Smarch, 2024"}, "not a LoCoMo date"),
        ({"session_1_date_time": "7:30 pm on 30 February, 2024"}, "day is out of range"),
        ({"session_1": [{"speaker": "Ana"}]}, "session_1 turn 0 has no text"),
        ({"session_1": [{"text": "hi"}]}, "session_1 turn 0 has no speaker"),
        ({"session_1": ["hi"]}, "session_1 turn 0 is str, not a turn object"),
    ],
)
def test_from_locomo_names_the_bad_session_and_turn(change: dict[str, Any], expected: str) -> None:
    sample = {"conversation": {**LOCOMO_SAMPLE["conversation"], **change}}
    with pytest.raises(MessageFormatError, match=expected):
        from_locomo(sample)


def test_a_list_of_locomo_samples_is_not_one_conversation() -> None:
    with pytest.raises(MessageFormatError, match=r"^2 LoCoMo conversations \(s-1, #1\)"):
        normalize_messages([LOCOMO_SAMPLE, {"conversation": LOCOMO_SAMPLE["conversation"]}])


def test_from_locomo_on_the_real_file(shared_file: Callable[[str], Path]) -> None:
    """Every turn of the five LoCoMo conversations becomes one named user message, dated
    by its session (each session of these falls on a day of its own, in order)."""
    samples = json.loads(shared_file("locomo-dev/locomo-dev.json").read_text(encoding="utf-8"))
    for sample in samples:
        talk = sample["conversation"]
        turns = [
            turn
            for key, value in talk.items()
            if key.startswith("session_") and isinstance(value, list)
            for turn in value
        ]
        messages = from_locomo(sample)
        validate_messages(messages)
        assert len(messages) == len(turns)
        assert {m["name"] for m in messages} == {talk["speaker_a"], talk["speaker_b"]}
        stamps = [m["timestamp"] for m in messages]
        assert stamps == sorted(stamps)
        sessions = [k for k, v in talk.items() if re.fullmatch(r"session_\d+", k) and v]
        assert len({stamp[:10] for stamp in stamps}) == len(sessions)
        assert sorted(m["dia_id"] for m in messages) == sorted(t["dia_id"] for t in turns)
