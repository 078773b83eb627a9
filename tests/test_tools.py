"""The agent's memory tools: schemas, handlers, bounded output, path confinement."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem import MemoryHarness, Session
from harnessmem.tools import (
    GET_MAX_CHARS,
    LIFECYCLE_TOOL_NAMES,
    OUTPUT_CHARS,
    QUERY_MAX_CHARS,
    SAVE_MAX_CHARS,
    TOOL_NAMES,
    run_tool,
    tool_schemas,
)

DAILY = "memory/2026-11-30.md"


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[MemoryHarness]:
    with MemoryHarness.open(
        tmp_path / "ws", maintenance={"enabled": False}, plugins={"autoload": False}
    ) as opened:
        ws = opened.workspace
        ws.write_text("MEMORY.md", "# Memory\n\n## Travel\n- Prefers aisle seats.\n")
        ws.write_text(
            DAILY,
            "## Memory Flush — 2026-11-30T10:00:00Z · session chat-1\n"
            "- Booked the Kyoto ryokan for March 3-5.\n"
            "- 我喜欢寿司\n",
        )
        record = {"seq": 1, "message": {"role": "user", "content": "the wifi code is 4242"}}
        ws.write_text("sessions/chat-1.log.jsonl", json.dumps(record) + "\n")
        ws.write_text("AGENTS.md", "secret instructions\n")
        ws.write_text("large_tool_results/chat-1/call-1-abc.txt", "evicted output\n")
        yield opened


@pytest.fixture
def session(harness: MemoryHarness) -> Session:
    return harness.session("chat-1")


def test_schemas_are_openai_functions(session: Session) -> None:
    schemas = session.tools
    assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
    assert TOOL_NAMES == ("memory_search", "memory_get", "session_search", "memory_save")
    for schema in schemas:
        assert schema["type"] == "function"
        function = schema["function"]
        assert len(function["description"]) > 80, "descriptions are written for a model"
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert parameters["additionalProperties"] is False
        assert set(parameters["required"]) <= set(parameters["properties"])
        for spec in parameters["properties"].values():
            assert spec["type"] in {"string", "integer"}
            assert spec["description"]
    json.dumps(schemas)  # serialisable as sent to a provider
    schemas[0]["function"]["name"] = "changed"
    assert session.tools[0]["function"]["name"] == "memory_search", "a fresh copy each time"
    assert tool_schemas() == session.tools


def test_memory_search_lists_ranked_hits(session: Session) -> None:
    answer = session.call_tool("memory_search", {"query": "Kyoto ryokan booking"})
    assert answer.startswith('1 memory for "Kyoto ryokan booking", best first:')
    assert f"[1] {DAILY}:2 · 2026-11-30\n- Booked the Kyoto ryokan" in answer
    travel = session.call_tool("memory_search", '{"query": "aisle", "limit": "3"}')
    assert "[1] MEMORY.md:4 · Memory > Travel\n- Prefers aisle seats." in travel
    cjk = session.call_tool("memory_search", {"query": "寿司"})
    assert f"{DAILY}:3" in cjk


def test_memory_search_without_hits_says_what_to_do(session: Session) -> None:
    answer = session.call_tool("memory_search", {"query": "zeppelin"})
    assert answer.startswith('No memories match "zeppelin".')
    assert "session_search" in answer


def test_search_output_is_bounded(harness: MemoryHarness, session: Session) -> None:
    big = "".join(f"- pebble {i} " + "lorem ipsum dolor " * 80 + "\n" for i in range(60))
    harness.workspace.write_text("memory/2026-11-29.md", big)
    answer = session.call_tool("memory_search", {"query": "pebble", "limit": 50})
    assert len(answer) <= OUTPUT_CHARS
    assert re.search(r"\(\d+ more not shown: ask for fewer results\)", answer)
    assert " …" in answer, "long entries are cut"


def test_memory_search_modes(session: Session) -> None:
    assert "MEMORY.md" in session.call_tool(
        "memory_search", {"query": "aisle seats", "mode": "phrase"}
    )
    assert session.call_tool(
        "memory_search", {"query": "seats aisle", "mode": "phrase"}
    ).startswith("No memories")
    assert session.call_tool("memory_search", {"query": "x", "mode": "fuzzy"}).startswith(
        "Error: memory_search: 'mode' must be"
    )


def test_session_search(session: Session) -> None:
    answer = session.call_tool("session_search", {"query": "wifi code"})
    assert "[1] sessions/chat-1.log.jsonl:1\nuser: the wifi code is 4242" in answer
    assert "4242" in session.call_tool("session_search", {"query": "wifi", "session_id": "chat-1"})
    other = session.call_tool("session_search", {"query": "wifi", "session_id": "chat-2"})
    assert other.startswith('No messages in session chat-2 match "wifi"')


def test_memory_get_numbers_lines_and_windows(harness: MemoryHarness, session: Session) -> None:
    answer = session.call_tool("memory_get", {"path": DAILY, "start_line": 2, "lines": 1})
    assert answer == (
        f"{DAILY} lines 2-2 (more follows: memory_get path='{DAILY}' start_line=3):\n"
        "2| - Booked the Kyoto ryokan for March 3-5."
    )
    tail = session.call_tool("memory_get", {"path": DAILY, "start_line": 3})
    assert tail == f"{DAILY} lines 3-3 (end of file):\n3| - 我喜欢寿司"
    past = session.call_tool("memory_get", {"path": DAILY, "start_line": 99})
    assert past == f"{DAILY} has 3 lines; start_line 99 is past its end."
    assert "2| " in session.call_tool("memory_get", {"path": "./memory//2026-11-30.md"})
    harness.workspace.write_text("memory/wide.md", ("y" * 500 + "\n") * 200)
    wide = session.call_tool("memory_get", {"path": "memory/wide.md", "lines": 300})
    assert len(wide) <= GET_MAX_CHARS + 200
    assert "more follows" in wide


def test_memory_get_reads_session_logs_and_evicted_results(session: Session) -> None:
    assert "4242" in session.call_tool("memory_get", {"path": "sessions/chat-1.log.jsonl"})
    answer = session.call_tool("memory_get", {"path": "large_tool_results/chat-1/call-1-abc.txt"})
    assert "1| evicted output" in answer


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.md", "'..' leaves the workspace"),
        ("memory/../../outside.md", "'..' leaves the workspace"),
        ("/etc/passwd", "it is absolute"),
        ("file:///etc/passwd", "it is a URL or drive path"),
        ("s3://bucket/MEMORY.md", "it is a URL or drive path"),
        ("C:/Windows/win.ini", "it is a URL or drive path"),
        ("memory\\..\\AGENTS.md", "backslash"),
        ("AGENTS.md", "not a memory file"),
        ("memory/../AGENTS.md", "not a memory file"),
        (".locks/x.lease", ".locks/"),
        ("memory/x\x00.md", "NUL"),
    ],
)
def test_memory_get_refuses_paths_outside_memory(session: Session, path: str, why: str) -> None:
    answer = session.call_tool("memory_get", {"path": path})
    assert answer.startswith("Error: "), answer
    assert why in answer
    assert "secret instructions" not in answer


def test_memory_get_refuses_symlinks_out_of_the_workspace(
    harness: MemoryHarness, session: Session, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("host secret\n")
    root = harness.workspace.local_root
    assert root is not None
    os.symlink(outside, root / "memory" / "link.md")
    os.symlink(root / "AGENTS.md", root / "memory" / "inner.md")
    os.symlink(tmp_path, root / "sessions" / "dir")
    for path in ("memory/link.md", "memory/inner.md", "sessions/dir/outside.md"):
        answer = session.call_tool("memory_get", {"path": path})
        assert answer.startswith("Error: "), (path, answer)
        assert "secret" not in answer
    assert "symlink" in session.call_tool("memory_get", {"path": "memory/inner.md"})
    # ... and search never indexes what the link points to
    assert harness.search("host secret") == []


_PATHS = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(
            ["..", ".", "", "memory", "sessions", "MEMORY.md", "AGENTS.md", "x.md", "/", "~"]
        ),
        max_size=6,
    ).map("/".join),
)


@given(path=_PATHS)
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_memory_get_never_leaves_the_memory_files(session: Session, path: str) -> None:
    """Whatever the path, memory_get answers with an error or a memory file's lines."""
    answer = session.call_tool("memory_get", {"path": path})
    assert "secret instructions" not in answer
    assert answer.startswith(("Error: ", "MEMORY.md ", "memory/", "sessions/")) or (
        " has " in answer and "start_line" in answer
    ), answer


