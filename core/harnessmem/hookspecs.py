"""Hook specifications: the contract between the harness and its plugins.

Each spec is a typed signature and a docstring; there is no logic here.
Implement a hook with ``@harnessmem.hookimpl`` on a function or method whose
name is the hook's name; an implementation may take fewer arguments than the
spec, never more. Call order is pluggy's: last registered first, adjusted by
``tryfirst`` / ``trylast``. The built-in behaviours are plugins like any other.

A lifecycle hook may return an awaitable when its docstring says so. It is finished
before the next implementation is called, so sync and ``async def`` implementations of
one hook run in call order, each seeing what the ones before it did, and an async
``overflow`` that answers None lets the next one answer. The async session methods
(``abefore_reasoning``, ...) run the implementations in a worker thread and each
awaitable on the caller's event loop; the sync methods run it in a new event loop, or
raise ``PluginError`` when called inside a running one (see
:mod:`harnessmem.plugins.facade`).

Every docstring follows one template, so that docs/hooks.md is generated from it
(``python docs/_generate.py``) and tests/test_docs.py can check it: a summary line,
optional paragraphs, then these sections in this order, each a header line and an
indented body::

    When:        when it fires, and from which method
    Arguments:   one ``name: meaning`` item per parameter of the spec, in order
    Result:      what the return value means and how several implementations' combine
    Awaitable:   "Yes." or "No.", then what that means for an ``async def`` one
    Since:       the harnessmem version that added the hook
    Deprecated:  optional: since when, what replaces it, the version that removes it

An observer's event is documented where it is declared: each field of its dataclass in
:mod:`harnessmem.events` has a ``#:`` comment, from which docs/hooks.md lists the fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Awaitable

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

PROJECT = "harnessmem"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec(historic=True)
def harnessmem_configure(settings: HarnessSettings) -> None:
    """The harness was created: read and check your options.

    When:
        Once per harness, while it is being built, before the workspace is opened.
        Historic: a plugin registered later is called at registration, with the same
        settings.
    Arguments:
        settings: The validated ``HarnessSettings``. Your options are
            ``settings.plugins.settings["<your plugin name>"]``; validate them with your
            own pydantic model (``harnessmem.plugins.plugin_options`` does it and names the
            dotted setting in its ``ConfigError``).
    Result:
        Ignored. Raise ``harnessmem.ConfigError`` naming the dotted setting when your
        options are wrong: the harness is not built, and ``harnessmem config validate``
        reports it.
    Awaitable:
        No. It runs while the harness is built; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def pre_reasoning(ctx: TurnContext) -> Awaitable[None] | None:
    """Before each model call: change what is about to be sent.

    The built-ins evict oversized tool results, compact long conversations and (with
    ``context.recall``) add the memory recalled for the latest user message here.

    When:
        In ``Session.before_reasoning(messages)`` (and ``abefore_reasoning``), before each
        model call.
    Arguments:
        ctx: The turn's ``TurnContext``. ``ctx.messages`` is a copy of the list the agent
            is about to send (never the caller's list): edit or replace it to change what
            is sent. To change a message, put a new dict in its place: the dicts are the
            caller's, and the plugins after yours (the eviction sweep, the compactor's
            count) look again only where the list differs from the one the session checked
            or the caller changed something (``ctx.changes``); an edit made inside a dict
            reaches them at the next call. Record what you did in ``ctx.outcomes``.
    Result:
        Ignored; the session returns ``ctx.messages``. Every implementation runs, each
        seeing the changes of the ones before it.
    Awaitable:
        Yes. ``abefore_reasoning`` awaits it; ``before_reasoning`` runs it to completion
        (``PluginError`` inside a running event loop).
    Since:
        0.1
    """


@hookspec
def post_acting(ctx: TurnContext, call: dict[str, Any], result: str) -> Awaitable[None] | None:
    """After a tool ran: change what goes into the tool message.

    When:
        In ``Session.after_tool(call, result)`` (and ``aafter_tool``), after a tool ran
        and before its result goes into the conversation.
    Arguments:
        ctx: The turn's ``TurnContext``. Assign ``ctx.tool_result`` (it starts as
            ``result``) to change the text that goes into the tool message.
        call: The OpenAI tool call, a copy: ``id``, ``function.name``,
            ``function.arguments``.
        result: The tool's original output.
    Result:
        Ignored; the session returns ``ctx.tool_result``. Every implementation runs;
        later ones see the ``ctx.tool_result`` of earlier ones.
    Awaitable:
        Yes. ``aafter_tool`` awaits it; ``after_tool`` runs it to completion
        (``PluginError`` inside a running event loop).
    Since:
        0.1
    """


@hookspec
def post_call(ctx: TurnContext) -> Awaitable[None] | None:
    """At the end of an agent call: learn from the conversation.

    The built-in memory flush extracts new facts here, once enough new conversation has
    accumulated (``flush.batch_tokens``).

    When:
        In ``Session.after_call(messages)`` (and ``aafter_call``), at the end of an agent
        call.
    Arguments:
        ctx: The turn's ``TurnContext``; ``ctx.messages`` is the whole conversation so
            far. Treat it as read-only.
    Result:
        Ignored. Every implementation runs.
    Awaitable:
        Yes. ``aafter_call`` awaits it; ``after_call`` runs it to completion
        (``PluginError`` inside a running event loop).
    Since:
        0.1
    """


