"""Objects handed to hook implementations: the turn context and the observer events.

The lifecycle hooks (``pre_reasoning``, ``post_acting``, ``post_call``,
``overflow``) receive a :class:`TurnContext`; plugins change what
the session returns by assigning to its fields. Observer hooks receive one
frozen event each, which the behaviour that emits it fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion
    from harnessmem.kernel import Kernel
    from harnessmem.maintenance import MaintenanceReport
    from harnessmem.memory.transcripts import OffloadResult
    from harnessmem.messages import MessageChanges
    from harnessmem.session import Session
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

__all__ = [
    "BudgetExceededEvent",
    "CompactionResult",
    "ContextOverBudgetEvent",
    "MaintenanceEvent",
    "MemoryConsolidatedEvent",
    "MemoryFlushedEvent",
    "ToolResultEvictedEvent",
    "TurnContext",
]

Message = dict[str, Any]


@dataclass
class TurnContext:
    """State of one lifecycle call, shared by every plugin that handles it.

    ``compact`` is True in the ``pre_reasoning`` of :meth:`Session.compact`: a
    compaction plugin compacts then whatever its triggers say, keeping what
    ``compact_focus`` names in the summary.
    ``messages`` is the conversation the session will return (``pre_reasoning``,
    ``overflow``) or has just finished (``post_call``); plugins may
    replace the list. ``tool_result`` is the text ``after_tool`` will return;
    plugins may replace it. ``outcomes`` collects the result objects the
    behaviours produced during this call (e.g. ``"compaction"``), for callers
    and tests to inspect.

    ``changes`` is what the session's check found: which messages differ from its
    previous call's. A plugin doing work per message keeps a
    :class:`~harnessmem.messages.Follower` to redo it only where something changed. To
    change a message, put a new object in its place in ``ctx.messages`` (the message
    dicts are the caller's): the plugins after it and the next turn then see the change.
    """

    session: Session
    messages: list[Message]
    tool_result: str | None = None
    outcomes: dict[str, Any] = field(default_factory=dict)
    #: ``pre_reasoning`` of a manual compaction (:meth:`Session.compact`): compact now,
    #: whatever the triggers, and pass ``compact_focus`` to the summariser.
    compact: bool = False
    compact_focus: str | None = None
    changes: MessageChanges | None = field(default=None, repr=False, compare=False)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def kernel(self) -> Kernel:
        return self.session.kernel

    @property
    def settings(self) -> HarnessSettings:
        return self.session.kernel.settings

    @property
    def workspace(self) -> Workspace:
        return self.session.kernel.workspace

    @property
    def clock(self) -> Callable[[], float]:
        return self.session.kernel.clock


@dataclass(frozen=True)
class CompactionResult:
    """What compaction did in one call: ``ctx.outcomes["compaction"]``, and the event that
    ``on_compaction`` observers get whenever it rewrote the list or postponed."""

    #: The session.
    session_id: str
    #: The list was rewritten.
    compacted: bool = False
    #: ``"messages"``, ``"tokens"``, ``"overflow"`` or ``"manual"``
    #: (:meth:`harnessmem.Session.compact`); ``""`` when nothing fired.
    trigger: str = ""
    #: Messages before compaction.
    messages_before: int = 0
    #: Messages after it.
    messages_after: int = 0
    #: Tokens before compaction.
    tokens_before: int = 0
    #: Tokens after it.
    tokens_after: int = 0
    #: Messages that left the context.
    dropped: int = 0
    #: The summariser failed, answered junk or is backed off, so the summary was built
    #: without a model; or dropped messages have no copy in the session log.
    degraded: bool = False
    #: A trigger fired but a failed flush or offload kept every message this time.
    postponed: bool = False
    #: Why it was degraded or postponed; empty otherwise.
    reason: str = ""
    #: The summary written into the context, or None.
    summary: str | None = None
    #: The summariser's answer with its token counts, model and cost, or None.
    usage: Completion | None = None
    #: The pre-compaction flush's status: ``"done (written)"``, ``"failed: ..."``,
    #: ``"disabled"`` or ``"nothing to flush"``.
    flush: str = "disabled"
    #: The :class:`~harnessmem.memory.flush.FlushResult` of that flush, when there is one.
    flush_result: Any = None
    #: What went to the session log (path, messages appended, their lines), or None.
    offload: OffloadResult | None = None
    #: Old tool-call arguments cut in what is sent.
    truncated_args: int = 0
    #: Files that kept messages were moved to so the result fits.
    shrunk: tuple[str, ...] = ()
    #: The result is under the limit it had to meet (the triggers, or the overflow budget).
    fits: bool = True
    #: ``"model"`` (the summariser's answer) or ``"automatic"`` (built without a model);
    #: empty when postponed.
    summary_source: str = ""
    #: The summariser's failures in a row so far.
    summariser_failures: int = 0
    #: Compactions that will not ask the summariser before it is tried again (back-off).
    summariser_skipping: int = 0

    @property
    def offload_path(self) -> str | None:
        """The session log the dropped messages went to (None without one)."""
        return self.offload.path if self.offload is not None else None

    @property
    def offloaded(self) -> int:
        """Messages appended to the session log now."""
        return self.offload.appended if self.offload is not None else 0

    @property
    def offload_lines(self) -> tuple[int, int] | None:
        """Their (first, last) lines in the session log, or None."""
        offload = self.offload
        if offload is None or offload.first_line is None or offload.last_line is None:
            return None
        return (offload.first_line, offload.last_line)

    @property
    def flushed_messages(self) -> int:
        """Messages the pre-compaction flush read."""
        return int(getattr(self.flush_result, "messages", 0) or 0)

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (the replay report keeps them); the summary and
        the flush's and offload's objects are left out, their figures kept."""
        usage = self.usage
        return {
            **{
                f.name: getattr(self, f.name)
                for f in fields(self)
                if f.name not in ("summary", "usage", "flush_result", "offload", "shrunk")
            },
            "shrunk": list(self.shrunk),
            "offload_path": self.offload_path,
            "offloaded": self.offloaded,
            "offload_lines": self.offload_lines,
            "flushed_messages": self.flushed_messages,
            "usage": {}
            if usage is None
            else {
                "model": usage.model,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cost": usage.cost,
            },
        }


@dataclass(frozen=True)
class MemoryFlushedEvent:
    """Facts were appended to a daily log.

    ``entries`` are the facts written (after redaction and dedup); ``messages`` the number
    of unflushed messages the model read; ``duplicates`` the facts it extracted that were
    already on file and were not written again.
    """

    #: The session flushed.
    session_id: str
    #: The daily log written (workspace-relative).
    path: str
    #: The facts written, after redaction and dedup.
    entries: tuple[str, ...]
    #: Unflushed messages the model read.
    messages: int
    #: Extra figures, free-form (``duplicates`` today).
    details: Mapping[str, Any] = field(default_factory=dict)
    #: Extracted facts already on file, not written again.
    duplicates: int = 0
    #: The flush model's prompt tokens.
    prompt_tokens: int = 0
    #: Its completion tokens.
    completion_tokens: int = 0


@dataclass(frozen=True)
class MemoryConsolidatedEvent:
    """MEMORY.md was rewritten from daily logs (or a rewrite was rejected).

    ``status`` is the :class:`~harnessmem.memory.consolidation.ConsolidationResult` status
    (``consolidated``, ``unchanged``, ``rejected``, ``failed``); ``reason`` says why a
    rewrite was rejected. ``entries_before`` / ``entries_lost`` count the prior MEMORY.md
    entries and those the rewrite dropped; ``preserved_appends`` the ``memory_save``
    entries made while the model ran, kept after the rewrite; ``history_path`` is where the
    previous version went.
    """

    #: Whether the rewrite replaced MEMORY.md.
    accepted: bool
    #: The daily logs read.
    files: tuple[str, ...]
    #: MEMORY.md's tokens before.
    tokens_before: int
    #: Its tokens after.
    tokens_after: int
    #: Why a rewrite was rejected or failed.
    reason: str = ""
    #: Extra figures, free-form (``pending``: more log text waits for the next run).
    details: Mapping[str, Any] = field(default_factory=dict)
    #: ``consolidated``, ``unchanged``, ``rejected`` or ``failed``.
    status: str = ""
    #: Prior MEMORY.md entries.
    entries_before: int = 0
    #: Prior entries the rewrite dropped.
    entries_lost: int = 0
    #: ``memory_save`` entries made while the model ran, kept.
    preserved_appends: int = 0
    #: Where the previous version went (None when nothing was replaced).
    history_path: str | None = None


@dataclass(frozen=True)
class BudgetExceededEvent:
    """Today's model spend reached ``model.budget``: upkeep jobs now run offline.

    Until the day (in ``workspace.timezone``) ends, ``diverted`` purposes are answered by
    the extractive backend; compaction summaries still use the configured model. A limit
    is None when it is not set.
    """

    #: The day (ISO date, workspace time zone).
    day: str
    #: Tokens spent today.
    tokens: int
    #: Money spent today (US dollars).
    cost: float
    #: The token limit, None when not set.
    daily_tokens: int | None
    #: The cost limit, None when not set.
    daily_cost: float | None
    #: The purposes now served offline.
    diverted: tuple[str, ...] = ("flush", "consolidation")


@dataclass(frozen=True)
class ContextOverBudgetEvent:
    """MEMORY.md was over ``context.max_tokens`` when ``system_context()`` rendered it.

    The injected copy kept its head and tail around a visible marker; ``omitted_lines`` is
    the 1-based inclusive line range of MEMORY.md left out (readable with ``memory_get``),
    ``omitted_bytes`` its size. ``consolidation_requested`` says whether maintenance was
    asked to trim the file. A file too large to read whole is read only at its two ends:
    ``unread_bytes`` (> 0) says how much was never read, and ``tokens`` is then an
    estimate from the part read.
    """

    #: The session rendering it.
    session_id: str
    #: The file (``MEMORY.md``).
    path: str
    #: Its tokens (an estimate when ``unread_bytes`` > 0).
    tokens: int
    #: The bound, ``context.max_tokens``.
    max_tokens: int
    #: The 1-based inclusive line range left out, readable with ``memory_get``.
    omitted_lines: tuple[int, int]
    #: Whether maintenance was asked to trim the file.
    consolidation_requested: bool = False
    #: The size of the part left out.
    omitted_bytes: int = 0
    #: How much of a file too large to read whole was never read.
    unread_bytes: int = 0


@dataclass(frozen=True)
class ToolResultEvictedEvent:
    """An oversized tool result was moved to a file."""

    #: The session.
    session_id: str
    #: The tool that produced the result.
    tool_name: str
    #: Its tool call's id.
    call_id: str
    #: The file (workspace-relative; ``harness.get(path)`` reads it).
    path: str
    #: The result's length.
    original_chars: int
    #: The placeholder's length.
    kept_chars: int
    #: False when the file already held this content (nothing was written again).
    written: bool = True
    #: ``"post_acting"`` (from ``after_tool``), ``"pre_reasoning"`` (the sweep) or
    #: ``"compaction"`` (a kept result shrunk so the compacted context fits).
    stage: str = "post_acting"


@dataclass(frozen=True)
class MaintenanceEvent:
    """A maintenance tick finished; ``steps`` maps each step to its outcome.

    An outcome reads ``"done: ..."``, ``"skipped: ..."`` or ``"failed: ..."``. ``trigger``
    says who asked (``"manual"``, ``"interval"`` or ``"request"``); ``report`` is the full
    :class:`~harnessmem.maintenance.MaintenanceReport`.
    """

    #: Each step's outcome, a string starting with ``done``, ``skipped`` or ``failed`` (e.g.
    #: ``"failed: RuntimeError: the model is down"``).
    steps: Mapping[str, str]
    #: When the tick started (harness clock).
    started: float
    #: When it finished.
    finished: float
    #: Extra figures, free-form (empty today).
    details: Mapping[str, Any] = field(default_factory=dict)
    #: ``"manual"``, ``"interval"`` or ``"request"``.
    trigger: str = "manual"
    #: The full ``MaintenanceReport`` (counts per step, what consolidation returned).
    report: MaintenanceReport | None = None