def test_bad_arguments_come_back_as_errors(session: Session) -> None:
    cases: list[tuple[str, Any, str]] = [
        ("memory_search", {}, "'query' is required"),
        ("memory_search", {"query": "   "}, "'query' is required"),
        ("memory_search", {"query": 42}, "'query' must be a string"),
        ("memory_search", {"query": "x", "limit": "many"}, "'limit' must be an integer"),
        ("memory_search", {"query": "x", "limit": 0}, "'limit' must be at least 1"),
        ("memory_search", {"query": "x", "limit": True}, "'limit' must be an integer"),
        ("memory_search", "{not json", "not valid JSON"),
        ("memory_search", "[1, 2]", "must be a JSON object"),
        ("memory_get", {"path": ""}, "'path' is required"),
        ("memory_get", {"path": DAILY, "start_line": -3}, "'start_line' must be at least 1"),
        ("memory_get", {"path": "memory/missing.md"}, "does not exist"),
        ("memory_save", {"text": ""}, "'text' is required"),
    ]
    for name, arguments, expected in cases:
        answer = session.call_tool(name, arguments)
        assert answer.startswith("Error: "), (name, arguments, answer)
        assert expected in answer, (name, arguments, answer)


@pytest.mark.parametrize(
    ("name", "arguments", "key", "position"),
    [
        ("memory_save", '{"text": "Ana loves \\ud83c sushi"}', "text", 10),
        ("memory_save", {"text": "half \ud83c"}, "text", 5),
        ("memory_search", '{"query": "sushi \\ud83c"}', "query", 6),
        ("memory_get", '{"path": "MEMORY.md\\ud83c"}', "path", 9),
        ("session_search", '{"query": "x", "session_id": "\\udfff"}', "session_id", 0),
    ],
)
def test_half_a_character_is_an_error_the_model_can_fix(
    harness: MemoryHarness, session: Session, name: str, arguments: Any, key: str, position: int
) -> None:
    """A JSON escape of half an emoji (a lone surrogate) used to raise UnicodeEncodeError."""
    before = harness.workspace.read_text("MEMORY.md")
    answer = session.call_tool(name, arguments)
    assert answer.startswith(
        f"Error: {name}: '{key}' holds half a character at position {position} (the lone surrogate"
    ), answer
    assert "send it again with the whole character" in answer
    assert harness.workspace.read_text("MEMORY.md") == before
    # The whole character (both halves of the escape) is fine.
    whole = '{"query": "x", "text": "\\ud83c\\udf63 sushi", "path": "MEMORY.md"}'
    assert not session.call_tool(name, whole).startswith("Error"), name


