"""The memory flush: new facts of a conversation go to today's daily log.

:class:`MemoryFlusher` is the engine behind ``harness.flush(messages, session_id=...)``;
:class:`MemoryFlushPlugin` is the built-in plugin (entry point ``flush``) that runs it in
``post_call`` once enough new conversation has accumulated (``flush.batch_tokens``) and in
``session_end`` for what batching held back, synchronously or through a bounded background
queue (``flush.mode``). Compaction flushes the prefix it drops, its facts asked for in the
summary call when one model serves both.

One flush:

1. picks the messages of the session not flushed yet, by a high-water mark persisted in
   ``memory/.flush_state/<session>.json`` (:mod:`harnessmem.memory._flush_mark`; fast path: the
   mark's position in a list that only grew; after compaction rewrote the list, the
   fingerprints the mark remembers);
2. asks the ``flush`` model for new facts (:mod:`harnessmem.memory._flush_request`: the lean
   transcript, and the MEMORY.md and today's-log entries related to it as the dedup
   reference, within ``flush.reference_chars``);
3. treats ``NO_REPLY`` (in quotes, fences, any case) as "nothing to write";
4. rewrites the facts' relative times as absolute dates (``flush.ground_times``,
   :mod:`harnessmem.memory.grounding`: "yesterday" becomes "on 2023-06-12", against the
   time of the message each fact came from, else the flush's), passes them through
   ``transform_memory_text`` (the secret redactor), drops the ones
   already in MEMORY.md, today's log or (via the index) an older log, and appends one entry
   ``## Memory Flush — <ISO UTC> · session <id>`` to ``memory/YYYY-MM-DD.md``;
5. advances the mark crash-safely with one state write: before the append, the state file
   records the new mark as "pending" together with the entry; whoever loads the state next
   adopts the new mark if and only if the entry is in the log. The append is a
   compare-and-swap (``Workspace.update_text``: a conditional PUT on S3), so a returned
   result means the write is on file, and a log that another writer changed meanwhile is
   read again and deduplicated again;
6. reindexes the log and, once ``consolidation.min_new_tokens`` of new facts wait, asks
   maintenance for an opportunistic consolidation.

MEMORY.md is never written here.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.errors import ModelError, ModelResponseError
from harnessmem.events import MemoryFlushedEvent
from harnessmem.memory import files as mf
from harnessmem.memory._flush_mark import Mark, State
from harnessmem.memory._flush_queue import BackgroundFlushes
from harnessmem.memory._flush_request import dedup_reference, flush_prompt, render_transcript
from harnessmem.memory._flush_result import FlushResult
from harnessmem.memory._tombstones import read_tombstones
from harnessmem.memory.flush_plugin import MemoryFlushPlugin
from harnessmem.memory.grounding import ground_facts, transcript_dates
from harnessmem.models.backoff import Backoff, BackoffState
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion
    from harnessmem.kernel import Kernel
    from harnessmem.memory._flush_queue import BackgroundFlushes
    from harnessmem.tokens import TokenCounter
    from harnessmem.workspace import Snapshot

__all__ = ["FlushResult", "MemoryFlushPlugin", "MemoryFlusher", "render_transcript"]

logger = logging.getLogger("harnessmem.memory.flush")

Message = dict[str, Any]
#: ``ask(reference)``: a Completion whose text holds the facts, or None (ask the flush model).
AskForFacts = Callable[[str], "Completion | None"]
#: Sessions whose state this process remembers (each up to SEEN_LIMIT fingerprints).
_STATES_KEPT = 256


# ------------------------------------------------------------------------------ the engine


class MemoryFlusher:
    """Extracts the new facts of a session into today's daily log (see the module doc).

    One per harness, built on first use; thread-safe (flushes of one session take turns).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._queue: BackgroundFlushes | None = None
        self._reported: set[type[BaseException]] = set()
        # State files this process wrote last, by path: a session's next flush needs no
        # read. A session served by two replicas at once costs at worst a repeated
        # extraction, whose facts the write-time dedup drops.
        self._states: OrderedDict[str, State] = OrderedDict()
        # Sessions whose flush model failed recently: their next flushes skip it a while.
        self._backoffs: OrderedDict[str, Backoff] = OrderedDict()
        # The last list of each session whose flush is held back by batching, for close().
        self._held: OrderedDict[str, list[Message]] = OrderedDict()
        self._finishing = False  # finish_all is among the harness's drainers
        self._fresh_tokens = 0  # of facts written since this process last asked to consolidate
        self._counter: TokenCounter | None = None

    # public ----------------------------------------------------------------------------------

    def flush(
        self,
        messages: Sequence[Message],
        *,
        session_id: str,
        backoff: bool = False,
        batch: bool = False,
        ask: AskForFacts | None = None,
    ) -> FlushResult:
        """Flush the unflushed part of ``messages``; returns after the write was verified.

        Raises the model's ``ModelError`` (or ``BackendNotFound`` when no model backend
        is installed) and ``WorkspaceError``; the mark stays where it was. With
        ``backoff`` (the automatic flushes), after the model failed the session's next
        flushes return ``deferred`` without asking it (1, 2, 4 ... of them, up to
        ``flush.backoff_max``); every call counts the model's failures and successes.
        With ``batch`` (the automatic flushes), an unflushed part under
        ``flush.batch_tokens`` is held back (``batched``) for a later flush. ``ask``, when
        there is something to flush, is called with the dedup reference and may return
        the model's answer with the facts (compaction asks for them in its summary call);
        when it returns None the flush model is asked as usual.
        """
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session id must be a non-empty string, got {session_id!r}")
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
        record = self._backoff(session_id)
        if backoff and not record.ready():
            state = record.state
            self._outcome("deferred")
            return FlushResult(
                session_id,
                "deferred",
                error=(
                    f"the flush model is backed off after {state.failures} failure(s) in a "
                    f"row (last: {state.last_error}); these messages go with a later flush"
                ),
            )
        with self._lock_for(session_id):
            try:
                result = self._flush_locked(list(messages), session_id, batch, ask)
            except ModelError as exc:
                record.failed(f"{type(exc).__name__}: {exc}")
                self._outcome("failed")
                raise
            except Exception:
                self._outcome("failed")
                raise
        self._outcome(result.status)
        record.succeeded()
        if self._queue is not None:
            self._queue.covered(session_id)
        if result.status == "batched":
            self._trim_held()
        return result

    def _outcome(self, status: str) -> None:
        self.kernel.telemetry.count(names.FLUSHES, 1, {names.OUTCOME: status})

    def finish(self, session_id: str, messages: Sequence[Message] = ()) -> FlushResult | None:
        """Flush what batching held back for ``session_id`` (its conversation ended):
        ``messages`` when given, else the last list held. None when nothing was held."""
        with self._locks_guard:
            held = self._held.pop(session_id, None)
        final = list(messages) or held
        if not final:
            return None
        return self.flush(final, session_id=session_id)

    def finish_all(self, timeout: float | None = None) -> list[FlushResult]:
        """Flush every session batching held back (the harness closes): the failures."""
        failures: list[FlushResult] = []
        while True:
            with self._locks_guard:
                if not self._held:
                    return failures
                session_id = next(iter(self._held))
            try:
                result = self.finish(session_id)
            except Exception as exc:
                result = self.failed(session_id, exc)
            if result is not None and not result.ok:
                failures.append(result)

    def _hold(self, session_id: str, messages: list[Message]) -> None:
        """Keep ``messages`` for close()."""
        with self._locks_guard:
            if not self._finishing:
                self._finishing = True
                self._at_close(self.finish_all)
            self._held[session_id] = messages
            self._held.move_to_end(session_id)

    def _at_close(self, finish: Callable[[float | None], object]) -> None:
        """Have the harness's close() run ``finish`` (with its timeout) while the model and
        the workspace are still open: queued or held flushes are written, not dropped."""
        self.kernel.on_close(finish)

    def _trim_held(self) -> None:
        """Too many conversations held at once: the oldest are flushed now rather than
        kept in memory without bound."""
        while True:
            with self._locks_guard:
                if len(self._held) <= _STATES_KEPT:
                    return
                oldest = next(iter(self._held))
            try:
                self.finish(oldest)
            except Exception as exc:
                self.failed(oldest, exc)

    def _release(self, session_id: str) -> None:
        with self._locks_guard:
            self._held.pop(session_id, None)

    def _count(self, text: str) -> int:
        if self._counter is None:
            from harnessmem.tokens import TokenCounter

            self._counter = TokenCounter()
        return self._counter.count_text(text)

    def backoff_state(self, session_id: str) -> BackoffState:
        """How the session's flush model has fared lately (:mod:`~harnessmem.models.backoff`)."""
        with self._locks_guard:
            backoff = self._backoffs.get(session_id)
        return backoff.state if backoff is not None else BackoffState()

    def submit(self, messages: Sequence[Message], *, session_id: str) -> FlushResult:
        """Queue a flush of a snapshot of ``messages`` (background mode); blocks when full.

        While close() drains the queue, flushes synchronously instead (nothing is queued
        that no worker would take).
        """
        with self._locks_guard:
            if self._queue is None:
                self._queue = BackgroundFlushes(self)
                self._at_close(self.drain)
        if self._queue.put(session_id, copy.deepcopy(list(messages))):
            return FlushResult(session_id, "queued")
        return self.flush(messages, session_id=session_id)

    def drain(self, timeout: float | None = None) -> list[FlushResult]:
        """Finish queued flushes (close() calls this); the results of the retried failures."""
        queue = self._queue
        return queue.drain(timeout) if queue is not None else []

    def failed(self, session_id: str, exc: BaseException) -> FlushResult:
        """A ``failed`` result for ``exc``, logged (loudly the first time per error type)."""
        level = logging.DEBUG if type(exc) in self._reported else logging.WARNING
        self._reported.add(type(exc))
        logger.log(
            level,
            "memory flush of session %r failed (%s: %s); its messages stay unflushed and "
            "go with the next flush",
            session_id,
            type(exc).__name__,
            exc,
        )
        return FlushResult(session_id, "failed", error=f"{type(exc).__name__}: {exc}")

    # the flush -------------------------------------------------------------------------------

    def _backoff(self, session_id: str) -> Backoff:
        with self._locks_guard:
            backoff = self._backoffs.get(session_id)
            if backoff is None:
                backoff = Backoff(self.kernel.settings.flush.backoff_max)
                self._backoffs[session_id] = backoff
                while len(self._backoffs) > _STATES_KEPT:
                    self._backoffs.popitem(last=False)
            self._backoffs.move_to_end(session_id)
            return backoff

    def _lock_for(self, session_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(session_id, threading.Lock())

    def _flush_locked(
        self,
        messages: list[Message],
        session_id: str,
        batch: bool = False,
        ask: AskForFacts | None = None,
    ) -> FlushResult:
        state_path = layout.flush_state_path(session_id)
        try:
            return self._flush_session(messages, session_id, state_path, batch, ask)
        except BaseException:
            # The outcome is unknown (the entry may or may not be on file): the next flush
            # reads the state file and lets the log decide.
            with self._locks_guard:
                self._states.pop(state_path, None)
            raise

    def _flush_session(
        self,
        messages: list[Message],
        session_id: str,
        state_path: str,
        batch: bool,
        ask: AskForFacts | None,
    ) -> FlushResult:
        kernel = self.kernel
        state, logs = self._load_state(state_path)
        new, mark = state.mark.split(messages)
        now = kernel.clock()
        zone = kernel.settings.workspace.timezone
        transcript = render_transcript(
            new,
            lean=kernel.settings.flush.transcript == "lean",
            dates=transcript_dates(new, timezone=zone, now=now),
        )
        threshold = kernel.settings.flush.batch_tokens
        if batch and threshold and transcript.strip():
            size = self._count(transcript)
            if size < threshold:
                # Not worth a model call yet: the mark stays, so these messages go with a
                # later flush (the next due one, compaction's, close()'s, or another
                # process's after a crash). The list is kept for close().
                self._hold(session_id, messages)
                return FlushResult(
                    session_id,
                    "batched",
                    messages=len(new),
                    warnings=(f"{size} of {threshold} tokens to flush",),
                )
        self._release(session_id)
        if not transcript.strip():
            if new or (mark.count, mark.last) != (state.mark.count, state.mark.last):
                # Also after a rewrite (compaction) with nothing new: the next turn then
                # finds its place by the fast path again.
                self._save_state(state_path, session_id, State(mark))
            return FlushResult(session_id, "nothing_new", messages=len(new))
        # From here on the flush asks the model and may write: a create_memory span, and
        # one audit record of what it wrote (batched and empty flushes are neither).
        with kernel.change("flush", names.CREATE_MEMORY, session_id=session_id) as change:
            result = self._extract(
                new, mark, state, logs, state_path, session_id, transcript, now, ask
            )
            change.count("facts", len(result.entries))
            change.count("messages", result.messages)
            change.span.set(names.STATUS, result.status)
            change.span.records(len(result.entries), result.entries)
        return result

    def _extract(
        self,
        new: list[Message],
        mark: Mark,
        state: State,
        logs: dict[str, Snapshot],
        state_path: str,
        session_id: str,
        transcript: str,
        now: float,
        ask: AskForFacts | None,
    ) -> FlushResult:
        """Ask for the facts of ``new`` and append them to today's log (steps 2 to 6)."""
        kernel = self.kernel
        zone = kernel.settings.workspace.timezone
        path = layout.daily_path(now, zone)
        memory_text = self._read(layout.MEMORY_FILE, max_age=self._reference_age())
        # The log as this process last appended to it, when it did within the reference's
        # age: the conditional append checks it (and reads the log when another wrote).
        log = (
            logs.get(path)
            or kernel.workspace.recall(path, max_age=self._reference_age())
            or kernel.workspace.read_snapshot(path)
        )
        reference = dedup_reference(kernel.settings.flush, transcript, memory_text, log.text, path)
        # A caller that asks a model anyway (compaction's summary) may get the facts in
        # the same answer; None: ask the flush model.
        completion = ask(reference) if ask is not None else None
        if completion is None:
            prompt = flush_prompt(kernel.settings, new, transcript, reference, path, now)
            completion = kernel.model_for("flush").complete(prompt, purpose="flush")
        base = FlushResult(
            session_id,
            "no_reply",
            path=path,
            messages=len(new),
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        if not completion.text.strip():
            raise ModelResponseError(
                f"the flush model returned an empty answer for session {session_id!r}",
                hint="the model should answer NO_REPLY when there is nothing to remember",
            )
        if mf.is_no_reply(completion.text):
            self._save_state(state_path, session_id, State(mark))
            return base
        if mf.is_refusal(completion.text):
            # Asking again would get the same answer: the mark moves on, as for NO_REPLY
            # (the messages stay in the session log).
            logger.warning(
                "the flush model declined session %r (%s); nothing written",
                session_id,
                " ".join(completion.text.split())[:120],
            )
            self._save_state(state_path, session_id, State(mark))
            return replace(base, warnings=("the answer was a refusal, not facts; nothing written",))
        facts = mf.parse_facts(completion.text)
        if facts and kernel.settings.flush.ground_times:
            # "yesterday" as said, or as a model wrote it, becomes the day it meant.
            facts = ground_facts(facts, new, now=now, timezone=kernel.settings.workspace.timezone)
        if not facts:
            self._save_state(state_path, session_id, State(mark))
            return replace(base, warnings=("the answer held no facts; taken as NO_REPLY",))
        body = kernel.hooks.transform_memory_text(mf.bullet_block(facts), "flush")
        facts = list(dict.fromkeys(mf.parse_facts(body)))
        facts, indexed = self._drop_indexed(facts)
        heading = f"{mf.FLUSH_HEADING}{mf.iso_utc(now)} · session {' '.join(session_id.split())}"
        fresh: list[str] = []
        forgotten = 0
        pending: dict[str, Any] | None = None

        def add_entry(current: str) -> str | None:
            # Dedup against the log as it is when written: if another writer appended
            # since it was read, this runs again on the new text, so two flushes racing
            # into one log never both write a fact.
            nonlocal fresh, pending, forgotten
            fresh = mf.new_facts(facts, current, memory_text)
            # Read after the log: a forget writes its tombstone before it rewrites the
            # log, so a log read after that rewrite comes with the tombstone.
            kept = read_tombstones(kernel.workspace).keep(fresh)
            forgotten, fresh = len(fresh) - len(kept), kept
            if not fresh:
                return None
            entry = mf.entry_text(current, heading, fresh)
            if pending is None or pending["entry"] != entry:
                # The new mark goes on file first, as pending on this entry (see _load_state).
                pending = {"path": path, "entry": entry, "mark": mark.to_json()}
                self._save_state(state_path, session_id, State(state.mark, pending))
            return current + entry

        written = kernel.workspace.update_text(path, add_entry, current=log, append=True)
        duplicates = len(facts) - len(fresh) - forgotten + indexed
        warnings = []
        if forgotten:
            warnings.append(f"{forgotten} fact(s) left out: forgotten earlier (harness.forget)")
        if written is None:
            self._save_state(state_path, session_id, State(mark))
            # Every fact was on file already, or forgotten (the warning says so).
            return replace(
                base, status="duplicates", duplicates=duplicates, warnings=tuple(warnings)
            )
        # The conditional write succeeded, so the entry is on file and the pending mark
        # holds (whoever reads the state file next adopts it from the log).
        self._remember(state_path, State(mark))
        retracted = self._retract_forgotten(path, state_path, session_id, State(mark), fresh)
        if retracted:
            forgotten += len(retracted)
            fresh = [fact for fact in fresh if fact not in retracted]
            warnings.append(f"{len(retracted)} fact(s) taken back out: forgotten meanwhile")
        problem = mf.reindex_paths(kernel, [path])
        if problem:
            warnings.append(problem)
        if retracted:  # a search meanwhile may have indexed them
            kernel.eraser.scrub(warnings)
        if not fresh:
            return replace(
                base, status="duplicates", duplicates=duplicates, warnings=tuple(warnings)
            )
        result = replace(
            base,
            status="written",
            entries=tuple(fresh),
            duplicates=duplicates,
            warnings=tuple(warnings),
        )
        kernel.hooks.memory_flushed(
            MemoryFlushedEvent(
                session_id=session_id,
                path=path,
                entries=result.entries,
                messages=len(new),
                details={"duplicates": duplicates},
                duplicates=duplicates,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
            )
        )
        self._ask_for_consolidation(fresh, session_id)
        return result

    def _retract_forgotten(
        self, path: str, state_path: str, session_id: str, state: State, fresh: list[str]
    ) -> list[str]:
        """The facts just written that a tombstone written meanwhile covers, taken back out.

        ``add_entry`` filtered by the tombstones as they were before the write; a forget
        that wrote its tombstone after that and looked at this log before the write cannot
        see the entry, so the tombstones are read once more now that it is on file and
        what they cover leaves the log (and the pending entry of the state file)."""
        stones = read_tombstones(self.kernel.workspace)
        covered = [fact for fact in fresh if stones.covers(fact)]
        if covered:
            self.kernel.eraser.retract(path, stones.covers)
            self._save_state(state_path, session_id, state)
        return covered

    def _ask_for_consolidation(self, facts: list[str], session_id: str) -> None:
        """Ask for an opportunistic consolidation once enough new log text has piled up
        (``consolidation.min_new_tokens``): a consolidation resends all of MEMORY.md, so
        one per flush would cost more than the facts it adds. Scheduled ticks consolidate
        whatever waits."""
        with self._locks_guard:
            self._fresh_tokens += sum(self._count(fact) for fact in facts)
            due = self._fresh_tokens >= self.kernel.settings.consolidation.min_new_tokens
        if due and mf.request_consolidation(self.kernel, f"flushing session {session_id!r}"):
            with self._locks_guard:
                self._fresh_tokens = 0

    def _drop_indexed(self, facts: list[str]) -> tuple[list[str], int]:
        """Facts the index finds verbatim in some memory file are not written again."""
        if not facts or not self.kernel.settings.flush.dedup_search:
            return facts, 0
        kept: list[str] = []
        for position, fact in enumerate(facts):
            key = mf.normalise_fact(fact)
            try:
                hits = self.kernel.searcher.search(fact, limit=5, mode="all", via="flush")
            except Exception as exc:
                # The file-based dedup still runs; the index's own dedup is skipped this time.
                logger.warning("index dedup skipped: %s: %s", type(exc).__name__, exc)
                return [*kept, *facts[position:]], position - len(kept)
            if not any(key in mf.fact_keys(hit.content) for hit in hits):
                kept.append(fact)
        return kept, len(facts) - len(kept)

    # state -----------------------------------------------------------------------------------

    def _read(self, path: str, *, max_age: float = 0.0) -> str:
        try:
            return self.kernel.workspace.read_text(path, max_age=max_age)
        except FileNotFoundError:
            return ""

    def _reference_age(self) -> float:
        """How stale the MEMORY.md dedup reference may be: on a remote workspace, as stale
        as the index (``index.refresh_interval``); locally reads are cheap, so none."""
        if self.kernel.workspace.is_local:
            return 0.0
        return self.kernel.refresh_interval

    def _load_state(self, path: str) -> tuple[State, dict[str, Snapshot]]:
        """The session's state; and the daily log it had to read, by path (the flush
        that follows needs no second read of it when it is today's)."""
        with self._locks_guard:
            cached = self._states.get(path)
            if cached is not None:
                self._states.move_to_end(path)
        if cached is not None:
            return cached, {}
        state = State.loads(self._read(path), path)
        pending = state.pending
        logs: dict[str, Snapshot] = {}
        if isinstance(pending, Mapping) and isinstance(pending.get("entry"), str):
            # The last flush wrote its new mark as pending; the log says whether its entry
            # made it (a crash may have come between the two writes).
            log_path = str(pending.get("path") or "")
            logs[log_path] = self.kernel.workspace.read_snapshot(log_path)
            if pending["entry"] in logs[log_path].text:
                state = State(Mark.from_json(pending.get("mark")))
            else:
                state = State(state.mark)
        return state, logs

    def _save_state(self, path: str, session_id: str, state: State) -> None:
        with self._locks_guard:
            self._states.pop(path, None)
        self.kernel.workspace.write_text(path, state.dumps(session_id))
        if state.pending is None:
            self._remember(path, state)

    def _remember(self, path: str, state: State) -> None:
        with self._locks_guard:
            self._states[path] = state
            self._states.move_to_end(path)
            while len(self._states) > _STATES_KEPT:
                self._states.popitem(last=False)
