"""Tool-result eviction: the built-in ``eviction`` plugin (harnessmem.eviction)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem import ConfigError, MemoryHarness, hookimpl
from harnessmem.errors import WorkspaceError
from harnessmem.events import TurnContext
from harnessmem.eviction import (
    MARKER,
    EvictedResult,
    ToolResultEvictor,
    eviction_path,
    placeholder,
)
from harnessmem.plugins import installed_plugins
from harnessmem.settings import PluginSettings
from harnessmem.testing.workspace_suite import FakeClock

if TYPE_CHECKING:
    from conftest import EventLog, RunTogether, WorkspaceTarget

SHELL = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
READ = {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def _output(chars: int, tag: str = "") -> str:
    """A shell-like output of exactly ``chars`` characters with numbered lines."""
    lines = []
    size, i = 0, 0
    while size < chars:
        line = f"{tag}line {i:05d} " + "x" * 50 + "\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)[:chars]


@pytest.fixture
def harness(workspace_target: WorkspaceTarget, events: EventLog) -> Iterator[MemoryHarness]:
    """A harness on a fresh workspace: each test using it runs locally and on S3."""
    # The messages compared are the ones the tests send: no memory block put in front
    # (tests/test_context_inject.py covers it).
    with workspace_target.open(
        plugins=[events], maintenance={"enabled": False}, context={"inject": "manual"}
    ) as opened:
        yield opened


def _evicted_files(harness: MemoryHarness) -> list[str]:
    return harness.workspace.list("large_tool_results")


# -- the acceptance case ---------------------------------------------------------------------


def test_large_shell_result_is_evicted_and_readable_whole(
    harness: MemoryHarness, events: EventLog
) -> None:
    """150,000 chars from shell: head + tail + file name kept; the file holds it all, once."""
    text = _output(150_000)
    session = harness.session("chat-42")
    short = session.after_tool(SHELL, text)

    assert len(short) < 5_000
    assert short.startswith(text[:2_000])
    assert short.endswith(text[-2_000:])
    [path] = _evicted_files(harness)
    assert path.startswith("large_tool_results/chat-42/call_1-")
    assert path.endswith(".txt")
    assert f"`{path}`" in short
    assert "146,000 of 150,000 characters left out" in short
    assert "memory_get" in short
    assert "read_file" in short
    assert harness.get(path) == text

    [event] = events.evicted
    assert (event.session_id, event.tool_name, event.call_id, event.path) == (
        "chat-42",
        "shell",
        "call_1",
        path,
    )
    assert (event.original_chars, event.kept_chars, event.written) == (150_000, len(short), True)
    assert event.stage == "post_acting"

    before = harness.workspace.info(path)
    assert session.after_tool(SHELL, text) == short  # same content: same file, same text
    assert _evicted_files(harness) == [path]
    assert harness.workspace.info(path) == before, "the file was written a second time"
    assert events.evicted[-1].written is False


def test_excluded_tool_result_of_the_same_size_passes_untouched(
    harness: MemoryHarness, events: EventLog
) -> None:
    """read_file is excluded by default: its 150,000 chars come back as they were."""
    text = _output(150_000)
    assert harness.session("chat-42").after_tool(READ, text) == text
    assert _evicted_files(harness) == []
    assert events.evicted == []


def test_threshold_is_strictly_greater(harness: MemoryHarness) -> None:
    """Exactly max_result_chars stays; one more is evicted."""
    session = harness.session("s")
    limit = harness.settings.eviction.max_result_chars
    assert session.after_tool(SHELL, "y" * limit) == "y" * limit
    assert MARKER in session.after_tool(SHELL, "y" * (limit + 1))


def test_reused_call_id_with_new_content_gets_its_own_file(harness: MemoryHarness) -> None:
    """Providers reuse call ids: different content under one id never overwrites."""
    session = harness.session("s")
    session.after_tool(SHELL, _output(90_000, "a"))
    session.after_tool(SHELL, _output(90_000, "b"))
    files = _evicted_files(harness)
    assert len(files) == 2
    assert {harness.get(f)[:1] for f in files} == {"a", "b"}


def test_ids_are_sanitised_into_the_eviction_folder(harness: MemoryHarness) -> None:
    """A hostile session id or call id cannot steer the file out of its folder."""
    call = {**SHELL, "id": "../../../etc/passwd"}
    harness.session("../../outside").after_tool(call, _output(90_000))
    [path] = _evicted_files(harness)
    assert path.count("/") == 2
    assert all(segment not in {".", ".."} for segment in path.split("/"))
    assert path.startswith("large_tool_results/")


def test_async_after_tool_evicts_too(harness: MemoryHarness) -> None:
    short = asyncio.run(harness.session("s").aafter_tool(SHELL, _output(100_000)))
    assert MARKER in short
    assert len(_evicted_files(harness)) == 1


# -- the pre_reasoning sweep -----------------------------------------------------------------


def _transcript(shell_text: str, read_text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "look around"},
        {"role": "assistant", "content": None, "tool_calls": [SHELL, READ]},
        {"role": "tool", "tool_call_id": "call_1", "content": shell_text},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": read_text}],
        },
    ]


def test_sweep_evicts_results_that_bypassed_after_tool(
    harness: MemoryHarness, events: EventLog
) -> None:
    """Tool names come from the assistant call each result answers; the input is not mutated."""
    shell_text, read_text = _output(120_000, "s"), _output(120_000, "r")
    messages = _transcript(shell_text, read_text)
    snapshot = json.loads(json.dumps(messages))
    sent = harness.session("s").before_reasoning(messages)

    assert messages == snapshot, "the caller's messages were changed in place"
    assert MARKER in sent[2]["content"]
    assert sent[2]["content"].startswith(shell_text[:2_000])
    assert sent[3] == messages[3], "read_file output is excluded"
    [event] = events.evicted
    assert (event.tool_name, event.stage) == ("shell", "pre_reasoning")
    assert harness.get(event.path) == shell_text

    again = harness.session("s").before_reasoning(sent)
    assert again == sent, "a placeholder is never evicted again"
    assert len(events.evicted) == 1


def test_sweep_handles_text_parts_and_result_names(harness: MemoryHarness) -> None:
    """Content given as text parts is evicted into one text part; a result's own name counts."""
    text = _output(90_000)
    messages = [
        {
            "role": "tool",
            "tool_call_id": "orphan",
            "name": "shell",
            "content": [
                {"type": "text", "text": text[:50_000]},
                {"type": "text", "text": text[50_000:]},
            ],
        },
        {"role": "tool", "tool_call_id": "orphan2", "name": "grep_files", "content": text},
    ]
    sent = harness.session("s").before_reasoning(messages)
    [part] = sent[0]["content"]
    assert part["type"] == "text"
    assert MARKER in part["text"]
    assert sent[1]["content"] == text
    [path] = _evicted_files(harness)
    assert harness.get(path) == text


