from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import (
    BackendNotFound,
    HarnessMemError,
    HarnessSettings,
    MemoryHarness,
    PathNotAllowed,
    TurnContext,
    WorkspaceError,
    WorkspaceFileNotFound,
    hookimpl,
)
from harnessmem.cli import EXIT_INPUT, main
from harnessmem.testing.scripted import ScriptedModel

USER = {"role": "user", "content": "book a flight to Lisbon"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


class Recorder:
    """A test plugin that observes and changes what every lifecycle point returns."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    @hookimpl
    def harnessmem_configure(self, settings: HarnessSettings) -> None:
        self.seen.append(("configure", settings.compaction.trigger_messages))

    @hookimpl
    def pre_reasoning(self, ctx: TurnContext) -> None:
        self.seen.append(("pre_reasoning", ctx.session_id, len(ctx.messages)))
        ctx.messages.append({"role": "system", "content": "added by plugin"})
        ctx.outcomes["recorder"] = "ran"

    @hookimpl
    def post_acting(self, ctx: TurnContext, call: dict[str, Any], result: str) -> None:
        self.seen.append(("post_acting", call["id"], result))
        ctx.tool_result = f"[{len(result)} chars]"

    @hookimpl
    def post_call(self, ctx: TurnContext) -> None:
        self.seen.append(("post_call", [m["content"] for m in ctx.messages]))

    @hookimpl
    def overflow(self, ctx: TurnContext, error: BaseException) -> Any:
        if "hopeless" in str(error):
            return None
        return ctx.messages[-1:]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def harness(tmp_path: Path, recorder: Recorder) -> Any:
    with MemoryHarness.open(
        tmp_path / "ws",
        plugins=[recorder],
        compaction={"trigger_messages": 30},
        context={"inject": "manual"},  # the hooks' wiring, not the memory block
    ) as opened:
        yield opened


def test_open_applies_section_overrides_and_configures_plugins(
    harness: MemoryHarness, recorder: Recorder, tmp_path: Path
) -> None:
    assert harness.settings.compaction.trigger_messages == 30
    assert harness.settings.compaction.keep_messages == 20
    assert recorder.seen[0] == ("configure", 30)
    assert (tmp_path / "ws").is_dir()
    assert harness.kernel.index_path == tmp_path / "memory_index.db"


def test_lifecycle_points_call_their_hooks(harness: MemoryHarness, recorder: Recorder) -> None:
    session = harness.session("chat-42")
    assert harness.session("chat-42") is session
    original = [USER]
    sent = session.before_reasoning(original)
    assert sent == [USER, {"role": "system", "content": "added by plugin"}]
    assert original == [USER], "the caller's list is never mutated"
    assert session.after_tool(CALL, "x" * 500) == "[500 chars]"
    ctx = session.after_call([USER, {"role": "assistant", "content": "done"}])
    assert ctx.session_id == "chat-42"
    assert recorder.seen[1:] == [
        ("pre_reasoning", "chat-42", 1),
        ("post_acting", "call_1", "x" * 500),
        ("post_call", ["book a flight to Lisbon", "done"]),
    ]


def test_recover_overflow_uses_plugin_answer_or_reraises(harness: MemoryHarness) -> None:
    session = harness.session("s")
    messages = [USER, {"role": "assistant", "content": "long"}]
    assert session.recover_overflow(messages, ValueError("too long")) == messages[-1:]
    error = ValueError("hopeless")
    with pytest.raises(ValueError, match="hopeless") as info:
        session.recover_overflow(messages, error)
    assert info.value is error


def test_without_plugins_lifecycle_returns_input_unchanged(tmp_path: Path) -> None:
    with MemoryHarness.open(tmp_path / "ws", plugins=[], context={"inject": "manual"}) as harness:
        session = harness.session("plain")
        assert session.before_reasoning([USER]) == [USER]
        assert session.after_tool(CALL, "result") == "result"
        with pytest.raises(RuntimeError, match="model said no"):
            session.recover_overflow([USER], RuntimeError("model said no"))


class AsyncRecorder:
    @hookimpl
    async def pre_reasoning(self, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        ctx.messages = [*ctx.messages, {"role": "user", "content": "async"}]

    @hookimpl
    async def post_acting(self, ctx: TurnContext, result: str) -> None:
        ctx.tool_result = result.upper()

    @hookimpl
    async def overflow(self, ctx: TurnContext) -> list[dict[str, Any]]:
        return []


def test_async_twins_await_async_plugins(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws", plugins=[AsyncRecorder()], context={"inject": "manual"}
    ) as harness:
        session = harness.session("a")

        async def run() -> None:
            assert await session.abefore_reasoning([USER]) == [
                USER,
                {"role": "user", "content": "async"},
            ]
            assert await session.aafter_tool(CALL, "abc") == "ABC"
            assert await session.arecover_overflow([USER], ValueError()) == []
            await session.aafter_call([USER])

        asyncio.run(run())
        # sync methods run async plugins to completion when no loop is running
        assert session.before_reasoning([USER])[-1]["content"] == "async"


class Blocking:
    """Sync hooks that wait until the event loop itself releases them."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.loop_ran: list[str] = []

    def _wait(self, hook: str) -> None:
        # A hook run on the loop's thread would wait here in vain: the loop could not run.
        if not self.release.wait(timeout=10):
            raise AssertionError(f"{hook} blocked the event loop")

    @hookimpl
    def pre_reasoning(self) -> None:
        self._wait("pre_reasoning")

    @hookimpl
    def post_acting(self) -> None:
        self._wait("post_acting")

    @hookimpl
    def post_call(self) -> None:
        self._wait("post_call")

    @hookimpl
    def overflow(self) -> list[dict[str, Any]]:
        self._wait("overflow")
        return []


def test_async_twins_keep_the_event_loop_free_while_sync_hooks_work(tmp_path: Path) -> None:
    """A sync hook (the compactor's summary call, a flush to S3) runs off the loop's thread."""
    blocking = Blocking()
    with MemoryHarness.open(
        tmp_path / "ws", plugins=[blocking], maintenance={"enabled": False}
    ) as harness:
        session = harness.session("a")

        async def alongside(call: Any) -> None:
            task = asyncio.ensure_future(call)
            await asyncio.sleep(0)  # let the call start and reach its hook
            blocking.loop_ran.append("loop")
            blocking.release.set()
            await task
            blocking.release.clear()

        async def run() -> None:
            await alongside(session.abefore_reasoning([USER]))
            await alongside(session.aafter_tool(CALL, "abc"))
            await alongside(session.aafter_call([USER]))
            await alongside(session.arecover_overflow([USER], ValueError()))

        asyncio.run(run())
    assert blocking.loop_ran == ["loop"] * 4


def test_get_reads_memory_files_only(harness: MemoryHarness) -> None:
    harness.workspace.write_text("memory/2026-11-30.md", "one\ntwo\nthree\n")
    assert harness.get("memory/2026-11-30.md") == "one\ntwo\nthree\n"
    assert harness.get("memory/2026-11-30.md", start_line=2, lines=1) == "two\n"
    harness.workspace.write_text("notes/secret.txt", "no")
    with pytest.raises(PathNotAllowed, match="not a memory file"):
        harness.get("notes/secret.txt")
    with pytest.raises(PathNotAllowed):
        harness.get("../outside.md")
    with pytest.raises(ValueError, match="start_line"):
        harness.get("memory/2026-11-30.md", start_line=0)


def test_get_of_a_missing_file_is_a_harnessmem_error(harness: MemoryHarness) -> None:
    """Used to be a bare FileNotFoundError from the store."""
    with pytest.raises(WorkspaceFileNotFound) as caught:
        harness.get("memory/./absent.md", start_line=3)
    error = caught.value
    first, hint = str(error).split("\n")
    assert first == f"harness.get: 'memory/./absent.md' does not exist in {harness.workspace.url}"
    assert hint.startswith("pass a path exactly as search printed it")
    assert error.path == "memory/absent.md"
    # Code that caught the bare error keeps working; the CLI reports bad input.
    assert isinstance(error, FileNotFoundError | HarnessMemError | WorkspaceError)
    assert isinstance(error.__cause__, FileNotFoundError)
    harness.save("The CLI reports a missing file as bad input.")  # a workspace the CLI opens
    args = ["get", "memory/./absent.md", "-s", "3", "-w", str(harness.workspace.url)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == EXIT_INPUT, result.output
    assert "does not exist" in result.stderr


def test_default_backends_are_resolved_by_name(tmp_path: Path) -> None:
    # An unknown index backend fails when the harness is built, before the workspace is made
    # (it used to fail at the first search, after writes had gone through without an index).
    with pytest.raises(BackendNotFound, match=r"index\.backend: no index backend 'no-such-index'"):
        MemoryHarness.open(tmp_path / "ws", index={"backend": "no-such-index"})
    assert not (tmp_path / "ws").exists()
    with (
        MemoryHarness.open(tmp_path / "ws") as harness,
        pytest.raises(ValueError, match="unknown model purpose"),
    ):
        harness.kernel.model_for("poetry")


def test_model_instance_serves_every_purpose(tmp_path: Path) -> None:
    model = ScriptedModel(["ok"])
    with MemoryHarness.open(tmp_path / "ws", model=model) as harness:
        served = [harness.kernel.model_for(p) for p in ("summary", "flush", "consolidation")]
        assert {m.backend for m in served} == {model}


def test_model_routes_per_purpose(fake_distributions: Any, tmp_path: Path) -> None:
    fake_distributions.add(
        "harnessmem-echo",
        {"harnessmem.model": {"echo": "hm_echo:Echo"}},
        {
            "hm_echo": """
            from harnessmem.backends.base import BackendOptions, Completion, ModelBackend

            class EchoOptions(BackendOptions):
                temperature: float = 0.0

            class Echo(ModelBackend):
                Options = EchoOptions
                def complete(self, messages, *, purpose, max_tokens=None):
                    return Completion(purpose, 1, 1, self.context["model_name"])
            """
        },
    )
    with MemoryHarness.open(
        tmp_path / "ws",
        model={
            "backend": "echo",
            "name": "big",
            "options": {"temperature": 0.5},
            "flush": {"name": "small", "options": {"temperature": 0.0}},
        },
    ) as harness:
        summary = harness.kernel.model_for("summary")
        flush = harness.kernel.model_for("flush")
        assert summary.backend is harness.kernel.model_for("consolidation").backend
        assert summary.context["model_name"] == "big"
        assert flush.context["model_name"] == "small"
        assert summary.options.temperature == 0.5
        assert flush.options.temperature == 0.0


def test_closed_harness_refuses_work(tmp_path: Path) -> None:
    harness = MemoryHarness.open(tmp_path / "ws")
    session = harness.session("s")
    harness.close()
    harness.close()  # idempotent
    assert harness.kernel.closed
    with pytest.raises(HarnessMemError, match="is closed"):
        session.before_reasoning([USER])
    with pytest.raises(HarnessMemError, match="is closed"):
        harness.session("t")


def test_bad_session_id(harness: MemoryHarness) -> None:
    with pytest.raises(ValueError, match="session id"):
        harness.session("  ")


def test_from_config(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text(
        f'[workspace]\nurl = "{tmp_path / "cfg-ws"}"\n[compaction]\nkeep_messages = 4\n'
    )
    with MemoryHarness.from_config(config) as harness:
        assert harness.settings.compaction.keep_messages == 4
        assert harness.workspace.local_root == tmp_path / "cfg-ws"


def test_memory_operations_are_wired(tmp_path: Path) -> None:
    model = ScriptedModel("- The user is flying to Lisbon")
    with MemoryHarness.open(tmp_path / "ws", model=model, maintenance={"enabled": False}) as h:
        ctx = h.session("s").after_call([USER])
        assert ctx.outcomes["flush"].written, "the built-in flush plugin runs in after_call"
        assert h.save("Prefers aisle seats").saved
        assert "Prefers aisle seats" in h.session("s").system_context()


def test_import_stays_light() -> None:
    code = (
        "import sys, harnessmem, harnessmem.cli;"
        "from harnessmem import MemoryHarness, HarnessSettings, hookimpl;"
        "heavy = [m for m in ('litellm', 'tiktoken', 's3fs', 'sqlalchemy', 'fsspec', 'botocore')"
        " if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_every_public_name_resolves_and_is_declared_once() -> None:
    """The stub ``__init__.pyi`` is the one table of public names: ``__all__`` and the lazy
    exports come from it, and ``__init__.py`` names none of them."""
    import harnessmem

    package = Path(harnessmem.__file__).parent
    stub = ast.parse((package / "__init__.pyi").read_text(encoding="utf-8"))
    declared = [a.name for n in stub.body if isinstance(n, ast.ImportFrom) for a in n.names]
    assert len(declared) == len(set(declared))
    assert sorted(harnessmem.__all__) == sorted([*declared, "__version__"])
    source = (package / "__init__.py").read_text(encoding="utf-8")
    assert [name for name in declared if name in source] == []
    for name in harnessmem.__all__:
        assert getattr(harnessmem, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        harnessmem.Nope  # noqa: B018


class ConversationEnds:
    """A plugin that keeps per-conversation state and releases it at ``session_end``."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, list[str]]] = []

    @hookimpl
    def session_end(self, ctx: TurnContext) -> None:
        self.ended.append((ctx.session_id, [m["content"] for m in ctx.messages]))


def test_session_end_fires_once_per_close_with_the_final_conversation(tmp_path: Path) -> None:
    ends = ConversationEnds()
    with MemoryHarness.open(tmp_path / "ws", plugins=[ends]) as harness:
        with harness.session("chat-1") as session:
            session.after_call([{"role": "user", "content": "hello"}])
            session.close(
                [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "bye"}]
            )
        assert ends.ended == [("chat-1", ["hello", "bye"])]
        asyncio.run(harness.session("chat-2").aclose())
    assert ends.ended == [("chat-1", ["hello", "bye"]), ("chat-2", [])]
