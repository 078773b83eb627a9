"""Asking for a compaction summary: the model, the back-off, and the automatic summary.

:class:`Summariser` serves one session's :class:`~harnessmem.compaction.ConversationCompactor`.
It asks the ``summary`` model (incremental: previous summary + the newly dropped messages;
with the flush's dedup reference, for the new facts too, so that a compaction needs one
call), validates the answer (:func:`harnessmem.compaction._summary.normalise_summary`), records
failures and rejected answers, and backs a failing model off (:mod:`harnessmem.models.backoff`).
When there is no good answer, :meth:`Summariser.automatic_summary` builds the four sections
without a model (the extractive backend), so that the dropped prefix can still leave the
context once it is safe in the session log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.backends.base import Completion
from harnessmem.compaction._plan import Plan, summary_tokens
from harnessmem.compaction._summary import SECTIONS, normalise_summary, split_facts
from harnessmem.memory import files as mf
from harnessmem.memory.grounding import transcript_dates
from harnessmem.models.backoff import Backoff
from harnessmem.prompts import FACTS_TOKENS, summary_request

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion
    from harnessmem.kernel import Kernel
    from harnessmem.memory.transcripts import OffloadResult
    from harnessmem.settings import CompactionSettings
    from harnessmem.tokens import TokenCounter

__all__ = ["Summariser"]

logger = logging.getLogger("harnessmem.compaction")

Message = dict[str, Any]
#: Tool results in a summary request are cut here: the summary needs their gist and
#: identifiers, and their full text is in the session log.
_RESULT_CHARS = 500


class Summariser:
    """The summaries of one session; the back-off lives as long as the compactor does."""

    def __init__(self, kernel: Kernel, session_id: str, counter: TokenCounter) -> None:
        self.kernel = kernel
        self.session_id = session_id
        self.counter = counter
        self.backoff = Backoff(kernel.settings.compaction.summary_backoff_max)

    @property
    def settings(self) -> CompactionSettings:
        return self.kernel.settings.compaction

    def ask_both(
        self, plan: Plan, reference: str, asked: dict[str, Any], *, focus: str | None = None
    ) -> Completion | None:
        """The flush's ``ask``: one summary call that also asks for the new facts. Keeps
        the summary outcome in ``asked``; returns the facts as the flush model's answer,
        or None (missing or junk: the flush asks its own model)."""
        if not self.backoff.ready():
            asked["summary"] = (None, None, self._backed_off())
            return None
        text, completion, problem, facts = self._ask(plan, facts_reference=reference, focus=focus)
        asked["summary"] = (text, completion, problem)
        self._record_outcome(text, completion, problem)
        if facts is None or not (mf.is_no_reply(facts) or mf.has_bullets(facts)):
            return None
        model = completion.model if completion is not None else ""
        return Completion(text=facts, prompt_tokens=0, completion_tokens=0, model=model)

    def summarise(
        self, plan: Plan, *, focus: str | None = None
    ) -> tuple[str | None, Completion | None, str]:
        """One ``summary`` call; the validated summary, or None and what went wrong.

        While the summariser is backed off after failures, it is not asked at all.
        ``focus``: what a manual compaction asked the summary to keep.
        """
        if not self.backoff.ready():
            return None, None, self._backed_off()
        text, completion, problem, _ = self._ask(plan, focus=focus)
        self._record_outcome(text, completion, problem)
        return text, completion, problem

    def _backed_off(self) -> str:
        state = self.backoff.state
        return (
            f"the summariser is backed off after {state.failures} failure(s) in a row "
            f"(last: {state.last_error})"
        )

    def _record_outcome(
        self, text: str | None, completion: Completion | None, problem: str
    ) -> None:
        if text is None:
            self.backoff.failed(problem)
            if completion is not None:
                # A call that answered junk is a failure too: the ledger and status say so.
                self.kernel.model_for("summary").rejected("summary", problem)
        else:
            self.backoff.succeeded()

    def _ask(
        self, plan: Plan, *, facts_reference: str | None = None, focus: str | None = None
    ) -> tuple[str | None, Completion | None, str, str | None]:
        """One summary call: the summary (or None), the completion, what went wrong, and
        (when ``facts_reference`` asked for them) the text of the answer's facts section."""
        bound = summary_tokens(self.settings, plan.limit)
        settings = self.kernel.settings
        messages = self.new_messages(plan)
        now = self.kernel.clock()
        zone = settings.workspace.timezone
        try:
            request = summary_request(
                messages,
                previous_summary=plan.previous or None,
                template=self.settings.summary_prompt or None,
                facts_reference=facts_reference,
                today=layout.local_date(now, zone),
                max_result_chars=_RESULT_CHARS,
                max_words=bound * 3 // 4,
                focus=focus,
                dates=transcript_dates(messages, timezone=zone, now=now),
            )
            extra = FACTS_TOKENS if facts_reference is not None else 0
            completion = self.kernel.model_for("summary").complete(
                request, purpose="summary", max_tokens=bound + extra
            )
        except Exception as exc:
            return None, None, f"the summariser failed: {type(exc).__name__}: {exc}", None
        answer, facts = completion.text, None
        if facts_reference is not None:
            answer, facts = split_facts(answer)
        # The instructions as sent: an answer that repeats them is no summary.
        text, problem = normalise_summary(answer, prompt=str(request[0]["content"]))
        if text is None:
            return None, completion, f"the summariser's answer was rejected: {problem}", facts
        tokens = self.counter.count_text(text)
        if tokens > bound:
            problem = f"{tokens} tokens, over the bound of {bound}"
            return None, completion, f"the summariser's answer was rejected: {problem}", facts
        return text, completion, "", facts

    @staticmethod
    def new_messages(plan: Plan) -> list[Message]:
        """The dropped messages the previous summary does not stand for yet."""
        return [m for p, m in zip(plan.positions, plan.originals, strict=True) if p > plan.covered]

    def automatic_summary(self, plan: Plan) -> str:
        """The four sections built without a model (the extractive backend's summary),
        within the summary's size bound; it continues the previous summary as a model's
        would."""
        from harnessmem.backends.extractive import ExtractiveBackend

        bound = summary_tokens(self.settings, plan.limit)
        request = summary_request(
            self.new_messages(plan), previous_summary=plan.previous or None, template=""
        )
        try:
            text = ExtractiveBackend().complete(request, purpose="summary", max_tokens=bound).text
        except Exception as exc:  # nothing to distil: the sections say so
            logger.debug("automatic summary of session %s: %s", self.session_id, exc)
            text = ""
        body, _ = normalise_summary(text)
        if body is None:
            body = "\n\n".join(f"## {name}\nNone" for name in SECTIONS)
        # The extractive summary halves itself under the bound; a few long lines may
        # still be over it: keep whole lines from the top while they fit.
        while self.counter.count_text(body) > bound and "\n" in body:
            body = body.rsplit("\n", 1)[0]
        return body

    def automatic_note(
        self, plan: Plan, offload: OffloadResult | None, problem: str, log_path: str | None
    ) -> str:
        """The first line of an automatic summary: what it is, why, and where the text is."""
        first, last = plan.positions[0], plan.positions[-1]
        note = (
            f"The first {last} messages of this conversation were compacted into this summary. "
            f"It is an automatic summary, built without a model ({problem.rstrip('.')}); "
            f"it is coarser than a model's."
        )
        lines = [line for line in (offload.lines if offload is not None else ()) if line]
        if lines:
            note += (
                f" Messages {first}-{last} are on lines {min(lines)}-{max(lines)} of the "
                f"session log {log_path}: read them with memory_get when a detail "
                "is missing here."
            )
        return note