def test_sweep_checks_mappings_that_are_not_dicts_and_skips_other_objects(
    harness: MemoryHarness,
) -> None:
    """The sweep's dict fast path must not lose read-only mappings or trip on odd items.

    If this fails, the length check in ``pre_reasoning`` only looks at ``dict`` messages
    (or assumes every item has ``.get``).
    """
    text = _output(120_000)
    proxy = MappingProxyType(
        {"role": "tool", "tool_call_id": "p", "name": "shell", "content": text}
    )
    parts = {"role": "tool", "tool_call_id": "q", "name": "shell", "content": [{"text": text}]}
    ctx = TurnContext(session=harness.session("s"), messages=[proxy, parts])  # type: ignore[list-item]
    ToolResultEvictor().pre_reasoning(ctx)
    assert MARKER in ctx.messages[0]["content"]
    assert MARKER in ctx.messages[1]["content"][0]["text"]
    assert proxy["content"] == text, "the caller's mapping was changed"
    assert [r.call_id for r in ctx.outcomes["eviction"]] == ["p", "q"]

    odd: list[Any] = [None, "a plain string", {"role": "tool", "content": "short"}]
    ctx = TurnContext(session=harness.session("s"), messages=list(odd))
    ToolResultEvictor().pre_reasoning(ctx)
    assert ctx.messages == odd
    assert "eviction" not in ctx.outcomes


def test_sweep_and_after_tool_share_the_file(harness: MemoryHarness, events: EventLog) -> None:
    """The same result evicted by after_tool and later by the sweep maps to one file."""
    text = _output(100_000)
    session = harness.session("s")
    session.after_tool(SHELL, text)
    session.before_reasoning(_transcript(text, "short"))
    assert len(_evicted_files(harness)) == 1
    assert [e.written for e in events.evicted] == [True, False]


