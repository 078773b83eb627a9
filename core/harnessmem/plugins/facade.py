"""The hook facade: typed calls of every hook, the only code that calls ``pm.hook``.

**Order, sync and async alike.** The lifecycle hooks (``pre_reasoning``, ``post_acting``,
``post_call``, ``session_end``, ``overflow``) promise that each implementation sees what the
ones before it did. pluggy calls the implementations one after the other, but an ``async``
implementation only returns a coroutine, which would run after all of them. So, for the
length of a lifecycle call, each plain implementation is called through a shim that
finishes an awaitable it returns before pluggy calls the next one:

- from the sync session API, in a new event loop (``asyncio.run``), and refused inside a
  running loop (a sync call from async code would block it: use the ``a...`` twin);
- from the async API, the implementations run in a worker thread (a sync one, such as the
  built-in compactor asking a model for a summary, never blocks the caller's loop), and the
  shim hands each awaitable to the caller's loop and waits for it there.

A ``firstresult`` hook (``overflow``) thus sees an async implementation's real answer: one
that returns None lets the next implementation answer, as a sync one would. Wrappers
(``wrapper=True``, ``hookwrapper=True``) are generators around the rest and are left as
they are.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import pluggy

from harnessmem.errors import PluginError

if TYPE_CHECKING:
    from harnessmem.events import (
        BudgetExceededEvent,
        CompactionResult,
        ContextOverBudgetEvent,
        MaintenanceEvent,
        MemoryConsolidatedEvent,
        MemoryFlushedEvent,
        ToolResultEvictedEvent,
        TurnContext,
    )
    from harnessmem.settings import HarnessSettings

__all__ = ["HookFacade"]

#: How the current lifecycle call finishes an awaitable an implementation returned (None:
#: outside one, the value is passed on as it is).
_FINISH: contextvars.ContextVar[Callable[[Awaitable[Any]], Any] | None] = contextvars.ContextVar(
    "harnessmem_hook_finish", default=None
)


def _run_sync(value: Any, hook: str) -> Any:
    """Finish an awaitable returned to a sync caller; refuse inside a running loop."""
    if not inspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(value))
    if inspect.iscoroutine(value):
        value.close()
    raise PluginError(
        f"a {hook} implementation returned an awaitable inside a running event loop",
        hint="call the async session method (its name starts with 'a') from async code",
    )


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def _shim(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` finishing what it returns, when that is awaitable, before returning."""

    def finishing(*args: Any) -> Any:
        value = function(*args)
        finish = _FINISH.get()
        if finish is not None and inspect.isawaitable(value):
            return finish(value)
        return value

    finishing.__wrapped__ = function  # type: ignore[attr-defined]
    finishing._harnessmem_shim = True  # type: ignore[attr-defined]
    return finishing


