"""The replay itself: a conversation fed through a harness turn by turn on a clock of its
own, with what each turn did recorded (see :mod:`harnessmem.replay`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.messages import TIME_KEYS, message_time
from harnessmem.plugins import hookimpl
from harnessmem.replay.report import ReplayEvent, ReplayReport

if TYPE_CHECKING:
    from harnessmem.events import (
        CompactionResult,
        ContextOverBudgetEvent,
        MemoryFlushedEvent,
        ToolResultEvictedEvent,
    )
    from harnessmem.harness import MemoryHarness
    from harnessmem.memory.consolidation import ConsolidationResult


Message = dict[str, Any]
_TIME_KEYS = TIME_KEYS
#: Roles that start a new agent call (a joined file of runs has system messages inside).
_BOUNDARY_ROLES = ("user", "system", "developer")


# ------------------------------------------------------------------------------ the clock


class ReplayClock:
    """The harness clock of a replay: the current message's time, shifted; else real time."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._fixed: float | None = None

    def set(self, moment: float | None) -> None:
        """Stop at ``moment`` (None: follow real time again)."""
        self._fixed = moment

    def __call__(self) -> float:
        return self._fixed if self._fixed is not None else self._now()

    def now(self) -> float:
        """The time this clock follows when no message's time is set (real time by default)."""
        return self._now()


# ------------------------------------------------------------------------------ the recorder


class _Recorder:
    """A plugin that turns the observer hooks into :class:`ReplayEvent` rows."""

    name = "replay-recorder"

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.index = 0
        self.phase = ""
        self.events: list[ReplayEvent] = []

    def add(self, kind: str, data: dict[str, Any], phase: str | None = None) -> None:
        self.events.append(ReplayEvent(self.index, self.clock(), kind, phase or self.phase, data))

    @hookimpl
    def on_compaction(self, event: CompactionResult) -> None:
        self.add("compaction", event.as_dict())

    @hookimpl
    def on_memory_flushed(self, event: MemoryFlushedEvent) -> None:
        self.add(
            "flush",
            {
                "path": event.path,
                "entries": list(event.entries),
                "messages": event.messages,
                "duplicates": event.duplicates,
            },
        )

    @hookimpl
    def on_tool_result_evicted(self, event: ToolResultEvictedEvent) -> None:
        self.add("eviction", asdict(event))

    @hookimpl
    def on_context_over_budget(self, event: ContextOverBudgetEvent) -> None:
        self.add("context_over_budget", asdict(event))


# ------------------------------------------------------------------------------ the replay


