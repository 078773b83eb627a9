"""The shape check of the messages every lifecycle call is given (issue 17, point 8).

Junk where messages belong (a str, None, a dict, a number in the list, bottomless nesting)
must come back as one ``MessageFormatError`` naming the call, the message index and the
field, before any plugin sees it, and must write nothing to the workspace.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem import MemoryHarness, MessageFormatError, Session
from harnessmem.cli import EXIT_INPUT, main
from harnessmem.messages import MAX_DEPTH, check_messages, validate_messages
from harnessmem.replay import load_transcript

USER = {"role": "user", "content": "book a flight to Lisbon"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


def nested_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    value: Any = {"a": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[MemoryHarness]:
    # Default plugins: context, eviction, compaction, flush (extractive model), redaction.
    with MemoryHarness.open(
        tmp_path / "ws", maintenance={"enabled": False}, compaction={"trigger_messages": 4}
    ) as opened:
        yield opened


@pytest.fixture
def session(harness: MemoryHarness) -> Session:
    return harness.session("s")


def written(harness: MemoryHarness) -> list[str]:
    return sorted(info.path for info in harness.workspace.scan(""))


LIFECYCLE: dict[str, Callable[[Session, Any], Any]] = {
    "before_reasoning": lambda s, m: s.before_reasoning(m),
    "after_call": lambda s, m: s.after_call(m),
    "recover_overflow": lambda s, m: s.recover_overflow(m, ValueError("maximum context length")),
    "abefore_reasoning": lambda s, m: asyncio.run(s.abefore_reasoning(m)),
    "aafter_call": lambda s, m: asyncio.run(s.aafter_call(m)),
}


@pytest.mark.parametrize("call", sorted(LIFECYCLE))
@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ("hello", "messages is str, expected a list of message dicts"),
        (None, "messages is None, expected a list of message dicts"),
        (USER, "messages is dict, expected a list of message dicts"),
        (b"[]", "messages is bytes"),
        (7, "messages is int"),
        ([USER, 5], "message 1: is int, expected a message dict"),
        ([USER, "hi"], "message 1: is str, expected a message dict"),
        ([{"content": "no role"}], "message 0: has no role"),
        ([{"role": 3, "content": "x"}], "message 0: role is int, expected text"),
        ([{"role": "user", "content": 42}], "message 0: content is int, expected text"),
        ([{"role": "user", "content": [1]}], "message 0: content part 0 is int"),
        ([{"role": "user", "content": [[["x"]]]}], "message 0: content part 0 is list"),
        ([{"role": "assistant", "tool_calls": "x"}], "message 0: tool_calls is str"),
        ([{"role": "assistant", "tool_calls": [7]}], "message 0: tool call 0 is int"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}],
            "message 0: tool call 0: function is str, expected a dict",
        ),
        ([{"role": "tool", "tool_call_id": 9, "content": "x"}], "message 0: tool_call_id is int"),
        ([{"role": "user", "content": "x", 3: "y"}], "message 0: key 3 is int, expected text"),
    ],
)
def test_junk_is_one_error_naming_the_call_and_the_message(
    harness: MemoryHarness, session: Session, call: str, messages: Any, expected: str
) -> None:
    """Each case used to fail with AttributeError / TypeError deep in a plugin (or, for
    after_call("hello"), to flush the characters of the string as messages)."""
    before = written(harness)
    with pytest.raises(MessageFormatError) as caught:
        LIFECYCLE[call](session, messages)
    first, _, hint = str(caught.value).partition("\n")
    assert first.startswith(f"{call}: "), first
    assert expected in first
    assert "list of OpenAI-format message dicts" in hint
    assert written(harness) == before, "a rejected call wrote something"


@pytest.mark.parametrize(
    ("message", "where"),
    [
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "extra": nested_dict(500)}]},
            "content[0]['extra']['a']['a']...",
        ),
        (
            {"role": "user", "content": "x", "meta": nested_dict(5_000)},
            "meta['a']['a']['a']['a']...",
        ),
        ({"role": "user", "content": "x", "meta": nested_list(2_000)}, "meta[0][0][0][0]..."),
    ],
)
def test_bottomless_nesting_is_rejected_with_its_path(
    harness: MemoryHarness, session: Session, message: dict[str, Any], where: str
) -> None:
    before = written(harness)
    for call in ("before_reasoning", "after_call"):
        with pytest.raises(MessageFormatError, match=r"levels deep") as caught:
            LIFECYCLE[call](session, [USER, message])
        first = str(caught.value).splitlines()[0]
        assert (
            first == f"{call}: message 1: {where}: nested more than {MAX_DEPTH} levels deep "
            "(or refers to itself)"
        )
    assert written(harness) == before


def test_a_message_that_refers_to_itself_is_rejected(session: Session) -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(MessageFormatError, match=r"message 0: meta\[0\]\[0\]"):
        session.before_reasoning([{"role": "user", "content": "x", "meta": loop}])
    part: dict[str, Any] = {"type": "text", "text": "x"}
    part["self"] = part
    with pytest.raises(MessageFormatError, match=r"content\[0\]\['self'\]"):
        session.after_call([{"role": "user", "content": [part]}])


def test_messages_nested_up_to_the_limit_pass(session: Session) -> None:
    shallow = {"role": "user", "content": "x", "meta": nested_dict(MAX_DEPTH - 2)}
    # After the system message the context plugin puts in front with the memory block.
    assert session.before_reasoning([shallow])[1:] == [shallow]
    with pytest.raises(MessageFormatError):
        session.before_reasoning([{**shallow, "meta": nested_dict(MAX_DEPTH)}])


def test_every_bad_message_is_listed(session: Session) -> None:
    with pytest.raises(MessageFormatError) as caught:
        session.before_reasoning([USER, 1, USER, None, {"role": "user", "content": 2.5}])
    assert caught.value.problems == [
        "message 1: is int, expected a message dict",
        "message 3: is None, expected a message dict",
        "message 4: content is float, expected text, a list of parts or None",
    ]
    assert str(caught.value).startswith(
        "before_reasoning: message 1: is int, expected a message dict (and 2 more: message 3"
    )


@pytest.mark.parametrize(
    ("call", "result", "expected"),
    [
        ("not a dict", "out", "after_tool: call is str, expected the tool call dict"),
        (None, "out", "after_tool: call is None"),
        ({**CALL, "meta": nested_dict(3_000)}, "out", "after_tool: call['meta']['a']"),
        (CALL, 42, "after_tool: result is int, expected the tool's output as text"),
        (CALL, None, "after_tool: result is None"),
    ],
)
def test_after_tool_rejects_junk(
    harness: MemoryHarness, session: Session, call: Any, result: Any, expected: str
) -> None:
    with pytest.raises(MessageFormatError) as caught:
        session.after_tool(call, result)
    assert str(caught.value).startswith(expected)
    with pytest.raises(MessageFormatError) as caught:
        asyncio.run(session.aafter_tool(call, result))
    assert str(caught.value).startswith(expected.replace("after_tool", "aafter_tool", 1))
    assert written(harness) == []


def test_good_messages_come_back_as_a_new_list_of_the_same_objects() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "done", "name": "search"}
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = {"role": "user", "content": [{"type": "text", "text": "see"}, image, "plain"]}
    extra = {"role": "user", "content": "x", "timestamp": 1.5, "meta": {"k": [1, {"v": None}]}}
    messages = (USER, call, result, parts, extra)
    out = check_messages(messages, "before_reasoning")
    assert isinstance(out, list)
    assert all(a is b for a, b in zip(out, messages, strict=True))


def test_validate_messages_rejects_bottomless_nesting_too() -> None:
    with pytest.raises(MessageFormatError, match=r"message 0: meta\['a'\]"):
        validate_messages([{"role": "user", "content": "x", "meta": nested_dict(2_000)}])


# -- transcripts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[{"role": "user", "content": ' + "[" * 5_000 + "]" * 5_000 + "}]",
            "{path} nests JSON arrays or objects too deeply to read",
        ),
        (
            '{"role": "user", "content": "hi"}\n{"role": "user", "content": '
            + "[" * 5_000
            + "]" * 5_000
            + "}\n",
            "{path} line 2 nests JSON arrays or objects too deeply to read",
        ),
        (
            json.dumps([{"role": "user", "content": "hi", "meta": nested_dict(300)}]),
            "{path}: message 0: meta['a']['a']['a']['a']...: nested more than 100 levels deep "
            "(or refers to itself); the file is a JSON list of 1 object, the first with keys "
            "content, meta, role",
        ),
    ],
)
def test_replay_reports_deep_transcripts_as_input_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    """Used to end in RecursionError, which the CLI reports as 'a bug in harnessmem'."""
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(MessageFormatError) as caught:
        load_transcript(path)
    assert str(caught.value).splitlines()[0] == expected.format(path=path)
    result = CliRunner().invoke(main, ["replay", str(path), "-w", str(tmp_path / "ws")])
    assert result.exit_code == EXIT_INPUT, result.output
    assert "bug" not in result.output
    assert expected.format(path=path) in result.output


# -- property: junk never raises anything else --------------------------------------------------

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=4),
)
_junk = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4),
    ),
    max_leaves=20,
)
_field = st.sampled_from(
    ["role", "content", "tool_calls", "tool_call_id", "name", "function_call", "meta"]
)
_role = st.sampled_from(["system", "user", "assistant", "tool", "developer", "bogus"])
_call = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=4), _junk)},
    optional={
        "function": st.one_of(
            st.fixed_dictionaries(
                {"name": st.one_of(st.text(max_size=6), _junk)},
                optional={"arguments": st.one_of(st.text(max_size=20), _junk)},
            ),
            _junk,
        ),
        "type": st.just("function"),
    },
)
_message = st.one_of(
    _junk,
    st.dictionaries(_field, _junk, max_size=5),
    st.fixed_dictionaries(
        {"role": _role},
        optional={
            "content": st.one_of(st.text(max_size=30), st.lists(_junk, max_size=3), _junk),
            "tool_calls": st.one_of(st.lists(_call, max_size=3), _junk),
            "tool_call_id": st.one_of(st.text(max_size=4), _junk),
            "name": st.one_of(st.text(max_size=4), _junk),
            "meta": _junk,
        },
    ),
)
# Mostly well-formed messages with junk where frameworks put extras: these get past the
# check, so they are what the plugins themselves must survive.
_part = st.one_of(
    st.text(max_size=10),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}),
    st.dictionaries(st.text(max_size=5), _junk, max_size=3),
)
_good_call = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=4),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.text(min_size=1, max_size=6),
                "arguments": st.one_of(st.text(max_size=30), st.just('{"a": [1, "b"]}')),
            }
        ),
    }
)
_plausible = st.fixed_dictionaries(
    {"role": _role},
    optional={
        "content": st.one_of(st.none(), st.text(max_size=60), st.lists(_part, max_size=3)),
        "tool_calls": st.lists(_good_call, max_size=2),
        "tool_call_id": st.text(max_size=4),
        "name": st.text(max_size=4),
        "meta": _junk,
        "reasoning_content": st.text(max_size=10),
        "function_call": _junk,
    },
)
_messages = st.one_of(
    _junk, st.lists(_message, max_size=8), st.lists(_plausible, min_size=1, max_size=12)
)


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_check_messages_raises_only_message_format_error(messages: Any) -> None:
    try:
        out = check_messages(messages, "before_reasoning")
    except MessageFormatError as exc:
        first = str(exc)
    else:
        assert [id(m) for m in out] == [id(m) for m in messages]
        return
    assert first.startswith("before_reasoning: ")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_messages, st.integers(min_value=0, max_value=3))
def test_lifecycle_calls_raise_only_message_format_error(
    session: Session, messages: Any, which: int
) -> None:
    """Whatever the structure, the real plugins (eviction, compaction, flush, redaction)
    either handle it or the call raises the documented error; never a plain Python one."""
    call = ["before_reasoning", "after_call", "abefore_reasoning", "aafter_call"][which]
    try:
        LIFECYCLE[call](session, messages)
    except MessageFormatError as exc:
        first = str(exc)
    else:
        return
    assert first.startswith(f"{call}: ")


def test_nesting_is_measured_without_recursion() -> None:
    """100,000 levels, far past Python's recursion limit: measured, not a RecursionError."""

    def first_problem(meta: Any) -> str | None:
        try:
            check_messages([{"role": "user", "content": "x", "meta": meta}], "before_reasoning")
        except MessageFormatError as exc:
            return str(exc).splitlines()[0]
        return None

    assert first_problem(nested_list(100_000)) == (
        "before_reasoning: message 0: meta[0][0][0][0]...: "
        f"nested more than {MAX_DEPTH} levels deep (or refers to itself)"
    )
    assert first_problem({"a": [1, {"b": math.inf}]}) is None
    assert first_problem({(1, 2): "x"}) == (
        "before_reasoning: message 0: meta: key (1, 2) is tuple, expected text"
    )