def _on_loop(loop: asyncio.AbstractEventLoop) -> Callable[[Awaitable[Any]], Any]:
    """Finish an awaitable on ``loop`` (the caller's, waiting on the worker thread this runs
    in) and wait for its result."""

    def finish(value: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(_await(value), loop).result()

    return finish


class HookFacade:
    """Typed calls of every hook; the only code that touches ``pm.hook``."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self._hook = pm.hook

    @contextmanager
    def _in_order(self, name: str, finish: Callable[[Awaitable[Any]], Any]) -> Iterator[None]:
        """For this call of hook ``name``: every plain implementation is shimmed, and the
        shims finish awaitables with ``finish``."""
        for impl in getattr(self._hook, name).get_hookimpls():
            if impl.wrapper or impl.hookwrapper:
                continue
            if not getattr(impl.function, "_harnessmem_shim", False):
                impl.function = _shim(impl.function)
        token = _FINISH.set(finish)
        try:
            yield
        finally:
            _FINISH.reset(token)

    def _call(self, name: str, **kwargs: Any) -> Any:
        """Call lifecycle hook ``name`` from sync code, each implementation in turn."""
        with self._in_order(name, lambda value: _run_sync(value, name)):
            return getattr(self._hook, name)(**kwargs)

    async def _acall(self, name: str, **kwargs: Any) -> Any:
        """Call lifecycle hook ``name`` from async code: in a worker thread, each
        implementation's awaitable finished on the caller's loop before the next runs."""
        with self._in_order(name, _on_loop(asyncio.get_running_loop())):
            # to_thread runs the call in a copy of this context: the shims see _FINISH.
            return await asyncio.to_thread(getattr(self._hook, name), **kwargs)

    # configuration
    def configure(self, settings: HarnessSettings) -> None:
        self._hook.harnessmem_configure.call_historic(kwargs={"settings": settings})

    # lifecycle, sync
    def pre_reasoning(self, ctx: TurnContext) -> None:
        self._call("pre_reasoning", ctx=ctx)

    def post_acting(self, ctx: TurnContext, call: dict[str, Any], result: str) -> None:
        self._call("post_acting", ctx=ctx, call=call, result=result)

    def post_call(self, ctx: TurnContext) -> None:
        self._call("post_call", ctx=ctx)

    def session_end(self, ctx: TurnContext) -> None:
        self._call("session_end", ctx=ctx)

    def overflow(self, ctx: TurnContext, error: BaseException) -> list[dict[str, Any]] | None:
        """The first shorter list any implementation offers, or None."""
        return cast("list[dict[str, Any]] | None", self._call("overflow", ctx=ctx, error=error))

    # lifecycle, async
    async def apre_reasoning(self, ctx: TurnContext) -> None:
        await self._acall("pre_reasoning", ctx=ctx)

    async def apost_acting(self, ctx: TurnContext, call: dict[str, Any], result: str) -> None:
        await self._acall("post_acting", ctx=ctx, call=call, result=result)

    async def apost_call(self, ctx: TurnContext) -> None:
        await self._acall("post_call", ctx=ctx)

    async def asession_end(self, ctx: TurnContext) -> None:
        await self._acall("session_end", ctx=ctx)

    async def aoverflow(
        self, ctx: TurnContext, error: BaseException
    ) -> list[dict[str, Any]] | None:
        return cast(
            "list[dict[str, Any]] | None", await self._acall("overflow", ctx=ctx, error=error)
        )

    # observers
    def compaction(self, event: CompactionResult) -> None:
        self._hook.on_compaction(event=event)

    def memory_flushed(self, event: MemoryFlushedEvent) -> None:
        self._hook.on_memory_flushed(event=event)

    def memory_consolidated(self, event: MemoryConsolidatedEvent) -> None:
        self._hook.on_memory_consolidated(event=event)

    def context_over_budget(self, event: ContextOverBudgetEvent) -> None:
        self._hook.on_context_over_budget(event=event)

    def budget_exceeded(self, event: BudgetExceededEvent) -> None:
        self._hook.on_budget_exceeded(event=event)

    def tool_result_evicted(self, event: ToolResultEvictedEvent) -> None:
        self._hook.on_tool_result_evicted(event=event)

    def maintenance(self, event: MaintenanceEvent) -> None:
        self._hook.on_maintenance(event=event)

    # transforms
    def transform_memory_text(self, text: str, source: str) -> str:
        """Run the chain: each implementation gets the previous one's text."""
        caller = self._hook.transform_memory_text
        # pluggy calls implementations last-registered first; honour that order.
        for impl in reversed(caller.get_hookimpls()):
            if impl.wrapper or impl.hookwrapper:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} wraps transform_memory_text, which is a chain",
                    hint="implement it as a plain hook that returns the new text",
                )
            kwargs = {"text": text, "source": source}
            result = impl.function(*(kwargs[name] for name in impl.argnames))
            if inspect.isawaitable(result):
                raise PluginError(
                    f"transform_memory_text of plugin {impl.plugin_name!r} returned an awaitable",
                    hint="transform_memory_text must return a str or None synchronously",
                )
            if result is not None:
                if not isinstance(result, str):
                    raise PluginError(
                        f"transform_memory_text of plugin {impl.plugin_name!r} returned "
                        f"{type(result).__name__}, not str or None"
                    )
                text = result
        return text

    def plugin_names(self) -> list[str]:
        return sorted(name for name, plugin in self.pm.list_name_plugin() if plugin is not None)
