"""Sync and async implementations of one hook run in pluggy's order, each to completion.

The lifecycle hooks promise that each implementation sees what the ones before it did. An
``async`` implementation returns a coroutine; these tests mix it with sync ones (async
first, sync between, async last) for every lifecycle hook, through the sync session API
and its async twins, and check that each ran, finished, in order, before the next began.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import flight_chat

from harnessmem import ContextOverflowError, MemoryHarness, hookimpl
from harnessmem.events import TurnContext
from harnessmem.testing import ScriptedModel

USER = {"role": "user", "content": "book a flight to Lisbon"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


class Chain:
    """Three implementations of every lifecycle hook: async (tryfirst), sync, async
    (trylast). Each notes what it saw of the others, and leaves its mark on the context."""

    def __init__(self) -> None:
        self.seen: dict[str, list[tuple[str, list[str]]]] = {}

    def _note(self, hook: str, who: str, ctx: TurnContext) -> None:
        marks = ctx.outcomes.setdefault("marks", [])
        self.seen.setdefault(hook, []).append((who, list(marks)))
        marks.append(who)
        if hook == "pre_reasoning":
            ctx.messages = [*ctx.messages, {"role": "user", "content": who}]
        if hook == "post_acting":
            ctx.tool_result = f"{ctx.tool_result or ''}{who}"


class First(Chain):
    async def _run(self, hook: str, ctx: TurnContext) -> None:
        await asyncio.sleep(0)  # a real suspension: the rest must wait for it
        self._note(hook, "first", ctx)

    @hookimpl(tryfirst=True)
    async def pre_reasoning(self, ctx: TurnContext) -> None:
        await self._run("pre_reasoning", ctx)

    @hookimpl(tryfirst=True)
    async def post_acting(self, ctx: TurnContext) -> None:
        await self._run("post_acting", ctx)

    @hookimpl(tryfirst=True)
    async def post_call(self, ctx: TurnContext) -> None:
        await self._run("post_call", ctx)

    @hookimpl(tryfirst=True)
    async def session_end(self, ctx: TurnContext) -> None:
        await self._run("session_end", ctx)


class Middle(Chain):
    @hookimpl
    def pre_reasoning(self, ctx: TurnContext) -> None:
        self._note("pre_reasoning", "middle", ctx)

    @hookimpl
    def post_acting(self, ctx: TurnContext) -> None:
        self._note("post_acting", "middle", ctx)

    @hookimpl
    def post_call(self, ctx: TurnContext) -> None:
        self._note("post_call", "middle", ctx)

    @hookimpl
    def session_end(self, ctx: TurnContext) -> None:
        self._note("session_end", "middle", ctx)


class Last(First):
    @hookimpl(trylast=True)
    async def pre_reasoning(self, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        self._note("pre_reasoning", "last", ctx)

    @hookimpl(trylast=True)
    async def post_acting(self, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        self._note("post_acting", "last", ctx)

    @hookimpl(trylast=True)
    async def post_call(self, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        self._note("post_call", "last", ctx)

    @hookimpl(trylast=True)
    async def session_end(self, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        self._note("session_end", "last", ctx)


EXPECTED = [("first", []), ("middle", ["first"]), ("last", ["first", "middle"])]


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[tuple[MemoryHarness, list[Chain]]]:
    plugins: list[Chain] = [First(), Middle(), Last()]
    with MemoryHarness.open(
        tmp_path / "ws",
        plugins=plugins,
        context={"inject": "manual"},
        maintenance={"enabled": False},
    ) as harness:
        yield harness, plugins


def _seen(plugins: list[Chain], hook: str) -> list[tuple[str, list[str]]]:
    return sorted(
        (entry for plugin in plugins for entry in plugin.seen.get(hook, [])),
        key=lambda entry: len(entry[1]),
    )


def _sync(harness: MemoryHarness) -> dict[str, Any]:
    session = harness.session("sync")
    return {
        "pre_reasoning": session.before_reasoning([USER]),
        "post_acting": session.after_tool(CALL, "result:"),
        "post_call": session.after_call([USER]).outcomes["marks"],
        "session_end": session.close([USER]).outcomes["marks"],
    }


def _async(harness: MemoryHarness) -> dict[str, Any]:
    session = harness.session("async")

    async def run() -> dict[str, Any]:
        return {
            "pre_reasoning": await session.abefore_reasoning([USER]),
            "post_acting": await session.aafter_tool(CALL, "result:"),
            "post_call": (await session.aafter_call([USER])).outcomes["marks"],
            "session_end": (await session.aclose([USER])).outcomes["marks"],
        }

    return asyncio.run(run())


@pytest.mark.parametrize("api", [_sync, _async], ids=["sync", "async"])
def test_each_implementation_sees_the_ones_before_it(
    chain: tuple[MemoryHarness, list[Chain]], api: Callable[[MemoryHarness], dict[str, Any]]
) -> None:
    harness, plugins = chain
    out = api(harness)
    for hook in ("pre_reasoning", "post_acting", "post_call", "session_end"):
        assert _seen(plugins, hook) == EXPECTED, hook
    assert [m["content"] for m in out["pre_reasoning"]][-3:] == ["first", "middle", "last"]
    assert out["post_acting"] == "result:firstmiddlelast"
    assert out["post_call"] == ["first", "middle", "last"]
    assert out["session_end"] == ["first", "middle", "last"]


# -- overflow: firstresult ---------------------------------------------------------------------


class DeclinesLater:
    """An async overflow implementation that looks, then leaves recovery to the others."""

    def __init__(self) -> None:
        self.asked = 0

    @hookimpl(tryfirst=True)
    async def overflow(self, ctx: TurnContext) -> list[dict[str, Any]] | None:
        await asyncio.sleep(0)
        self.asked += 1
        return None


def _conversation(turns: int = 12) -> list[dict[str, Any]]:
    return flight_chat(turns, "Book the cheaper one.")


@pytest.mark.parametrize("api", ["sync", "async"])
def test_an_async_overflow_that_declines_lets_the_compactor_recover(
    tmp_path: Path, api: str
) -> None:
    summary = "## SESSION INTENT\nx\n## SUMMARY\ny\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
    declines = DeclinesLater()
    with MemoryHarness.open(
        tmp_path / "ws",
        plugins=[declines],
        model=ScriptedModel(lambda m, purpose: summary if purpose == "summary" else "NO_REPLY"),
        maintenance={"enabled": False},
        flush={"enabled": False},
    ) as harness:
        session = harness.session("o")
        messages, error = _conversation(), ContextOverflowError("too long")
        if api == "sync":
            retry = session.recover_overflow(messages, error)
        else:
            retry = asyncio.run(session.arecover_overflow(messages, error))
    assert declines.asked == 1
    assert len(retry) < len(messages), "the built-in compactor answered"
    assert retry[-1]["content"] == "Book the cheaper one."


class Answers:
    @hookimpl(tryfirst=True)
    async def overflow(self, ctx: TurnContext) -> list[dict[str, Any]] | None:
        await asyncio.sleep(0)
        return ctx.messages[-1:]


def test_an_async_overflow_answer_is_the_answer(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws", plugins=[Answers()], maintenance={"enabled": False}
    ) as harness:
        session = harness.session("o")
        assert session.recover_overflow([USER], ContextOverflowError("x")) == [USER]
        assert asyncio.run(session.arecover_overflow([USER], ContextOverflowError("x"))) == [USER]


def test_an_async_implementation_runs_on_the_caller_s_loop(tmp_path: Path) -> None:
    """From the async API, an async implementation's coroutine runs on the caller's event
    loop (its loop-bound resources work), the sync ones in a worker thread."""
    loops: list[asyncio.AbstractEventLoop] = []

    class OnLoop:
        @hookimpl
        async def post_call(self, ctx: TurnContext) -> None:
            loops.append(asyncio.get_running_loop())

    with MemoryHarness.open(
        tmp_path / "ws", plugins=[OnLoop()], maintenance={"enabled": False}
    ) as harness:
        session = harness.session("l")

        async def run() -> asyncio.AbstractEventLoop:
            await session.aafter_call([USER])
            return asyncio.get_running_loop()

        caller = asyncio.run(run())
    assert loops == [caller]
