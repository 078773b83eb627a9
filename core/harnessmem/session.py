"""``Session``: one conversation's lifecycle points, as the agent loop calls them.

Each point builds a :class:`~harnessmem.events.TurnContext` and calls its hook through
the harness's :class:`~harnessmem.plugins.HookFacade`; the plugins do the work. Built by
:meth:`MemoryHarness.session <harnessmem.harness.MemoryHarness.session>` and importable
from :mod:`harnessmem.harness` (and :mod:`harnessmem`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harnessmem.errors import MessageFormatError
from harnessmem.events import TurnContext
from harnessmem.messages import SeenMessages, check_changes, check_messages, check_tool_call

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel

__all__ = ["Session"]

Message = dict[str, Any]
# Calls that carry no conversation: they must not make the next call recheck everything.
_NO_MESSAGES = frozenset({"after_tool", "aafter_tool"})


class Session:
    """One conversation's lifecycle points; built by :meth:`MemoryHarness.session`."""

    def __init__(self, kernel: Kernel, session_id: str) -> None:
        self.kernel = kernel
        self.id = session_id
        #: What the plugins did during the latest lifecycle call (its ``ctx.outcomes``:
        #: ``"compaction"``, ``"eviction"``, ``"flush"``, ...), filled while it runs.
        self.last_outcomes: dict[str, Any] = {}
        # Whether close() ran since the last lifecycle call: leaving a ``with`` block after
        # an explicit close() does not end the conversation a second time.
        self._ended = False
        # The messages of the previous call, so that each call checks only what changed.
        self._seen = SeenMessages()

    def _context(
        self, messages: Sequence[Message], where: str = "session", **fields: Any
    ) -> TurnContext:
        self.kernel.check_open()
        self._ended = where in ("close", "aclose")
        # Checked here, once per call, so no plugin meets a str, a None or a bottomless
        # structure where it expects messages (and fails with a plain Python error).
        # Only the messages that differ from the previous call's are checked again.
        if where in _NO_MESSAGES:
            ctx = TurnContext(session=self, messages=check_messages(messages, where), **fields)
        else:
            checked, changes = check_changes(messages, where, self._seen)
            ctx = TurnContext(session=self, messages=checked, changes=changes, **fields)
        self.last_outcomes = ctx.outcomes
        return ctx

    def _tool_context(self, call: Any, result: Any, where: str) -> TurnContext:
        if not isinstance(result, str):
            raise MessageFormatError(
                f"{where}: result is {type(result).__name__}, expected the tool's output as text",
                hint="turn the tool's output into a str (json.dumps for data) before passing it",
            )
        check_tool_call(call, where)
        return self._context([], where, tool_result=result)

    # sync lifecycle -------------------------------------------------------------------------

    def before_reasoning(self, messages: Sequence[Message]) -> list[Message]:
        """The list to send to the model (plugins may evict and compact)."""
        ctx = self._context(messages, "before_reasoning")
        self.kernel.hooks.pre_reasoning(ctx)
        return ctx.messages

    def compact(self, messages: Sequence[Message], *, focus: str | None = None) -> list[Message]:
        """Compact now, whatever the triggers (``/compact`` in a chat): ``before_reasoning``
        with compaction forced. ``focus`` tells the summariser what to keep in particular.

        The older messages are flushed, logged and summarised as at any compaction, and
        ``on_compaction`` observers get the event (trigger ``"manual"``); a conversation no
        longer than ``compaction.keep_messages`` comes back as it is, and so does every
        conversation while ``compaction.enabled`` is off.
        """
        ctx = self._compaction_context(messages, focus, "compact")
        self.kernel.hooks.pre_reasoning(ctx)
        return ctx.messages

    def _compaction_context(
        self, messages: Sequence[Message], focus: str | None, where: str
    ) -> TurnContext:
        if focus is not None and not isinstance(focus, str):
            raise MessageFormatError(f"{where}: focus is {type(focus).__name__}, not text")
        ctx = self._context(messages, where)
        ctx.compact, ctx.compact_focus = True, (focus or "").strip() or None
        return ctx

    def after_tool(self, call: Mapping[str, Any], result: str) -> str:
        """The text to put in the tool message for ``call`` (plugins may evict it)."""
        ctx = self._tool_context(call, result, "after_tool")
        self.kernel.hooks.post_acting(ctx, copy.deepcopy(dict(call)), result)
        return ctx.tool_result if ctx.tool_result is not None else result

    def after_call(self, messages: Sequence[Message]) -> TurnContext:
        """End of an agent call: plugins flush new facts; returns the turn's context."""
        ctx = self._context(messages, "after_call")
        self.kernel.hooks.post_call(ctx)
        return ctx

    def close(self, messages: Sequence[Message] | None = None) -> TurnContext:
        """End of the conversation: plugins finish its upkeep (the flush writes what its
        batching held back). Pass the final ``messages`` when you have them; without
        them the flush uses the last list ``after_call`` saw. The session may go on
        being used afterwards (a new conversation under the same id continues it)."""
        ctx = self._context(list(messages or ()), "close")
        self.kernel.hooks.session_end(ctx)
        return ctx

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.kernel.closed and not self._ended:
            self.close()

    def recover_overflow(self, messages: Sequence[Message], error: BaseException) -> list[Message]:
        """A shorter list to retry with after a context-length error, or re-raise ``error``."""
        ctx = self._context(messages, "recover_overflow")
        shorter = self.kernel.hooks.overflow(ctx, error)
        if shorter is None:
            raise error
        return shorter

    # async twins ----------------------------------------------------------------------------

    async def abefore_reasoning(self, messages: Sequence[Message]) -> list[Message]:
        ctx = self._context(messages, "abefore_reasoning")
        await self.kernel.hooks.apre_reasoning(ctx)
        return ctx.messages

    async def acompact(
        self, messages: Sequence[Message], *, focus: str | None = None
    ) -> list[Message]:
        ctx = self._compaction_context(messages, focus, "acompact")
        await self.kernel.hooks.apre_reasoning(ctx)
        return ctx.messages

    async def aafter_tool(self, call: Mapping[str, Any], result: str) -> str:
        ctx = self._tool_context(call, result, "aafter_tool")
        await self.kernel.hooks.apost_acting(ctx, copy.deepcopy(dict(call)), result)
        return ctx.tool_result if ctx.tool_result is not None else result

    async def aafter_call(self, messages: Sequence[Message]) -> TurnContext:
        ctx = self._context(messages, "aafter_call")
        await self.kernel.hooks.apost_call(ctx)
        return ctx

    async def aclose(self, messages: Sequence[Message] | None = None) -> TurnContext:
        ctx = self._context(list(messages or ()), "aclose")
        await self.kernel.hooks.asession_end(ctx)
        return ctx

    async def arecover_overflow(
        self, messages: Sequence[Message], error: BaseException
    ) -> list[Message]:
        ctx = self._context(messages, "arecover_overflow")
        shorter = await self.kernel.hooks.aoverflow(ctx, error)
        if shorter is None:
            raise error
        return shorter

    # context and tools ----------------------------------------------------------------------

    def system_context(self) -> str:
        """The memory block for the system prompt: MEMORY.md as data, bounded.

        Over ``context.max_tokens`` the block shows a truncation marker naming the lines
        left out, and the harness fires ``on_context_over_budget`` and requests a
        consolidation (see :mod:`harnessmem.memory.context`). "" when ``context.enabled`` is off.
        """
        self.kernel.check_open()
        return self.kernel.context.render(self.id)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of the memory tools (see :mod:`harnessmem.tools`).

        ``memory_search``, ``memory_get``, ``session_search``, ``memory_save``, and
        ``memory_forget`` when ``tools.forget`` is on; pass them with your own tools and
        route calls of these names to :meth:`call_tool`.
        """
        from harnessmem.tools import tool_schemas

        return tool_schemas(self.kernel.settings)

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run memory tool ``name`` with the model's ``arguments`` (dict or JSON text).

        Returns the text for the tool message. Mistakes the model can correct (bad
        arguments, a path it may not read, a timeout) come back as ``Error: ...`` text;
        an unknown ``name`` raises ``ValueError``.
        """
        from harnessmem.audit import in_session
        from harnessmem.tools import call_tool

        self.kernel.check_open()
        with in_session(self.id):  # a memory_save or memory_forget is this session's change
            return call_tool(self.kernel, name, arguments)

    def __repr__(self) -> str:
        return f"<Session {self.id!r} of {self.kernel.workspace.url}>"