def replay(
    harness: MemoryHarness,
    messages: Sequence[Mapping[str, Any]],
    *,
    session_id: str,
    clock: ReplayClock | None = None,
    keep_dates: bool = False,
    consolidate: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Feed ``messages`` through ``harness.session(session_id)``; see the module doc.

    ``clock`` must be the clock ``harness`` was built with for message timestamps to
    count (without one, or without timestamps, the harness keeps its own clock).
    ``progress`` is called with the number of messages handled so far. Errors of the
    harness propagate (a failed flush does not: it is listed in ``flush_failures``).
    """
    from zoneinfo import ZoneInfo

    from harnessmem.tokens import TokenCounter

    recorder = _Recorder(harness.kernel.clock)
    counter = TokenCounter()
    zone = ZoneInfo(harness.settings.workspace.timezone)
    times = [message_time(m, zone) for m in messages]
    known = [t for t in times if t is not None]
    shift = 0.0
    if clock is not None and known and not keep_dates:
        # Whole days, so times of day stay as written; the last message lands in the past
        # 24 hours (never in the future).
        # "Now" is the clock's own source of time (real time unless a test gave another).
        shift = max(0, int((clock.now() - max(known)) // 86_400)) * 86_400.0
    report = ReplayReport(
        session_id=session_id,
        workspace=harness.workspace.url,
        messages=len(messages),
        transcript_tokens=counter.count_messages(messages),
        first_time=min(known) + shift if known else None,
        last_time=max(known) + shift if known else None,
        shifted_by=shift,
        memory_budget=harness.settings.consolidation.max_memory_tokens,
    )
    loop = _Loop(
        harness,
        session_id,
        recorder,
        counter,
        report,
        consolidate=consolidate,
        listening=not any(m.get("role") == "assistant" for m in messages),
    )
    spent_before = _upkeep_spent(harness)
    harness.kernel.hooks.pm.register(recorder, name=f"{_Recorder.name}-{id(recorder)}")
    try:
        for index, (message, moment) in enumerate(zip(messages, times, strict=True), 1):
            boundary = message.get("role") in _BOUNDARY_ROLES
            now = moment + shift if clock is not None and moment is not None else None
            if boundary:
                # The previous agent call ends (and flushes) at its own last message and
                # moment, and so does the day, when this message starts another; the new
                # day then starts with the "overnight" consolidation.
                recorder.index = index - 1
                loop.end_call()
                if now is not None:
                    loop.end_day(now)
            if clock is not None and now is not None:
                clock.set(now)
            if boundary:
                loop.day_boundary()
            recorder.index = index
            loop.handle(_moved(message, moment, shift))
            if progress is not None:
                progress(index)
        recorder.index = len(messages)
        loop.end_call()
        loop.close()  # the conversation ended: what was held is flushed
        loop.consolidate("end")
        report.final_context_messages = len(loop.context)
        report.final_context_tokens = counter.count_messages(loop.context)
    finally:
        harness.kernel.hooks.pm.unregister(recorder)
        if clock is not None:
            clock.set(None)
    report.events = recorder.events
    report.memory_tokens = _memory_tokens(harness, counter)
    spent = _upkeep_spent(harness)
    report.upkeep_tokens = {
        purpose: tokens - spent_before.get(purpose, 0) for purpose, tokens in spent.items()
    }
    return report


def _moved(message: Mapping[str, Any], moment: float | None, shift: float) -> Message:
    """A copy of ``message`` whose own time is shifted as the clock is, so that the
    session log dates it on the same day as the daily log its facts went to."""
    copy = dict(message)
    if not shift or moment is None:
        return copy
    for key in _TIME_KEYS:
        value = copy.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            copy[key] = moment + shift
        else:
            moved = datetime.fromtimestamp(moment + shift, UTC)
            copy[key] = moved.isoformat().replace("+00:00", "Z")
        break
    return copy


def _upkeep_spent(harness: MemoryHarness) -> dict[str, int]:
    """Prompt tokens of the harness's model calls so far, by purpose (the usage ledger)."""
    return {
        purpose: totals.prompt_tokens for purpose, totals in harness.usage().by_purpose().items()
    }


class _Loop:
    """The agent loop a replay imitates: one context list, one call at a time."""

    def __init__(
        self,
        harness: MemoryHarness,
        session_id: str,
        recorder: _Recorder,
        counter: Any,
        report: ReplayReport,
        *,
        consolidate: bool,
        listening: bool,
    ) -> None:
        self.harness = harness
        self.session = harness.session(session_id)
        self.recorder = recorder
        self.counter = counter
        self.report = report
        self.consolidating = consolidate
        #: No assistant message anywhere: the agent reads along, one model call a call.
        self.listening = listening
        self.context: list[Message] = []
        self.calls: dict[str, Message] = {}
        self.in_call = False
        self.called_model = False
        self.day: str | None = None

    def handle(self, message: Message) -> None:
        role = message.get("role")
        if role in _BOUNDARY_ROLES:
            self.end_call()
            self.context.append(message)
            self.in_call = self.in_call or role == "user"
        elif role == "assistant":
            self.model_call()
            for call in message.get("tool_calls") or []:
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    self.calls[call["id"]] = dict(call)
            self.context.append(message)
            self.in_call = True
        elif role == "tool":
            self.recorder.phase = "after_tool"
            call_id = str(message.get("tool_call_id") or "")
            call = self.calls.get(call_id) or {
                "id": call_id,
                "type": "function",
                "function": {"name": str(message.get("name") or "tool"), "arguments": "{}"},
            }
            output = self.session.after_tool(call, _text_of(message.get("content")))
            self.context.append({**message, "content": output})
            self.report.tool_results += 1
        else:  # validated earlier: function messages of old transcripts
            self.context.append(message)

    def model_call(self) -> None:
        """The agent is about to call its model: ``before_reasoning`` (evict, compact)."""
        self.recorder.phase = "before_reasoning"
        self.context = self.session.before_reasoning(self.context)
        self.report.model_calls += 1
        self.called_model = True
        tokens = self.counter.count_messages(self.context)
        self.report.peak_context_tokens = max(self.report.peak_context_tokens, tokens)
        self.report.sent_tokens += tokens

    def end_call(self) -> None:
        """The end of an agent call: ``after_call`` (the flush)."""
        if not self.in_call:
            return
        if self.listening and not self.called_model:
            self.model_call()  # the agent reads what was said
        self.in_call = self.called_model = False
        self.recorder.phase = "after_call"
        self._note(self.session.after_call(self.context))
        self.report.agent_calls += 1

    def close(self, phase: str = "after_call") -> None:
        """The conversation (or its day) ended: ``Session.close`` flushes what was held."""
        self.recorder.phase = phase
        self._note(self.session.close(self.context))

    def _note(self, ctx: Any) -> None:
        result = ctx.outcomes.get("flush")
        if result is not None and getattr(result, "status", "") == "failed":
            self.report.flush_failures.append(str(getattr(result, "error", "") or "failed"))

    def _date(self, moment: float) -> str:
        return layout.local_date(moment, self.harness.settings.workspace.timezone)

    def end_day(self, next_moment: float) -> None:
        """Before the clock moves to ``next_moment``: when that is another day, close the
        conversation, so that the facts batching held land in the old day's log."""
        if self.day is not None and self._date(next_moment) != self.day:
            self.close("day end")

    def day_boundary(self) -> None:
        """Consolidate when the day changed since the last boundary (as overnight upkeep)."""
        day = self._date(self.harness.kernel.clock())
        if self.day is not None and day != self.day:
            self.end_call()
            self.consolidate("day end")
        self.day = day

    def consolidate(self, phase: str) -> None:
        if not self.consolidating or not self.harness.settings.consolidation.enabled:
            return
        result = self.harness.consolidate()
        if result.status in ("nothing_new", "disabled"):
            return
        self.recorder.add("consolidation", _consolidation_data(result), phase)


def _consolidation_data(result: ConsolidationResult) -> dict[str, Any]:
    data = asdict(result)
    data["files"] = list(result.files)
    return data


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text") if isinstance(part, Mapping) else part
            for part in content
            if isinstance(part, str | Mapping)
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _memory_tokens(harness: MemoryHarness, counter: Any) -> int:
    try:
        text = harness.workspace.read_text(layout.MEMORY_FILE)
    except FileNotFoundError:
        return 0
    return int(counter.count_text(text))
