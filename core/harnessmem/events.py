"""Objects handed to hook implementations: the turn context and the observer events.

The lifecycle hooks (``pre_reasoning``, ``post_acting``, ``post_call``,
``on_context_overflow``) receive a :class:`TurnContext`; plugins change what
the session returns by assigning to its fields. Observer hooks receive one
frozen event each, which the behaviour that emits it fills in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness, Session
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

__all__ = [
    "CompactionEvent",
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

    ``messages`` is the conversation the session will return (``pre_reasoning``,
    ``on_context_overflow``) or has just finished (``post_call``); plugins may
    replace the list. ``tool_result`` is the text ``after_tool`` will return;
    plugins may replace it. ``outcomes`` collects the result objects the
    behaviours produced during this call (e.g. ``"compaction"``), for callers
    and tests to inspect.
    """

    session: Session
    messages: list[Message]
    tool_result: str | None = None
    outcomes: dict[str, Any] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def harness(self) -> MemoryHarness:
        return self.session.harness

    @property
    def settings(self) -> HarnessSettings:
        return self.session.harness.settings

    @property
    def workspace(self) -> Workspace:
        return self.session.harness.workspace

    @property
    def clock(self) -> Callable[[], float]:
        return self.session.harness.clock


@dataclass(frozen=True)
class CompactionEvent:
    """A conversation was compacted (``degraded`` when the summariser failed)."""

    session_id: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    degraded: bool = False
    offload_path: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryFlushedEvent:
    """Facts were appended to a daily log."""

    session_id: str
    path: str
    entries: tuple[str, ...]
    messages: int
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryConsolidatedEvent:
    """MEMORY.md was rewritten from daily logs (or a rewrite was rejected)."""

    accepted: bool
    files: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResultEvictedEvent:
    """An oversized tool result was moved to a file."""

    session_id: str
    tool_name: str
    call_id: str
    path: str
    original_chars: int
    kept_chars: int


@dataclass(frozen=True)
class MaintenanceEvent:
    """A maintenance tick finished; ``steps`` maps each step to its outcome."""

    steps: Mapping[str, str]
    started: float
    finished: float
    details: Mapping[str, Any] = field(default_factory=dict)
