"""What a replay did, turn by turn and in sum: :class:`ReplayReport`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class ReplayEvent:
    """One thing the harness did during a replay.

    ``index``: the 1-based transcript position of the message being handled when it
    happened (``len(messages)`` for the final flush and consolidation). ``time``: the
    harness clock then. ``kind``: ``"compaction"``, ``"flush"``, ``"eviction"``,
    ``"consolidation"`` or ``"context_over_budget"``. ``phase``: the lifecycle point
    (``before_reasoning``, ``after_tool``, ``after_call``, ``day end``, ``end``).
    ``data``: the event's fields, JSON-ready.
    """

    index: int
    time: float
    kind: str
    phase: str
    data: dict[str, Any]


@dataclass
class ReplayReport:
    """What a replay did (:func:`replay` returns it; ``harnessmem replay`` prints it)."""

    session_id: str
    workspace: str
    messages: int
    agent_calls: int = 0
    model_calls: int = 0
    tool_results: int = 0
    transcript_tokens: int = 0
    peak_context_tokens: int = 0
    final_context_messages: int = 0
    final_context_tokens: int = 0
    first_time: float | None = None
    last_time: float | None = None
    shifted_by: float = 0.0
    events: list[ReplayEvent] = field(default_factory=list)
    memory_tokens: int = 0
    memory_budget: int = 0
    flush_failures: list[str] = field(default_factory=list)
    #: Tokens sent to the agent's model, summed over its calls (what the loop sent).
    sent_tokens: int = 0
    #: Prompt tokens of the harness's own model calls during the replay, by purpose.
    upkeep_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def upkeep_share(self) -> float | None:
        """Upkeep tokens over the tokens the agent's model was sent (None before a call)."""
        if not self.sent_tokens:
            return None
        return sum(self.upkeep_tokens.values()) / self.sent_tokens

    def of_kind(self, kind: str) -> list[ReplayEvent]:
        """The events of one kind, in order."""
        return [event for event in self.events if event.kind == kind]

    @property
    def facts(self) -> int:
        """Facts written to daily logs (after dedup and redaction)."""
        return sum(len(e.data["entries"]) for e in self.of_kind("flush"))

    @property
    def daily_logs(self) -> list[str]:
        """The daily logs the flushes wrote, in the order first written."""
        return list(dict.fromkeys(e.data["path"] for e in self.of_kind("flush")))

    def totals(self) -> dict[str, Any]:
        """Counts of each kind of event, and the figures a summary line needs."""
        compactions = self.of_kind("compaction")
        consolidations = self.of_kind("consolidation")
        return {
            "compactions": sum(1 for e in compactions if e.data["compacted"]),
            "degraded_compactions": sum(1 for e in compactions if e.data["degraded"]),
            "flushes": len(self.of_kind("flush")),
            "facts": self.facts,
            "daily_logs": self.daily_logs,
            "evictions": len(self.of_kind("eviction")),
            "evicted_chars": sum(e.data["original_chars"] for e in self.of_kind("eviction")),
            "consolidations": sum(1 for e in consolidations if e.data["status"] == "consolidated"),
            "flush_failures": len(self.flush_failures),
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``harnessmem replay --report json``)."""
        data = asdict(self)
        data["totals"] = self.totals()
        return data


def merge_reports(reports: Sequence[ReplayReport]) -> ReplayReport:
    """One report for replays of several runs into one workspace, one after the other:
    counts summed, events in order (their ``index`` counted through all the runs'
    messages), the final context and MEMORY.md of the last."""
    first, last = reports[0], reports[-1]
    events: list[ReplayEvent] = []
    offset = 0
    for report in reports:
        events += [replace(e, index=e.index + offset) for e in report.events]
        offset += report.messages
    times = [t for r in reports for t in (r.first_time, r.last_time) if t is not None]
    upkeep: dict[str, int] = {}
    for report in reports:
        for purpose, tokens in report.upkeep_tokens.items():
            upkeep[purpose] = upkeep.get(purpose, 0) + tokens
    return ReplayReport(
        session_id=", ".join(r.session_id for r in reports)
        if len(reports) <= 3
        else f"{first.session_id} ... {last.session_id} ({len(reports)} sessions)",
        workspace=first.workspace,
        messages=sum(r.messages for r in reports),
        agent_calls=sum(r.agent_calls for r in reports),
        model_calls=sum(r.model_calls for r in reports),
        tool_results=sum(r.tool_results for r in reports),
        transcript_tokens=sum(r.transcript_tokens for r in reports),
        peak_context_tokens=max(r.peak_context_tokens for r in reports),
        final_context_messages=last.final_context_messages,
        final_context_tokens=last.final_context_tokens,
        first_time=min(times) if times else None,
        last_time=max(times) if times else None,
        shifted_by=max(r.shifted_by for r in reports),
        events=events,
        memory_tokens=last.memory_tokens,
        memory_budget=last.memory_budget,
        flush_failures=[f for r in reports for f in r.flush_failures],
        sent_tokens=sum(r.sent_tokens for r in reports),
        upkeep_tokens=upkeep,
    )