class CountingTransform:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def transform_memory_text(self, text: str, source: str) -> None:
        self.calls += source == "eviction"


def test_resent_raw_history_costs_no_second_transform(
    workspace_target: WorkspaceTarget, events: EventLog
) -> None:
    """A caller that keeps its raw history gets the same placeholder each turn, cheaply."""
    counting = CountingTransform()
    messages = _transcript(_output(120_000), "short")
    with workspace_target.open(
        plugins=[counting, events], maintenance={"enabled": False}
    ) as harness:
        session = harness.session("s")
        sent = [session.before_reasoning(messages) for _ in range(3)]
    assert sent[0] == sent[1] == sent[2]
    assert counting.calls == 1
    assert [e.written for e in events.evicted] == [True, False, False]


# -- secrets, failures, settings -------------------------------------------------------------


class Redactor:
    @hookimpl
    def transform_memory_text(self, text: str, source: str) -> str | None:
        return text.replace("sk-SECRET", "[redacted]") if source == "eviction" else None


def test_evicted_text_passes_transform_memory_text(workspace_target: WorkspaceTarget) -> None:
    """A redactor keeps secrets a tool printed out of the file and out of the preview."""
    text = "API_KEY=sk-SECRET\n" + _output(100_000) + "token sk-SECRET\n"
    with workspace_target.open(plugins=[Redactor()], maintenance={"enabled": False}) as harness:
        short = harness.session("s").after_tool(SHELL, text)
        [path] = _evicted_files(harness)
        stored = harness.get(path)
    assert "sk-SECRET" not in stored
    assert "sk-SECRET" not in short
    assert stored == text.replace("sk-SECRET", "[redacted]")


