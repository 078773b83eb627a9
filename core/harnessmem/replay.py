"""Replay a recorded conversation through a session, turn by turn, as an agent loop would.

:func:`load_transcript` reads a transcript file: a JSON list of OpenAI messages, JSON
Lines (one message a line), or any shape :func:`harnessmem.messages.normalize_messages`
knows (Anthropic messages, SWE-agent trajectories, a tau-bench run, a LoCoMo
conversation); :func:`read_transcript` also says which conversation of a LoCoMo file of
several it took (``sample``: a ``sample_id`` or a 0-based index; the first by default). A
file in none of these shapes is one ``MessageFormatError`` that lists the shapes and says
what the file looked like. :func:`replay` feeds the messages to
:class:`~harnessmem.harness.Session` the way a live agent would have:

- before each assistant message (the model call): ``before_reasoning`` (eviction sweep,
  compaction; the returned list becomes the context);
- each tool message: ``after_tool(call, output)`` (oversized outputs go to a file);
- at the end of each agent call (the next user or system message, and the end of the
  file): ``after_call`` (the flush into today's daily log);
- when the day changes: ``Session.close`` first, at the last moment of the old day, so
  that what the flush's batching held back is written to that day's log; then
  ``harness.consolidate()``, as the maintenance scheduler would overnight; and at the end.

A transcript without any assistant message (people talking among themselves, such as a
LoCoMo conversation) is replayed as if the agent read along: ``before_reasoning`` runs at
the end of each agent call (each message), counted as a model call, so compaction keeps
the context bounded and the raw messages reach the session log.

Messages may carry a ``timestamp`` (ISO 8601, or seconds since the epoch; a time without
an offset is read in ``workspace.timezone``): the harness clock then follows them, so
daily logs are named by the days the conversation spans.
By default the dates are shifted by whole days so that the last message falls within the
past 24 hours (an old transcript's logs would otherwise be archived by the next
maintenance tick); times of day stay as written; ``keep_dates=True`` keeps the dates.
The session gets each message with its timestamp shifted likewise, so that the session
log and the daily logs agree on the day a thing was said (``ReplayReport.shifted_by``
says by how much).
What happened comes back as a :class:`ReplayReport`: one :class:`ReplayEvent` per
compaction, flush, eviction and consolidation.

Replay into a workspace no live agent is writing to: while the clock follows old
timestamps, the leases the harness takes look expired to other processes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.errors import MessageFormatError
from harnessmem.messages import MAX_DEPTH, TIME_KEYS, check_messages, message_time
from harnessmem.plugins import hookimpl

if TYPE_CHECKING:
    from harnessmem.events import (
        CompactionEvent,
        ContextOverBudgetEvent,
        MemoryFlushedEvent,
        ToolResultEvictedEvent,
    )
    from harnessmem.harness import MemoryHarness
    from harnessmem.memory.consolidation import ConsolidationResult

__all__ = [
    "ReplayClock",
    "ReplayEvent",
    "ReplayReport",
    "Transcript",
    "load_transcript",
    "merge_reports",
    "message_time",
    "read_transcript",
    "replay",
]

Message = dict[str, Any]
_TIME_KEYS = TIME_KEYS
#: Roles that start a new agent call (a joined file of runs has system messages inside).
_BOUNDARY_ROLES = ("user", "system", "developer")


# ------------------------------------------------------------------------------ loading


@dataclass(frozen=True)
class Transcript:
    """A transcript file as read: its messages and, for a LoCoMo file, which conversation.

    ``conversation``: the ``sample_id`` of the LoCoMo conversation the messages are (None
    for other formats); ``conversations``: those the file holds, in order; ``speakers``:
    the names the messages carry, in order of appearance.
    """

    messages: list[Message]
    conversation: str | None = None
    conversations: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()
    #: A file of runs (tau-bench's): the runs chosen, each ``(name, its messages)``, to be
    #: replayed as sessions of their own; ``runs`` is how many the file holds.
    parts: tuple[tuple[str, list[Message]], ...] = ()
    runs: int = 0


def load_transcript(path: str | Path, *, sample: str | int | None = None) -> list[Message]:
    """The OpenAI messages of the transcript file at ``path`` (see :func:`read_transcript`)."""
    return read_transcript(path, sample=sample).messages


def read_transcript(path: str | Path, *, sample: str | int | None = None) -> Transcript:
    """The transcript file at ``path``: its OpenAI messages, and which conversation.

    ``sample`` picks a conversation of a LoCoMo file by ``sample_id`` or 0-based index
    (default: the first), or the runs of a file of runs (tau-bench's) by 0-based index or
    inclusive range (``"3"``, ``"3-5"``; default: all), each then one of ``parts``; it is
    an error for a file of another format.

    Raises ``FileNotFoundError`` / ``IsADirectoryError`` for a missing path and
    ``MessageFormatError`` for a file that is not JSON / JSON Lines (naming the line and
    column) or holds no conversation: one error naming the problem, with what the file
    looks like and the formats harnessmem reads.
    """
    source = Path(path)
    data = source.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MessageFormatError(
            f"{source} is not UTF-8 text (byte {exc.start})",
            hint="a transcript is a JSON list of messages or JSON Lines, in UTF-8",
        ) from None
    if not text.strip():
        raise MessageFormatError(
            f"{source} is empty", hint="a transcript is a JSON list of messages or JSON Lines"
        )
    parsed, lines = _parse_json_or_lines(text, source)
    try:
        transcript = _normalise(parsed, sample)
        messages = check_messages(transcript.messages, "")
    except _InRecognisedFile as exc:
        raise MessageFormatError(f"{source}: {exc.message}", hint=exc.hint) from None
    except MessageFormatError as exc:
        raise _rejected(source, parsed, lines, exc) from None
    if not messages:
        raise MessageFormatError(f"{source} holds no messages")
    return transcript


def _rejected(source: Path, data: Any, lines: bool, exc: MessageFormatError) -> MessageFormatError:
    """The one error for a file harnessmem cannot replay: the problem, what the file looks
    like, and the formats it reads."""
    from harnessmem.messages import FORMATS, describe

    problem = exc.message
    if (
        isinstance(data, list)
        and data
        and all(isinstance(item, Mapping) and "role" not in item for item in data)
    ):
        problem = f"none of its {len(data)} items is a chat message (none has a 'role')"
    hint = f"{exc.hint}; " if exc.hint else ""
    # One error line and one hint line, as every command's errors are.
    return MessageFormatError(
        f"{source}: {problem}; the file is {describe(data, lines=lines)}",
        hint=f"{hint}harnessmem replays {'; '.join(FORMATS)}",
        problems=exc.problems,
    )


class _InRecognisedFile(MessageFormatError):
    """A problem in a file whose format was recognised (a LoCoMo file), or with the
    conversation asked for: the list of formats would not help."""


def _too_deep(source: Path, line: int | None = None) -> MessageFormatError:
    where = f"{source} line {line}" if line is not None else str(source)
    return MessageFormatError(
        f"{where} nests JSON arrays or objects too deeply to read",
        hint=f"a message may nest containers at most {MAX_DEPTH} levels deep",
    )


def _parse_json_or_lines(text: str, source: Path) -> tuple[Any, bool]:
    """The parsed file, and whether it was JSON Lines."""
    try:
        return json.loads(text), False
    except RecursionError:
        raise _too_deep(source) from None
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
            raise _json_error(source, whole) from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except RecursionError:
            raise _too_deep(source, number) from None
        except json.JSONDecodeError as exc:
            raise MessageFormatError(
                f"{source} line {number} is not valid JSON: {exc.msg} (column {exc.colno})",
                hint="JSON Lines hold one complete JSON object per line",
            ) from None
    return records, True


def _json_error(source: Path, exc: json.JSONDecodeError) -> MessageFormatError:
    return MessageFormatError(
        f"{source} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
        hint="a transcript is a JSON list of OpenAI messages, or JSON Lines with one a line",
    )


def _normalise(data: Any, sample: str | int | None) -> Transcript:
    from harnessmem.messages import is_locomo, is_locomo_list, normalize_messages

    if is_locomo_list(data) or is_locomo(data):
        return _locomo(data if isinstance(data, list) else [data], sample)
    if isinstance(data, list) and data and all(_is_run(item) for item in data):
        # A list of runs (tau-bench's file shape): each its own conversation.
        parts = tuple(
            (f"run-{index}", normalize_messages(data[index]))
            for index in _chosen_runs(len(data), sample)
        )
        messages = [m for _, part in parts for m in part]
        return Transcript(messages, speakers=_speakers(messages), parts=parts, runs=len(data))
    if sample is not None:
        raise _InRecognisedFile(
            f"sample {sample!r} was asked for, but the file holds one conversation",
            hint="a sample picks a conversation of a LoCoMo file or runs of a runs file; "
            "leave it out",
        )
    messages = normalize_messages(data)
    return Transcript(messages, speakers=_speakers(messages))


_RUN_RANGE = re.compile(r"^\s*(\d+)\s*(?:(?:-|\.\.)\s*(\d+)\s*)?$")


def _chosen_runs(count: int, sample: str | int | None) -> range:
    """The runs ``sample`` names (``3``, ``"3-5"``, ``"3..5"``: 0-based, inclusive); all
    without one."""
    if sample is None:
        return range(count)
    found = _RUN_RANGE.match(str(sample))
    hint = f"pick runs by 0-based index (0 to {count - 1}): one, --sample 3, or a range, 3-5"
    if found is None:
        raise _InRecognisedFile(f"sample {sample!r} is not a run number or a range", hint=hint)
    first = int(found[1])
    last = int(found[2]) if found[2] is not None else first
    if first > last:
        raise _InRecognisedFile(f"runs {first}-{last}: the range runs backwards", hint=hint)
    if last >= count:
        raise _InRecognisedFile(
            f"no run {last} in the file: it holds {count} run{'s' if count != 1 else ''}",
            hint=hint,
        )
    return range(first, last + 1)


def _locomo(samples: list[Any], sample: str | int | None) -> Transcript:
    """One conversation of a LoCoMo file: ``sample`` by id or 0-based index, else the first."""
    from harnessmem.messages import from_locomo, sample_name

    names = tuple(sample_name(item, index) for index, item in enumerate(samples))
    if sample is None:
        index = 0
    elif str(sample) in names:
        index = names.index(str(sample))
    elif isinstance(sample, int) or str(sample).strip().isdigit():
        index = int(sample)
    else:
        index = -1
    if not 0 <= index < len(samples):
        raise _InRecognisedFile(
            f"no conversation {sample!r} in the file",
            hint=f"it holds {', '.join(names)}; pick one by sample_id or by index "
            f"(0 to {len(samples) - 1})",
        )
    try:
        messages = from_locomo(samples[index])
    except MessageFormatError as exc:
        raise _InRecognisedFile(
            f"conversation {names[index]}: {exc.message}", hint=exc.hint
        ) from None
    return Transcript(messages, names[index], names, _speakers(messages))


def _speakers(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    names = (m.get("name") for m in messages if m.get("role") in ("user", "assistant"))
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def _is_run(item: Any) -> bool:
    return (
        isinstance(item, Mapping)
        and "role" not in item
        and any(isinstance(item.get(key), list) for key in ("messages", "traj", "history"))
    )


# ------------------------------------------------------------------------------ the report


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
    def on_compaction(self, event: CompactionEvent) -> None:
        data = asdict(event)
        data["details"] = dict(event.details)
        data["usage"] = dict(event.usage)
        data["compacted"] = not event.postponed
        self.add("compaction", data)

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

    recorder = _Recorder(harness.clock)
    counter = TokenCounter()
    zone = ZoneInfo(harness.settings.workspace.timezone)
    times = [message_time(m, zone) for m in messages]
    known = [t for t in times if t is not None]
    shift = 0.0
    if clock is not None and known and not keep_dates:
        # Whole days, so times of day stay as written; the last message lands in the past
        # 24 hours (never in the future).
        shift = max(0, int((time.time() - max(known)) // 86_400)) * 86_400.0
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
    harness.pm.register(recorder, name=f"{_Recorder.name}-{id(recorder)}")
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
        harness.pm.unregister(recorder)
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
        day = self._date(self.harness.clock())
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