def test_bounds_are_the_schema_s_and_unknown_arguments_ignored(session: Session) -> None:
    """The schema is the contract: a value beyond its declared maximum is refused (with
    the bound), as one below its minimum is; an unknown argument is ignored."""
    answer = session.call_tool("memory_search", {"query": "Kyoto", "limit": 50, "x": 1})
    assert answer.startswith("1 memory for")
    for name, args, bound in [
        ("memory_search", {"query": "Kyoto", "limit": 500}, "'limit' must be at most 50, got 500"),
        ("session_search", {"query": "wifi", "limit": 51}, "'limit' must be at most 50, got 51"),
        ("memory_get", {"path": "MEMORY.md", "lines": 301}, "'lines' must be at most 300"),
    ]:
        schema = next(s for s in tool_schemas() if s["function"]["name"] == name)
        key = next(iter(set(args) - {"query", "path"}))
        declared = schema["function"]["parameters"]["properties"][key]["maximum"]
        assert args[key] == declared + 1 or args[key] > declared
        assert session.call_tool(name, args).startswith(f"Error: {name}: {bound}"), name


def test_unknown_tool_raises(session: Session) -> None:
    with pytest.raises(ValueError, match="unknown memory tool 'read_file'"):
        session.call_tool("read_file", {"path": "x"})


