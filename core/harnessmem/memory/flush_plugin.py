"""The built-in flush plugin (entry point ``flush``, exported by
:mod:`harnessmem.memory.flush`): a flush after every call, and of what batching held back
when the conversation ends; the kernel's ``MemoryFlusher`` does the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessmem.memory._flush_result import FlushResult
from harnessmem.plugins import hookimpl

if TYPE_CHECKING:
    from harnessmem.events import TurnContext

__all__ = ["MemoryFlushPlugin"]


class MemoryFlushPlugin:
    """The built-in ``post_call`` plugin (entry point ``flush``): flush after every call.

    Never lets a flush failure break the agent's loop: the error is logged, the mark stays,
    and ``ctx.outcomes["flush"]`` holds the ``failed`` :class:`FlushResult`.
    """

    name = "flush"

    # tryfirst: this call's facts reach the log before any post_call maintenance runs.
    @hookimpl(tryfirst=True)
    def post_call(self, ctx: TurnContext) -> None:
        try:
            kernel = ctx.kernel
            session_id = ctx.session_id
        except AttributeError:
            return  # not a session's turn (a bare facade call)
        settings = kernel.settings.flush
        if not settings.enabled:
            ctx.outcomes["flush"] = FlushResult(session_id, "disabled")
            return
        flusher = kernel.flusher
        try:
            if settings.mode == "background":
                ctx.outcomes["flush"] = flusher.submit(ctx.messages, session_id=session_id)
            else:
                ctx.outcomes["flush"] = flusher.flush(
                    ctx.messages, session_id=session_id, backoff=True, batch=True
                )
        except Exception as exc:
            ctx.outcomes["flush"] = flusher.failed(session_id, exc)

    @hookimpl(tryfirst=True)
    def session_end(self, ctx: TurnContext) -> None:
        """Flush what batching held back: the conversation ended (``Session.close``)."""
        kernel, session_id = ctx.kernel, ctx.session_id
        if not kernel.settings.flush.enabled:
            return
        flusher = kernel.flusher
        try:
            result = flusher.finish(session_id, ctx.messages)
        except Exception as exc:
            result = flusher.failed(session_id, exc)
        if result is not None:
            ctx.outcomes["flush"] = result
