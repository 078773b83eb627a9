"""Objects handed to hook implementations: the turn context and the observer events.

The lifecycle hooks (``pre_reasoning``, ``post_acting``, ``post_call``,
``overflow``) receive a :class:`TurnContext`; plugins change what
the session returns by assigning to its fields. Observer hooks receive one
frozen event each, which the behaviour that emits it fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.maintenance import MaintenanceReport
    from harnessmem.session import Session
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

__all__ = [
    "BudgetExceededEvent",
    "CompactionEvent",
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
    """

    session: Session
    messages: list[Message]
    tool_result: str | None = None
    outcomes: dict[str, Any] = field(default_factory=dict)
    #: ``pre_reasoning`` of a manual compaction (:meth:`Session.compact`): compact now,
    #: whatever the triggers, and pass ``compact_focus`` to the summariser.
    compact: bool = False
    compact_focus: str | None = None

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
class CompactionEvent:
    """A conversation was compacted, or a compaction was postponed.

    ``trigger``: ``"messages"``, ``"tokens"``, ``"overflow"`` or ``"manual"``
    (:meth:`harnessmem.Session.compact`). ``degraded``: the
    summariser failed, answered junk or is backed off, so the summary was built without a
    model (``summary_source="automatic"``; ``reason`` says why), or dropped messages have no
    copy in the session log. ``postponed``: a failed flush or
    offload kept every message this time. ``dropped``: messages that left the context.
    ``flush``: the pre-compaction flush's status (``"done (written)"``,
    ``"failed: ..."``, ``"disabled"``, ...) and ``flushed_messages`` how many it read.
    ``offloaded``: messages appended to ``offload_path`` now, on ``offload_lines``
    (first, last). ``usage``: the summariser's ``model``, ``prompt_tokens``,
    ``completion_tokens`` and ``cost``. ``truncated_args``: tool arguments cut;
    ``shrunk``: kept messages moved to files to fit. ``summary_source``: ``"model"`` or
    ``"automatic"`` (empty when postponed); ``summariser_failures``: the summariser's
    failures in a row; ``summariser_skipping``: compactions that will not ask it (back-off).
    """

    session_id: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    degraded: bool = False
    offload_path: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    trigger: str = ""
    reason: str = ""
    postponed: bool = False
    dropped: int = 0
    flush: str = ""
    flushed_messages: int = 0
    offloaded: int = 0
    offload_lines: tuple[int, int] | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    truncated_args: int = 0
    shrunk: int = 0
    summary_source: str = ""
    summariser_failures: int = 0
    summariser_skipping: int = 0


@dataclass(frozen=True)
class MemoryFlushedEvent:
    """Facts were appended to a daily log.

    ``entries`` are the facts written (after redaction and dedup); ``messages`` the number
    of unflushed messages the model read; ``duplicates`` the facts it extracted that were
    already on file and were not written again.
    """

    session_id: str
    path: str
    entries: tuple[str, ...]
    messages: int
    details: Mapping[str, Any] = field(default_factory=dict)
    duplicates: int = 0
    prompt_tokens: int = 0
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

    accepted: bool
    files: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    status: str = ""
    entries_before: int = 0
    entries_lost: int = 0
    preserved_appends: int = 0
    history_path: str | None = None


@dataclass(frozen=True)
class BudgetExceededEvent:
    """Today's model spend reached ``model.budget``: upkeep jobs now run offline.

    Until the day (in ``workspace.timezone``) ends, ``diverted`` purposes are answered by
    the extractive backend; compaction summaries still use the configured model. A limit
    is None when it is not set.
    """

    day: str
    tokens: int
    cost: float
    daily_tokens: int | None
    daily_cost: float | None
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

    session_id: str
    path: str
    tokens: int
    max_tokens: int
    omitted_lines: tuple[int, int]
    consolidation_requested: bool = False
    omitted_bytes: int = 0
    unread_bytes: int = 0


@dataclass(frozen=True)
class ToolResultEvictedEvent:
    """An oversized tool result was moved to a file."""

    session_id: str
    tool_name: str
    call_id: str
    path: str
    original_chars: int
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

    steps: Mapping[str, str]
    started: float
    finished: float
    details: Mapping[str, Any] = field(default_factory=dict)
    trigger: str = "manual"
    report: MaintenanceReport | None = None