@hookspec
def session_end(ctx: TurnContext) -> Awaitable[None] | None:
    """The conversation ended: write what was held back, release per-session state.

    The built-in memory flush writes what its batching held back here.

    When:
        In ``Session.close(messages)`` (and ``aclose``, and when a
        ``with harness.session(id)`` block ends), once per conversation.
    Arguments:
        ctx: The turn's ``TurnContext``; ``ctx.messages`` is the final conversation when
            the caller passed it, else empty.
    Result:
        Ignored. Every implementation runs.
    Awaitable:
        Yes. ``aclose`` awaits it; ``close`` runs it to completion (``PluginError``
        inside a running event loop).
    Since:
        0.1
    """


@hookspec(firstresult=True)
def overflow(
    ctx: TurnContext, error: BaseException
) -> Awaitable[list[dict[str, Any]] | None] | list[dict[str, Any]] | None:
    """The model rejected the conversation as too long: offer a shorter one.

    The built-in compactor answers last (``trylast``), so your implementation gets the
    first word.

    When:
        In ``Session.recover_overflow(messages, error)`` (and ``arecover_overflow``),
        after the model refused ``ctx.messages`` for its length.
    Arguments:
        ctx: The turn's ``TurnContext``; ``ctx.messages`` is the conversation the model
            refused.
        error: The provider's context-length error.
    Result:
        A shorter message list to retry with, or None when you cannot help. The first
        non-None answer wins and later implementations are skipped; when every one
        returns None the session re-raises ``error``.
    Awaitable:
        Yes. ``arecover_overflow`` awaits it; ``recover_overflow`` runs it to completion
        (``PluginError`` inside a running event loop).
    Since:
        0.1
    """


@hookspec
def on_compaction(event: CompactionResult) -> None:
    """A conversation was compacted, or a compaction was postponed.

    See docs/compaction.md.

    When:
        After the built-in compactor acted in ``before_reasoning`` (a trigger fired) or
        ``recover_overflow``, whenever it changed the list or postponed.
    Arguments:
        event: The frozen ``CompactionResult``, the object ``ctx.outcomes["compaction"]``
            holds.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_memory_flushed(event: MemoryFlushedEvent) -> None:
    """Facts were appended to a daily log.

    See docs/memory.md.

    When:
        After a flush wrote new facts (``after_call``, ``Session.close``,
        ``harness.flush``, or the flush before a compaction); not when every fact was a
        duplicate.
    Arguments:
        event: A frozen ``MemoryFlushedEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_memory_consolidated(event: MemoryConsolidatedEvent) -> None:
    """MEMORY.md was rewritten from the daily logs, or a rewrite was rejected.

    When:
        After a consolidation asked the model (``harness.consolidate()``, a maintenance
        tick): accepted, unchanged, rejected or failed. Not when there was nothing new,
        another process was consolidating, or it is disabled.
    Arguments:
        event: A frozen ``MemoryConsolidatedEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_budget_exceeded(event: BudgetExceededEvent) -> None:
    """Today's model spend reached ``model.budget``: flush and consolidation now run offline.

    Until the day ends (in ``workspace.timezone``) the offline extractive backend answers
    them; compaction summaries still use the configured model.

    When:
        Once per day and process, when the first upkeep call past
        ``model.budget.daily_tokens`` or ``model.budget.daily_cost`` is diverted.
    Arguments:
        event: A frozen ``BudgetExceededEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_context_over_budget(event: ContextOverBudgetEvent) -> None:
    """MEMORY.md was over ``context.max_tokens`` when it was put in the system prompt.

    The injected copy keeps its head and tail around a visible marker, and a consolidation
    was requested to trim the file.

    When:
        In ``Session.system_context()`` (and at every ``before_reasoning`` that injects
        it), once per version of the file.
    Arguments:
        event: A frozen ``ContextOverBudgetEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_tool_result_evicted(event: ToolResultEvictedEvent) -> None:
    """A tool result was moved to a file (by the built-in ``eviction`` plugin).

    When:
        In ``after_tool`` for a result over ``eviction.max_result_chars``, in the
        ``before_reasoning`` sweep of results that bypassed it, or when compaction shrank
        a kept result that alone was too large to fit.
    Arguments:
        event: A frozen ``ToolResultEvictedEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def on_maintenance(event: MaintenanceEvent) -> None:
    """A maintenance tick finished.

    See docs/maintenance.md.

    When:
        After every tick (``harness.maintain()``, the scheduler thread,
        ``harnessmem maintain``), including one skipped because another process held the
        maintenance lease.
    Arguments:
        event: A frozen ``MaintenanceEvent``.
    Result:
        Ignored. Observer: every implementation runs.
    Awaitable:
        No. Observers are called synchronously; an ``async def`` one is never awaited.
    Since:
        0.1
    """


@hookspec
def transform_memory_text(text: str, source: str) -> str | None:
    """Every text about to be persisted or sent out passes through here first.

    The built-in secret redactor is one implementation; plugins/harnessmem-example's
    word filter is another.

    When:
        Before harnessmem writes text to the workspace: facts of a flush, a
        ``memory_save``, a consolidated MEMORY.md, offloaded messages, an evicted tool
        result; and before a span carries text (``telemetry.capture_text``: a search's
        query, the records written or found).
    Arguments:
        text: The text to be written, as the previous implementation left it.
        source: What is being written: ``"flush"``, ``"save"``, ``"consolidation"``,
            ``"offload"``, ``"eviction"`` or ``"telemetry"`` (text a span captures, with
            ``telemetry.capture_text``).
    Result:
        The new text, or None to keep it unchanged. Implementations run in call order as
        a chain: each receives the text the previous one returned. Wrappers
        (``wrapper=True``) are refused; a result that is not a str or None raises
        ``PluginError``.
    Awaitable:
        No. It must return synchronously; an awaitable raises ``PluginError``.
    Since:
        0.1
    """
