"""Conversation compaction: summarise the old part of a conversation when it grows too long.

:class:`CompactionPlugin` is the built-in plugin (entry point ``compaction`` in the
``harnessmem.plugins`` group). In ``pre_reasoning`` it runs the session's
:class:`ConversationCompactor`; in ``overflow`` it compacts by force and
returns a list that fits. One compaction:

1. *truncate_args* (when configured and its own trigger fires): long tool-call arguments
   of messages older than the kept tail are cut, in what is sent only (copies);
2. *trigger*: ``len(messages) >= trigger_messages`` or ``tokens >= trigger_tokens``;
3. *cut* (:func:`harnessmem.compaction._plan.plan_compaction`, by
   :func:`harnessmem.compaction._cutoff.choose_cut`): system head pinned, tail by
   ``keep_messages`` / ``keep_tokens``, bounded so the result fits under the triggers,
   call groups never split;
4. *offload* them to ``sessions/<id>.log.jsonl``, each exactly once
   (:mod:`harnessmem.memory.transcripts`);
5. *flush* the dropped messages into the daily log (``harness.flush``, a verified write),
   their facts asked for in the summary call itself when one model serves both
   (``compaction.facts_in_summary``; else a flush call of its own, before the offload);
6. *summarise*: one ``summary`` model call, incremental (previous summary + dropped
   messages), validated (:func:`harnessmem.compaction._summary.normalise_summary`: four sections as
   headings or labels, no refusal or echo, size bound);
7. *replace*: ``[system head] + [summary message] + tail``; a kept message that alone
   is too large is moved to a file the way eviction does it.

Failures never lose turns and never unbound the context. A flush or offload failure
postpones the compaction while the conversation is under twice its trigger (from there,
and under overflow, it goes ahead, reporting why). A summariser that fails or answers junk
does not keep the prefix in the context: once the prefix is in the session log, an
*automatic summary* built without a model (the extractive backend's four sections) takes
its place, and the result says ``degraded``. A failing summariser is backed off (the
next 1, 2, 4 ... compactions of the session do not ask it, up to
``compaction.summary_backoff_max``); a success resets that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from harnessmem.backends.overflow import is_context_overflow, overflow_limits
from harnessmem.compaction._cutoff import head_length, keep_start, truncate_tool_args
from harnessmem.compaction._plan import Plan, plan_compaction
from harnessmem.compaction._shrink import MessageShrinker, Originals
from harnessmem.compaction._summariser import Summariser
from harnessmem.compaction._summary import (
    Anchor,
    build_anchor,
    last_user_text,
    parse_anchor,
)
from harnessmem.compaction.message_times import MessageTimes
from harnessmem.events import CompactionResult
from harnessmem.memory.transcripts import OffloadResult, SessionTranscript
from harnessmem.messages import Follower, MessageChanges, SeenMessages
from harnessmem.plugins import hookimpl
from harnessmem.telemetry import names
from harnessmem.tokens import REPLY_PRIMING, TokenCounter

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion
    from harnessmem.events import TurnContext
    from harnessmem.kernel import Kernel
    from harnessmem.settings import CompactionSettings, HarnessSettings

logger = logging.getLogger("harnessmem.compaction")

Message = dict[str, Any]
#: An overflow retry aims this far under the limit the provider reported (its count
#: includes tool schemas and framing ours does not see).
_OVERFLOW_MARGIN = 0.9


class ConversationCompactor:
    """Compaction of one session's conversation; the plugin keeps one per session.

    Holds what must outlive a turn in memory: the originals of the copies it sent
    (truncated arguments, shrunk or masked outputs), so that the session log and the
    summariser get the full text, and the last summary, for callers that keep sending
    their raw history instead of the compacted list.
    """

    def __init__(
        self, kernel: Kernel, session_id: str, counter: TokenCounter | None = None
    ) -> None:
        self.kernel = kernel
        self.session_id = session_id
        self.counter = counter or TokenCounter()
        self.transcript = SessionTranscript(
            kernel.workspace,
            session_id,
            clock=kernel.clock,
            transform=kernel.hooks.transform_memory_text,
            lease_timeout=kernel.settings.compaction.offload_lease_timeout,
        )
        self.lock = threading.Lock()
        self.last_result: CompactionResult | None = None
        self.originals = Originals()
        self.shrinker = MessageShrinker(
            kernel, session_id, self.counter, self.originals, self.transcript.path
        )
        self._memory: Anchor | None = None  # last summary made, for raw-history callers
        self.times = MessageTimes()  # when the messages not yet logged were first seen
        # Survives new Session objects: the plugin keeps one compactor per session id.
        self.summariser = Summariser(kernel, session_id, self.counter)
        # The previous turn's messages and their token counts (see _count_turn).
        self._seen = SeenMessages()
        self._counts: list[int] = []
        self._total = 0  # sum(self._counts)
        self._follower = Follower()  # the turns counted, to compare only what changed

    @property
    def settings(self) -> CompactionSettings:
        return self.kernel.settings.compaction

    # the turn -------------------------------------------------------------------------------

    def compact(
        self,
        messages: Sequence[Message],
        *,
        budget: int | None = None,
        force: bool = False,
        focus: str | None = None,
        changes: MessageChanges | None = None,
    ) -> tuple[list[Message], CompactionResult]:
        """The list to send, and what was done.

        ``budget`` forces a compaction whose result must stay under ``budget`` tokens
        (overflow recovery); ``force`` compacts whatever the triggers say (a manual
        compaction, trigger ``"manual"``), with ``focus`` passed to the summariser;
        otherwise the triggers decide. ``changes``, the session's check of the turn
        (``ctx.changes``), spares comparing the conversation again to count its tokens.
        Never mutates ``messages`` or the dicts in it.
        """
        with self.lock:
            out, result = self._compact(
                list(messages), budget, force=force, focus=focus, changes=changes
            )
            self.last_result = result
            return out, result

    def recover(self, messages: Sequence[Message], error: BaseException) -> list[Message] | None:
        """A shorter list to retry with after a context-overflow ``error``.

        None when ``error`` is not an overflow, compaction is disabled, or nothing could
        be made shorter (the session then re-raises ``error``). The budget is the limit
        the provider's message states (scaled to our count, minus a margin), else half
        of the current size; never above ``trigger_tokens``.
        """
        if not self.settings.enabled or not is_context_overflow(error):
            return None
        tokens = self.counter.count_messages(messages)
        limit, reported = overflow_limits(error)
        if limit is not None:
            scale = tokens / reported if reported else 1.0
            budget = int(limit * min(scale, 1.0) * _OVERFLOW_MARGIN)
        else:
            budget = tokens // 2
        if self.settings.trigger_tokens:
            budget = min(budget, self.settings.trigger_tokens - 1)
        out, _ = self.compact(messages, budget=max(1, budget))
        return out if self.counter.count_messages(out) < tokens else None

    def _compact(
        self,
        messages: list[Message],
        budget: int | None,
        *,
        force: bool = False,
        focus: str | None = None,
        changes: MessageChanges | None = None,
    ) -> tuple[list[Message], CompactionResult]:
        count = self.counter.count_messages
        head = head_length(messages)
        if self.settings.offload_before_compact:
            self.times.note(messages, self.kernel.clock(), head)
        work, truncated = self._truncate_args(messages, head)
        # Token counts only when a token trigger or a compaction needs them (cached per message).
        tokens = (
            self._count_turn(work, changes)
            if self.settings.trigger_tokens or budget is not None
            else None
        )
        if budget is not None:
            trigger = "overflow"
        else:
            trigger = "manual" if force else self._trigger(work, tokens)
        if trigger and tokens is None:
            tokens = count(work)
        base: dict[str, Any] = {
            "session_id": self.session_id,
            "trigger": trigger,
            "messages_before": len(messages),
            "tokens_before": (count(messages) if truncated else tokens) or 0,
            "truncated_args": truncated,
        }
        if not trigger:
            result = CompactionResult(**base, messages_after=len(work), tokens_after=tokens or 0)
            return work, result
        telemetry = self.kernel.telemetry
        caller = telemetry.current()  # the agent's span: its next inference sees the result
        attributes = {
            names.CONVERSATION_ID: self.session_id,
            names.TRIGGER: trigger,
            names.MESSAGES_BEFORE: len(messages),
            names.TOKENS_BEFORE: base["tokens_before"],
        }
        with telemetry.span(names.COMPACT, attributes=attributes) as span:
            out, result = self._fired(work, head, budget, base, focus)
            if span.recording:
                span.set_attributes(
                    {
                        names.MESSAGES_AFTER: result.messages_after,
                        names.TOKENS_AFTER: result.tokens_after,
                        names.DROPPED: result.dropped,
                        names.DEGRADED: result.degraded,
                        names.POSTPONED: result.postponed,
                        names.SUMMARY_SOURCE: result.summary_source or None,
                    }
                )
        if result.compacted:
            caller.set(names.CONVERSATION_COMPACTED, True)
        if result.postponed:
            outcome = "postponed"
        elif not result.compacted:
            outcome = "unchanged"
        else:
            outcome = "degraded" if result.degraded else "compacted"
        telemetry.count(names.COMPACTIONS, 1, {names.TRIGGER: trigger, names.OUTCOME: outcome})
        return out, result

    def _fired(
        self,
        work: list[Message],
        head: int,
        budget: int | None,
        base: dict[str, Any],
        focus: str | None,
    ) -> tuple[list[Message], CompactionResult]:
        """The compaction a trigger fired (see :meth:`compact`)."""
        plan = plan_compaction(
            work,
            head,
            budget,
            settings=self.settings,
            counter=self.counter,
            log_path=self.transcript.path,
            memory=self._memory,
            originals=self.originals,
        )
        if not plan.dropped:
            out, shrunk = self._fit(work, plan)
            return out, self._finish(out, plan, base, compacted=bool(shrunk), shrunk=shrunk)
        may_wait = budget is None and not self._over_twice(work)
        # The dropped messages with when they were said (their own time, else when the
        # harness first saw them), taken before the offload forgets it: the flush grounds
        # "yesterday" on it and the summary shows the days.
        timed = replace(plan, originals=self.times.stamped(plan.positions, plan.originals))
        asked: dict[str, Any] = {}
        if self._one_call():
            # Offload first, then one model call for the summary and the prefix's facts:
            # the flush asks through the summariser, and asks its own model only when the
            # facts part of the answer is missing or junk.
            offload, offload_error = self._offload(plan)
            failures = [offload_error] if offload_error else []
            if failures and may_wait:
                flush, flush_result = "not run (the offload failed)", None
            else:
                self._restart_if(offload, plan)
                flush, flush_result = self._flush(
                    timed,
                    backoff=may_wait,
                    ask=lambda reference: self.summariser.ask_both(
                        timed, reference, asked, focus=focus
                    ),
                )
                failures += [flush] if flush.startswith("failed") else []
        else:
            flush, flush_result = self._flush(timed, backoff=may_wait)
            failures = [flush] if flush.startswith("failed") else []
            offload, offload_error = (None, "") if failures and may_wait else self._offload(plan)
            failures += [offload_error] if offload_error else []
            self._restart_if(offload, plan)
        done = {"flush": flush, "flush_result": flush_result, "offload": offload}
        if failures and may_wait:
            reason = "postponed: " + "; ".join(failures)
            return work, self._finish(work, plan, base, postponed=True, reason=reason, **done)
        answer, usage, problem = (
            asked["summary"] if asked else self.summariser.summarise(timed, focus=focus)
        )
        automatic = answer is None
        note = None
        if answer is None:
            failures.insert(0, problem)
            note = self.summariser.automatic_note(plan, offload, problem, self._log_path())
        summary = answer if answer is not None else self.summariser.automatic_summary(plan)
        out, dropped = self._replace(work, plan, summary, note=note), len(plan.dropped)
        out, shrunk = self._fit(out, plan)
        done.update(summary=summary, usage=usage, dropped=dropped, shrunk=shrunk)
        # Dropped turns without a copy in the log (offload failed under pressure) are a
        # degradation too, even with a good summary.
        degraded = automatic or bool(offload_error)
        reason = "; ".join(failures)
        return out, self._finish(
            out,
            plan,
            base,
            compacted=True,
            degraded=degraded,
            reason=reason,
            summary_source="automatic" if automatic else "model",
            **done,
        )

    # steps ----------------------------------------------------------------------------------

    def _truncate_args(self, messages: list[Message], head: int) -> tuple[list[Message], int]:
        """Cut long tool arguments of messages before the kept tail, when that pass fires."""
        settings = self.settings
        config = settings.truncate_args
        if config is None:
            return messages, 0
        fires = (config.trigger_messages and len(messages) >= config.trigger_messages) or (
            config.trigger_tokens and self.counter.count_messages(messages) >= config.trigger_tokens
        )
        if not fires:
            return messages, 0
        conversation = messages[head:]
        sums = (
            self.counter.count_prefix_sums(conversation)
            if settings.keep_tokens
            else [0] * (len(conversation) + 1)
        )
        stop = head + keep_start(
            sums, keep_messages=settings.keep_messages, keep_tokens=settings.keep_tokens
        )
        return truncate_tool_args(
            messages, head, stop, config.max_arg_chars, self.originals.remember
        )

    def _count_turn(self, messages: list[Message], changes: MessageChanges | None) -> int:
        """``count_messages(messages)``, encoding only the messages that differ from the
        previous turn's (whose counts are kept): the turn's cost follows what changed.

        With the session's ``changes``, only the positions that may have changed since the
        previous count (:class:`~harnessmem.messages.Follower`) are compared with it."""
        seen, counts = self._seen, self._counts
        with seen.lock:
            look = self._follower.look(messages, changes)
            if look.positions is None:
                changed = seen.changed(messages)
            else:
                changed = seen.changed_among(messages, look.positions)
            if len(counts) > len(messages):
                self._total -= sum(counts[len(messages) :])
                del counts[len(messages) :]
            total = self._total
            if changed:
                try:
                    sums = self.counter.count_prefix_sums([messages[i] for i in changed])
                except BaseException:
                    # Counts and copies no longer line up: the next turn counts afresh.
                    seen.forget()
                    counts.clear()
                    self._total = 0
                    self._follower.reset()
                    raise
                for position, index in enumerate(changed):
                    tokens = sums[position + 1] - sums[position]
                    if index < len(counts):
                        total += tokens - counts[index]
                        counts[index] = tokens
                    else:
                        total += tokens
                        counts.append(tokens)
            seen.remember(messages, changed)
            self._follower.saw(look)
            self._total = total
            return total + REPLY_PRIMING

    def _trigger(self, messages: list[Message], tokens: int | None) -> str:
        settings = self.settings
        if settings.trigger_messages and len(messages) >= settings.trigger_messages:
            return "messages"
        if settings.trigger_tokens and tokens is not None and tokens >= settings.trigger_tokens:
            return "tokens"
        return ""

    def _over_twice(self, messages: list[Message]) -> bool:
        """Whether the conversation reached twice a trigger: postponing must stop there."""
        settings = self.settings
        if settings.trigger_messages and len(messages) >= 2 * settings.trigger_messages:
            return True
        return bool(
            settings.trigger_tokens
            and self.counter.count_messages(messages) >= 2 * settings.trigger_tokens
        )

    def _restart_if(self, offload: OffloadResult | None, plan: Plan) -> None:
        if offload is not None and offload.restarted:
            # A different conversation under this session id: nothing remembered applies.
            plan.previous, plan.covered, self._memory = "", 0, None

    def _one_call(self) -> bool:
        """Whether the summary and the prefix's facts come from one model call: asked for
        (``compaction.facts_in_summary``), a flush before compaction, and one model
        serving both purposes."""
        settings = self.settings
        if not (settings.facts_in_summary and settings.flush_before_compact):
            return False
        kernel = self.kernel
        try:
            return kernel.model_for("summary").backend is kernel.model_for("flush").backend
        except Exception:  # no model backend installed: the plain path reports it
            return False

    def _flush(
        self, plan: Plan, *, backoff: bool, ask: Callable[[str], Completion | None] | None = None
    ) -> tuple[str, Any]:
        """Flush the dropped messages (a verified write); the status text and the result.

        ``backoff``: the compaction may wait, so a backed-off flush model is not asked
        (without it, this is the prefix's last chance to reach the daily log: ask).
        """
        if not self.settings.flush_before_compact:
            return "disabled", None
        try:
            result = self.kernel.flusher.flush(
                plan.originals, session_id=self.session_id, backoff=backoff, ask=ask
            )
        except Exception as exc:
            return f"failed: {type(exc).__name__}: {exc}", None
        if not getattr(result, "ok", True):
            return (
                f"failed: {getattr(result, 'error', None) or 'the flush reported failure'}",
                result,
            )
        return f"done ({getattr(result, 'status', 'ok')})", result

    def _offload(self, plan: Plan) -> tuple[OffloadResult | None, str]:
        """Append the dropped raw messages to the session log; the result or the error."""
        if not self.settings.offload_before_compact:
            return None, ""
        entries = list(zip(plan.positions, plan.originals, strict=True))
        said = self.times.said(plan.positions, plan.originals)
        try:
            result = self.transcript.offload(entries, verify=plan.anchor is None, said=said)
        except Exception as exc:
            logger.warning("offload of session %s failed: %s", self.session_id, exc)
            return None, f"offload failed: {type(exc).__name__}: {exc}"
        self.times.forget(max(plan.positions, default=0))
        return result, ""

    def _log_path(self) -> str | None:
        return self.transcript.path if self.settings.offload_before_compact else None

    def _replace(
        self, work: list[Message], plan: Plan, summary: str, *, note: str | None = None
    ) -> list[Message]:
        """``[head] + [new summary message] + tail``; ``note`` marks an automatic summary."""
        tail = work[plan.head + plan.cut :]
        latest = None
        if not any(m.get("role") == "user" for m in tail):
            latest = last_user_text(plan.originals)
        covers = plan.positions[-1]
        anchor = build_anchor(
            covers=covers,
            body=summary,
            log_path=self._log_path(),
            first_request=plan.first_request,
            latest_user=latest,
            note=note,
        )
        self._memory = Anchor(covers, summary, plan.first_request, self._log_path())
        self.originals.forget(plan.dropped)
        return [*work[: plan.head], anchor, *tail]

    def _fit(self, out: list[Message], plan: Plan) -> tuple[list[Message], tuple[str, ...]]:
        """Shrink kept messages (not the system head or the summary) to get under the limit."""
        if plan.limit is None:
            return out, ()
        first = plan.head
        if len(out) > first and parse_anchor(out[first]) is not None:
            first += 1
        return self.shrinker.fit(out, first, plan.limit)

    def _finish(
        self, out: list[Message], plan: Plan, base: dict[str, Any], **fields: Any
    ) -> CompactionResult:
        """The result of a fired trigger; fires ``on_compaction`` unless nothing changed."""
        tokens = self.counter.count_messages(out)
        fits = plan.limit is None or tokens < plan.limit
        if self.settings.trigger_messages and base["trigger"] != "overflow":
            fits = fits and len(out) < self.settings.trigger_messages
        backoff = self.summariser.backoff.state
        result = CompactionResult(
            **base,
            messages_after=len(out),
            tokens_after=tokens,
            fits=fits,
            summariser_failures=backoff.failures,
            summariser_skipping=backoff.skipping,
            **fields,
        )
        if result.compacted or result.postponed:
            self.kernel.hooks.compaction(result)
        if not fits:
            logger.warning(
                "session %s: compaction left %d messages / %d tokens, over its limit",
                self.session_id,
                len(out),
                tokens,
            )
        return result


class CompactionPlugin:
    """The built-in compaction plugin (entry point ``compaction``), one per harness.

    ``pre_reasoning`` and ``overflow`` run last (``trylast``), so they see
    what every other plugin did to the list (eviction sweeps first) and a user's own
    overflow handler gets the first word. One token counter serves the harness; one
    :class:`ConversationCompactor` per session.
    """

    name = "compaction"

    def __init__(self) -> None:
        self.counter = TokenCounter()
        self._compactors: dict[tuple[int, str], ConversationCompactor] = {}
        self._lock = threading.Lock()

    @hookimpl
    def harnessmem_configure(self, settings: HarnessSettings) -> None:
        """Warn about settings under which compaction would run on every turn."""
        compaction = settings.compaction
        if compaction.trigger_messages and compaction.keep_messages >= compaction.trigger_messages:
            logger.warning(
                "compaction.keep_messages (%d) is not below compaction.trigger_messages (%d): "
                "the kept tail is cut to fit under the trigger",
                compaction.keep_messages,
                compaction.trigger_messages,
            )

    def compactor(self, kernel: Kernel, session_id: str) -> ConversationCompactor:
        """The compactor of ``session_id`` in ``harness`` (made on first use)."""
        key = (id(kernel), session_id)
        with self._lock:
            compactor = self._compactors.get(key)
            if compactor is None or compactor.kernel is not kernel:
                compactor = ConversationCompactor(kernel, session_id, self.counter)
                self._compactors[key] = compactor
            return compactor

    @hookimpl(trylast=True)
    def pre_reasoning(self, ctx: TurnContext) -> None:
        """Compact ``ctx.messages`` when a trigger fires, or now when ``ctx.compact`` asks
        (a manual compaction, with ``ctx.compact_focus``); cut old tool arguments."""
        if not ctx.settings.compaction.enabled:
            return
        compactor = self.compactor(ctx.kernel, ctx.session_id)
        out, result = compactor.compact(
            ctx.messages, force=ctx.compact, focus=ctx.compact_focus, changes=ctx.changes
        )
        ctx.messages = out
        if result.trigger or result.truncated_args:
            ctx.outcomes["compaction"] = result

    @hookimpl(trylast=True)
    def overflow(self, ctx: TurnContext, error: BaseException) -> list[Message] | None:
        """A compacted list that fits, for a recognised overflow; None otherwise."""
        compactor = self.compactor(ctx.kernel, ctx.session_id)
        before = compactor.last_result
        out = compactor.recover(ctx.messages, error)
        if compactor.last_result is not before and compactor.last_result is not None:
            ctx.outcomes["compaction"] = compactor.last_result
        return out
