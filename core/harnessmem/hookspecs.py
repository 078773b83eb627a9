"""Hook specifications: the contract between the harness and its plugins.

Each spec is a typed signature and a docstring; there is no logic here.
Implement a hook with ``@harnessmem.hookimpl`` on a function or method whose
name is the hook's name; an implementation may take fewer arguments than the
spec, never more. Call order is pluggy's: last registered first, adjusted by
``tryfirst`` / ``trylast``. The built-in behaviours are plugins like any other.

A lifecycle hook may return an awaitable when the docstring says so: the async
session methods (``abefore_reasoning``, ...) await it; the sync methods run it
to completion, or raise ``PluginError`` when called inside a running event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from harnessmem.events import (
        BudgetExceededEvent,
        CompactionEvent,
        ContextOverBudgetEvent,
        MaintenanceEvent,
        MemoryConsolidatedEvent,
        MemoryFlushedEvent,
        ToolResultEvictedEvent,
        TurnContext,
    )
    from harnessmem.settings import HarnessSettings

PROJECT = "harnessmem"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec(historic=True)
def harnessmem_configure(settings: HarnessSettings) -> None:
    """Called once when a harness is created, with its validated settings.

    Historic: a plugin registered later is called at registration. Read your
    options from ``settings.plugins.settings[<your plugin name>]`` and
    validate them with your own pydantic model. Return value ignored; may not
    return an awaitable.
    """


@hookspec
def pre_reasoning(ctx: TurnContext) -> Awaitable[None] | None:
    """Before each model call, from ``Session.before_reasoning(messages)``.

    ``ctx.messages`` is a copy of the list the agent is about to send. Replace
    or edit it to change what is sent (the built-ins evict oversized tool
    results and compact long conversations here). Every implementation runs;
    each sees the changes of those before it. Record what you did in
    ``ctx.outcomes``. May return an awaitable.
    """


@hookspec
def post_acting(ctx: TurnContext, call: dict[str, Any], result: str) -> Awaitable[None] | None:
    """After a tool ran, from ``Session.after_tool(call, result)``.

    ``call`` is the OpenAI tool call (``id``, ``function.name``,
    ``function.arguments``); ``result`` is the tool's original output.
    Assign ``ctx.tool_result`` to change what goes into the tool message (it
    starts as ``result``; later implementations see earlier changes). Every
    implementation runs. May return an awaitable.
    """


@hookspec
def post_call(ctx: TurnContext) -> Awaitable[None] | None:
    """At the end of an agent call, from ``Session.after_call(messages)``.

    ``ctx.messages`` is the whole conversation so far; treat it as read-only.
    The built-in memory flush extracts new facts here. Every implementation
    runs. May return an awaitable.
    """


@hookspec
def session_end(ctx: TurnContext) -> Awaitable[None] | None:
    """The conversation ended, from ``Session.close(messages)``.

    ``ctx.messages`` is the final conversation when the caller passed it, else
    empty. The built-in memory flush writes what its batching held back here.
    Every implementation runs. May return an awaitable.
    """


@hookspec(firstresult=True)
def overflow(
    ctx: TurnContext, error: BaseException
) -> Awaitable[list[dict[str, Any]] | None] | list[dict[str, Any]] | None:
    """The model rejected ``ctx.messages`` as too long (``error``), from
    ``Session.recover_overflow(messages, error)``.

    Return a shorter message list to retry with, or None when you cannot
    help. First result wins: the first non-None answer is used and later
    implementations are skipped (the built-in compactor runs last). When every
    implementation returns None the session re-raises ``error``. May return an
    awaitable. Named ``on_context_overflow`` before 0.2.
    """


@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "the hook on_context_overflow is now called overflow (same arguments and result); "
        "rename your implementation: the old name goes away in harnessmem 0.3"
    ),
)
def on_context_overflow(
    ctx: TurnContext, error: BaseException
) -> Awaitable[list[dict[str, Any]] | None] | list[dict[str, Any]] | None:
    """Deprecated name of :func:`overflow`, kept working until 0.3.

    Implementations under this name are asked before those of ``overflow``
    (they were written when theirs was the first word); registering one warns.
    May return an awaitable, as ``overflow``.
    """


@hookspec
def on_compaction(event: CompactionEvent) -> None:
    """A conversation was compacted. Observer: every implementation runs; return ignored."""


@hookspec
def on_memory_flushed(event: MemoryFlushedEvent) -> None:
    """Facts were appended to a daily log. Observer: every implementation runs; return ignored."""


@hookspec
def on_memory_consolidated(event: MemoryConsolidatedEvent) -> None:
    """MEMORY.md was rewritten or a rewrite was rejected. Observer; return ignored."""


@hookspec
def on_budget_exceeded(event: BudgetExceededEvent) -> None:
    """Today's model spend reached ``model.budget``; flush and consolidation now run offline.

    Fires once per day and process, when the first upkeep call is diverted to the
    extractive backend. Observer: every implementation runs; return ignored.
    """


@hookspec
def on_context_over_budget(event: ContextOverBudgetEvent) -> None:
    """MEMORY.md was over ``context.max_tokens`` when ``system_context()`` rendered it.

    Fires once per version of the file, after a visible truncation marker was put in the
    injected copy and a consolidation was requested. Observer: every implementation runs;
    return ignored.
    """


@hookspec
def on_tool_result_evicted(event: ToolResultEvictedEvent) -> None:
    """A tool result was moved to a file. Observer: every implementation runs; return ignored."""


@hookspec
def on_maintenance(event: MaintenanceEvent) -> None:
    """A maintenance tick finished. Observer: every implementation runs; return ignored."""


@hookspec
def transform_memory_text(text: str, source: str) -> str | None:
    """Every text about to be persisted passes through here first.

    ``source`` says what is being written: ``"flush"``, ``"save"``,
    ``"consolidation"``, ``"offload"`` or ``"eviction"``. Implementations
    run in call order as a chain: each receives the text the previous one
    returned; return the new text, or None to keep it unchanged. The
    built-in secret redactor is one implementation. May not return an
    awaitable; wrappers (``wrapper=True``) are refused for this hook.
    """