def test_write_failure_keeps_the_result_whole(
    harness: MemoryHarness, events: EventLog, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """When the file cannot be written the tool output is kept, never lost."""

    def refuse(path: str, *args: Any, **kwargs: Any) -> None:
        raise WorkspaceError(f"write {path!r} failed: disk full")

    monkeypatch.setattr(harness.workspace, "write_text", refuse)
    monkeypatch.setattr(harness.workspace, "create_text", refuse)
    text = _output(100_000)
    with caplog.at_level(logging.WARNING, logger="harnessmem.eviction"):
        assert harness.session("s").after_tool(SHELL, text) == text
    assert "kept it whole" in caplog.text
    assert "disk full" in caplog.text
    assert events.evicted == []


def test_disabled_eviction_and_blocked_plugin_keep_results(tmp_path: Path) -> None:
    text = _output(100_000)
    with MemoryHarness.open(tmp_path / "a", eviction={"enabled": False}) as harness:
        assert harness.session("s").after_tool(SHELL, text) == text
    with MemoryHarness.open(tmp_path / "b", plugins={"disable": ["eviction"]}) as harness:
        assert "eviction" not in harness.kernel.hooks.plugin_names()
        assert harness.session("s").after_tool(SHELL, text) == text


def test_custom_limits_and_folder(workspace_target: WorkspaceTarget) -> None:
    with workspace_target.open(
        eviction={"max_result_chars": 1_000, "preview_chars": 100, "path": "spill/"},
    ) as harness:
        short = harness.session("s").after_tool(SHELL, _output(5_000))
        [path] = harness.workspace.list("spill")
        assert short.startswith(_output(5_000)[:100])
        assert harness.get(path) == _output(5_000)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"preview_chars": 40_000}, "eviction.preview_chars"),
        ({"path": "../elsewhere"}, "eviction.path"),
        ({"path": "/"}, "eviction.path"),
    ],
)
def test_unusable_settings_fail_when_the_harness_opens(
    tmp_path: Path, section: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        MemoryHarness.open(tmp_path / "ws", eviction=section)


# Local only: the test ages the file with os.utime; an object store's LastModified is the
# upload time and cannot be set back.
def test_old_file_is_renewed_so_pruning_does_not_take_it_from_a_live_placeholder(
    tmp_path: Path, events: EventLog
) -> None:
    """Re-evicting content whose file is older than half the retention writes it again."""
    clock = FakeClock(now=time.time())  # file times are real; the clock starts at real now
    text = _output(90_000)
    options: dict[str, Any] = {"clock": clock, "maintenance": {"enabled": False}}
    with MemoryHarness.open(tmp_path / "ws", plugins=[events], **options) as harness:
        harness.session("s").after_tool(SHELL, text)
        [path] = _evicted_files(harness)
        local = harness.workspace.local_path(path)
        assert local is not None
        young = clock.now - 14 * 86400  # under half of the 30 days: left alone
        os.utime(local, (young, young))
    with MemoryHarness.open(tmp_path / "ws", plugins=[events], **options) as harness:
        harness.session("s").after_tool(SHELL, text)
        assert local.stat().st_mtime == young
        old = clock.now - 16 * 86400
        os.utime(local, (old, old))
    with MemoryHarness.open(tmp_path / "ws", plugins=[events], **options) as harness:
        harness.session("s").after_tool(SHELL, text)
    assert [e.written for e in events.evicted] == [True, False, True]
    assert local.stat().st_mtime > old
    assert local.read_text() == text


def test_eviction_is_a_registered_entry_point_plugin(harness: MemoryHarness) -> None:
    """Built-ins are plugins: the eviction plugin comes from harnessmem's own entry point."""
    assert "eviction" in harness.kernel.hooks.plugin_names()
    rows = {r.name: r for r in installed_plugins(PluginSettings()) if r.kind == "plugin"}
    assert rows["eviction"].distribution == "harnessmem"
    assert rows["eviction"].value == "harnessmem.eviction:ToolResultEvictor"


def test_outcomes_record_evictions(harness: MemoryHarness) -> None:
    ctx = harness.session("s")._context(_transcript(_output(90_000), "x"))
    harness.kernel.hooks.pre_reasoning(ctx)
    [record] = ctx.outcomes["eviction"]
    assert isinstance(record, EvictedResult)
    assert (record.tool_name, record.call_id, record.written) == ("shell", "call_1", True)


# -- the placeholder -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet="ab\n", min_size=2, max_size=400),
    preview=st.integers(min_value=0, max_value=250),
)
def test_placeholder_keeps_head_and_tail_and_counts_lines(text: str, preview: int) -> None:
    """Head and tail survive exactly; the note's numbers describe the part left out."""
    path = eviction_path("large_tool_results", "s", "c", text)
    short = placeholder(text, path, preview)
    keep = min(preview, len(text) // 2)
    assert short.startswith(text[:keep])
    assert short.endswith(text[len(text) - keep :])
    assert f"{len(text) - 2 * keep:,} of {len(text):,} characters left out" in short
    assert f"`{path}`" in short
    lines = text.splitlines() or [""]
    first = int(short.split("(lines ")[1].split("-")[0].replace(",", ""))
    assert 1 <= first <= len(lines)
    assert text[:keep].count("\n") + 1 == first


def test_eviction_path_is_content_addressed() -> None:
    a = eviction_path("large_tool_results/", "chat 1", "call:1", "abc")
    assert a == eviction_path("large_tool_results", "chat 1", "call:1", "abc")
    assert a != eviction_path("large_tool_results", "chat 1", "call:1", "abd")
    assert a.startswith("large_tool_results/chat_1-")
    assert a.endswith(".txt")


# -- several processes -----------------------------------------------------------------------

_CHILD = """
import json, sys
from harnessmem import MemoryHarness, hookimpl
url, options, text_file = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
text = open(text_file).read()
written = []

class Seen:
    @hookimpl
    def on_tool_result_evicted(self, event):
        written.append(event.written)

h = MemoryHarness.open(url, workspace={"storage_options": options}, plugins=[Seen()],
                       maintenance={"enabled": False})
call = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
print("ready", flush=True)
sys.stdin.readline()
short = h.session("shared").after_tool(call, text)
h.close()
print(json.dumps({"written": written, "short": short}), flush=True)
"""


def test_processes_evicting_the_same_result_write_it_once(
    workspace_target: WorkspaceTarget, tmp_path: Path, run_together: RunTogether
) -> None:
    """4 processes evict one result at the same moment: one file, written by exactly one."""
    url, options = workspace_target.url, workspace_target.storage_options
    text = _output(150_000)
    text_file = tmp_path / "output.txt"
    text_file.write_text(text)
    results = run_together(_CHILD, [[url, json.dumps(options), str(text_file)]] * 4)
    assert sorted(w for r in results for w in r["written"]) == [False, False, False, True]
    assert len({r["short"] for r in results}) == 1
    with MemoryHarness.open(
        url, workspace={"storage_options": options}, maintenance={"enabled": False}
    ) as harness:
        [path] = _evicted_files(harness)
        assert harness.get(path) == text