def test_oversized_queries_and_saves_are_errors(harness: MemoryHarness, session: Session) -> None:
    """A query the size of a document, or a save bigger than MEMORY.md's budget, is an
    argument to shorten: nothing is searched or written, and the error does not echo it."""
    before = harness.workspace.read_text("MEMORY.md")
    cases = [
        ("memory_search", "query", "Kyoto " * (QUERY_MAX_CHARS // 6 + 1)),
        ("session_search", "query", "wifi " * (10 * 1024 * 1024 // 5)),
        ("memory_save", "text", "- fact\n" * (SAVE_MAX_CHARS // 7 + 1)),
    ]
    for name, key, value in cases:
        answer = session.call_tool(name, {key: value})
        assert answer.startswith(f"Error: {name}: '{key}' is {len(value):,} characters long"), (
            answer[:200]
        )
        assert len(answer) < 200
    assert harness.workspace.read_text("MEMORY.md") == before
    at_the_limit = "Kyoto " + "x" * (QUERY_MAX_CHARS - 6)
    assert not session.call_tool("memory_search", {"query": at_the_limit}).startswith("Error")
    limits = {
        name: {key: spec.get("maxLength") for key, spec in props.items()}
        for name, props in (
            (s["function"]["name"], s["function"]["parameters"]["properties"])
            for s in tool_schemas()
        )
    }
    assert limits["memory_search"]["query"] == QUERY_MAX_CHARS
    assert limits["session_search"]["query"] == QUERY_MAX_CHARS
    assert limits["memory_save"]["text"] == SAVE_MAX_CHARS


def test_run_tool_flags_the_errors(harness: MemoryHarness) -> None:
    """run_tool's flag is set exactly when the text is an ``Error: ...`` for the model."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_search", {"query": "Kyoto"}),
        ("memory_search", {"query": "zeppelin"}),
        ("memory_search", {}),
        ("memory_get", {"path": "../x"}),
        ("memory_get", {"path": "memory/missing.md"}),
        ("memory_get", {"path": DAILY}),
        ("memory_save", {"text": "- Prefers aisle seats."}),
    ]
    for name, arguments in calls:
        result = run_tool(harness.kernel, name, arguments)
        assert result.is_error == result.text.startswith("Error: "), (name, result)
    assert [run_tool(harness.kernel, n, a).is_error for n, a in calls] == [
        False, False, True, True, True, False, False,
    ]  # fmt: skip


def test_memory_flush_is_a_lifecycle_tool_only(harness: MemoryHarness, session: Session) -> None:
    """memory_flush is offered only when asked for: never in Session.tools or call_tool."""
    assert LIFECYCLE_TOOL_NAMES == ("memory_flush",)
    assert "memory_flush" not in [s["function"]["name"] for s in session.tools]
    names = [s["function"]["name"] for s in tool_schemas(lifecycle=True)]
    assert names == [*TOOL_NAMES, "memory_flush"]
    with pytest.raises(ValueError, match="unknown memory tool 'memory_flush'"):
        session.call_tool("memory_flush", {"messages": []})
    messages = [
        {"role": "user", "content": "Please remember that my badge number is 88-341."},
        {"role": "assistant", "content": "Noted: your badge number is 88-341."},
    ]
    result = run_tool(harness.kernel, "memory_flush", {"messages": messages}, lifecycle=True)
    assert not result.is_error, result.text
    assert "2 new message(s) read" in result.text
    again = run_tool(harness.kernel, "memory_flush", {"messages": messages}, lifecycle=True)
    assert "0 new message(s) read" in again.text
    for bad, expected in [
        ({}, "'messages' is required"),
        ({"messages": "hi"}, "'messages' is required"),
        ({"messages": [{"content": "no role"}]}, "role"),
        ({"messages": messages, "session_id": 7}, "'session_id' must be a string"),
    ]:
        answer = run_tool(harness.kernel, "memory_flush", bad, lifecycle=True)
        assert answer.is_error, bad
        assert expected in answer.text, answer.text


def test_memory_save_writes_and_is_searchable(session: Session) -> None:
    answer = session.call_tool("memory_save", {"text": "- Bob drinks green tea."})
    assert answer.startswith("Saved to MEMORY.md"), answer
    assert "green tea" in session.call_tool("memory_search", {"query": "green tea"})
    again = session.call_tool("memory_save", {"text": "- Bob drinks green tea."})
    assert "nothing new" in again


def test_memory_save_answer_counts_every_line_and_names_what_it_left_out(
    harness: MemoryHarness, session: Session
) -> None:
    """'Ana lives in Porto' used to be dropped while the answer said '1 new entry'."""
    answer = session.call_tool(
        "memory_save", {"text": "## Ana\nAna lives in Porto\n- The prod db is on port 6543"}
    )
    assert answer == (
        "Saved to MEMORY.md (2 new entries). Not saved: '## Ana' (a heading, not a fact). "
        "Write each fact as its own line or bullet that makes sense without the heading."
    )
    memory = harness.workspace.read_text("MEMORY.md")
    assert "- Ana lives in Porto\n- The prod db is on port 6543\n" in memory
    assert session.call_tool("memory_save", {"text": "### Only a heading"}).startswith(
        "Nothing saved to MEMORY.md: the text holds no fact. Not saved: '### Only a heading'"
    )


def test_search_timeout_comes_back_as_an_error(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        index={"search_timeout": 1e-9},
        maintenance={"enabled": False},
        plugins={"autoload": False},
    ) as harness:
        harness.workspace.write_text("MEMORY.md", "".join(f"- common {i}\n" for i in range(3_000)))
        answer = harness.session("s").call_tool("memory_search", {"query": "common"})
        assert answer.startswith("Error: the search took too long")


def test_memory_forget_is_offered_only_when_turned_on(tmp_path: Path) -> None:
    with MemoryHarness.open(tmp_path / "off", maintenance={"enabled": False}) as harness:
        session = harness.session("chat-1")
        assert "memory_forget" not in [s["function"]["name"] for s in session.tools]
        harness.save("- Maya's cat is called Mirko")
        answer = session.call_tool("memory_forget", {"query": "Mirko"})
        assert answer.startswith("Error: memory_forget is not available")
        assert "Mirko" in harness.workspace.read_text("MEMORY.md")


def test_memory_forget_previews_removes_and_refuses_mass_deletes(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws", maintenance={"enabled": False}, tools={"forget": True}
    ) as harness:
        session = harness.session("chat-1")
        assert "memory_forget" in [s["function"]["name"] for s in session.tools]
        harness.save("\n".join(f"- Maya owns plant {n}" for n in range(6)) + "\n- Mirko is a cat")
        preview = session.call_tool("memory_forget", {"query": "Mirko cat", "dry_run": True})
        assert preview.startswith("would remove 1 fact matching 'Mirko cat'")
        assert "MEMORY.md:" in preview
        assert "Mirko" in harness.workspace.read_text("MEMORY.md")
        done = session.call_tool("memory_forget", '{"query": "Mirko cat"}')
        assert done.startswith("removed 1 fact")
        assert "Mirko" not in harness.workspace.read_text("MEMORY.md")
        refused = session.call_tool("memory_forget", {"query": "Maya plant"})
        assert refused.startswith("Error: memory_forget: 6 facts match")
        assert "nothing was changed" in refused
        assert session.call_tool("memory_forget", {"query": "x", "dry_run": "yes"}).startswith(
            "Error: memory_forget: 'dry_run' must be"
        )


def test_nothing_found_ends_without_a_trailing_space(harness: MemoryHarness) -> None:
    from harnessmem.tools import format_hits

    assert format_hits([], "Gina", what="memories", hint="") == 'No memories match "Gina".'
    assert format_hits([], "Gina", what="memories", hint="Try X.").endswith('". Try X.')
