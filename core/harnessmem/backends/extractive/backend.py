"""The ``extractive`` model backend: every job done offline with classical methods.

It serves when no model name is configured, and as the fallback when the daily model
budget is spent. It is deterministic, needs no key and never touches the network. It is a
baseline, not a pretend LLM: it selects and rewrites sentences that are in its input; it
does not infer, paraphrase freely or tell which of two contradicting facts is true
(docs/models.md lists what it does and does not do). Its facts still get dates: the flush
resolves "yesterday" to the day it meant when it writes any backend's facts
(:mod:`harnessmem.memory.grounding`).

It reads its inputs from the request contract of :mod:`harnessmem.prompts` (tagged blocks
in the user message), so the harness sends it the same requests as an LLM:

- ``summary``: ``<conversation>`` (and ``<previous_summary>``) -> the four sections
  ``## SESSION INTENT`` / ``## SUMMARY`` / ``## ARTIFACTS`` / ``## NEXT STEPS``;
- ``flush``: ``<conversation>``, with ``<memory_md>`` and ``<todays_log>`` as the dedup
  reference -> ``- fact`` bullets, or ``NO_REPLY``;
- ``consolidation``: ``<memory_md>`` and ``<daily_logs>``, the budget from "N tokens" in the
  system text (else ``max_tokens``, else ``options.budget_tokens``) -> the new MEMORY.md.

Without a ``<conversation>`` block it summarises or extracts from the request's own
non-system messages (each may hold a rendered transcript, or be a chat message itself).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from harnessmem.backends.base import BackendOptions, Completion, ModelBackend, ModelRequest
from harnessmem.backends.extractive._turns import Turn, turns_of
from harnessmem.errors import ModelResponseError
from harnessmem.prompts import FACTS_TOKENS, NO_REPLY, parse_conversation, read_blocks

if TYPE_CHECKING:
    from harnessmem.tokens import TokenCounter

_BUDGET = re.compile(
    r"(?:within|under|budget of|at most|max(?:imum)?)\s+(?:about\s+)?"
    r"(\d[\d,]*)\s+tokens",
    re.I,
)


#: Turns of conversation each ``max_facts`` bullets stand for.
_TURNS_PER_CAP = 20


class ExtractiveOptions(BackendOptions):
    """Options of the extractive backend (``model.options`` when ``model.backend`` is it)."""

    summary_sentences: int = Field(
        12, ge=1, le=200, description="Most salient sentences in a summary's SUMMARY section."
    )
    max_artifacts: int = Field(
        30, ge=0, le=500, description="Most items in a summary's ARTIFACTS section."
    )
    max_facts: int = Field(
        20,
        ge=1,
        le=500,
        description="Most bullets one flush writes for each 20 turns of conversation it reads.",
    )
    min_fact_score: float = Field(
        1.3,
        ge=0,
        description="Least score of a plain first-person statement to be kept as a fact "
        "(explicit requests, preferences, decisions and named values score 3 and up).",
    )
    duplicate_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="Word-set similarity (Jaccard) at which two facts count as the same.",
    )
    budget_tokens: int = Field(
        4_000,
        gt=0,
        description="MEMORY.md budget when a consolidation request states none.",
    )


class ExtractiveBackend(ModelBackend):
    """Summaries, fact extraction and consolidation without a language model."""

    name: ClassVar[str] = "extractive"
    Options: ClassVar[type[BackendOptions]] = ExtractiveOptions
    capabilities: ClassVar[frozenset[str]] = frozenset({"offline", "deterministic"})
    metered: ClassVar[bool] = False

    options: ExtractiveOptions

    def __init__(self, options: BackendOptions | None = None, **context: Any) -> None:
        super().__init__(options if options is not None else ExtractiveOptions(), **context)
        self._counter: TokenCounter | None = None
        self._lock = threading.Lock()

    def _complete(self, request: ModelRequest) -> Completion:
        """Do the job ``request.purpose`` names on its messages (see the module doc)."""
        messages, purpose, max_tokens = request.messages, request.purpose, request.max_tokens
        blocks = read_blocks(messages)
        if purpose == "summary":
            text = self._summary(messages, blocks, max_tokens)
        elif purpose == "flush":
            text = self._flush(messages, blocks, max_tokens)
        else:
            text = self._consolidation(messages, blocks, max_tokens)
        if not text.strip():
            raise ModelResponseError(
                f"the extractive backend found nothing to write for {purpose!r}",
                hint="the request held no memory and no entries; there is nothing to do",
            )
        counter = self._tokens()
        return Completion(
            text=text,
            prompt_tokens=counter.count_messages(messages),
            completion_tokens=counter.count_text(text),
            model="extractive",
            cost=0.0,
            finish_reason="stop",
        )

    # -- jobs ------------------------------------------------------------------------------------

    def _summary(
        self, messages: Sequence[Mapping[str, Any]], blocks: dict[str, str], cap: int | None
    ) -> str:
        system = "\n".join(
            str(m.get("content") or "") for m in messages if m.get("role") == "system"
        )
        if "## NEW FACTS" in system:
            # The request asks for the facts too (compaction's one call): both jobs.
            bound = None if cap is None else max(64, cap - FACTS_TOKENS)
            facts = self._flush(messages, blocks, None)
            return f"{self._summary_only(messages, blocks, bound)}\n\n## NEW FACTS\n{facts}"
        return self._summary_only(messages, blocks, cap)

    def _summary_only(
        self, messages: Sequence[Mapping[str, Any]], blocks: dict[str, str], cap: int | None
    ) -> str:
        # Each job's module is imported by its first call (their hundreds of regular
        # expressions cost a harness that never runs the job, e.g. an MCP server, ~40 ms).
        from harnessmem.backends.extractive._summary import summarise

        turns = self._conversation(messages, blocks)
        previous = blocks.get("previous_summary")
        sentences, artifacts = self.options.summary_sentences, self.options.max_artifacts
        while True:
            text = summarise(turns, previous, max_sentences=sentences, max_artifacts=artifacts)
            if cap is None or self._tokens().count_text(text) <= cap or sentences <= 1:
                return text
            sentences, artifacts = max(1, sentences // 2), artifacts // 2

    def _flush(
        self, messages: Sequence[Mapping[str, Any]], blocks: dict[str, str], cap: int | None
    ) -> str:
        from harnessmem.backends.extractive._facts import extract_facts

        turns = self._conversation(messages, blocks)
        reference = "\n".join(blocks.get(tag, "") for tag in ("memory_md", "todays_log"))
        facts = extract_facts(
            turns,
            reference,
            # A batched flush reads many turns at once: the cap grows with them, so that a
            # long excerpt is not held to the few facts of a short one.
            max_facts=self.options.max_facts * (1 + (max(len(turns), 1) - 1) // _TURNS_PER_CAP),
            threshold=self.options.duplicate_threshold,
            min_score=self.options.min_fact_score,
        )
        bullets = [f"- {fact}" for fact in facts]
        if cap is not None and self._tokens().count_text("\n".join(bullets)) > cap:
            # The most facts, in order, whose text fits: found by halving, since counting
            # the text again for each fact dropped would cost the square of their number.
            def fits(kept: int, cap: int = cap) -> bool:
                return self._tokens().count_text("\n".join(bullets[:kept])) <= cap

            low, high = 0, len(bullets) - 1  # fits(low); not fits(high + 1)
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if fits(middle) else (low, middle - 1)
            bullets = bullets[:low]
        return "\n".join(bullets) or NO_REPLY

    def _consolidation(
        self, messages: Sequence[Mapping[str, Any]], blocks: dict[str, str], cap: int | None
    ) -> str:
        from harnessmem.backends.extractive._consolidate import consolidate

        memory = blocks.get("memory_md", "")
        entries = blocks.get("daily_logs")
        if entries is None and "memory_md" not in blocks:
            # No contract blocks: the whole request is the material to consolidate.
            entries = "\n".join(
                str(m.get("content") or "") for m in messages if m.get("role") != "system"
            )
        system = " ".join(
            str(m.get("content") or "") for m in messages if m.get("role") == "system"
        )
        stated = _BUDGET.search(system)
        budget = int(stated.group(1).replace(",", "")) if stated else None
        budget = min(b for b in (budget, cap) if b) if budget or cap else None
        return consolidate(
            memory,
            entries or "",
            budget_tokens=budget or self.options.budget_tokens,
            count_tokens=self._tokens().count_text,
            threshold=self.options.duplicate_threshold,
        )

    # -- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _conversation(messages: Sequence[Mapping[str, Any]], blocks: dict[str, str]) -> list[Turn]:
        if "conversation" in blocks:
            return turns_of(parse_conversation(blocks["conversation"]))
        turns: list[Turn] = []
        for message in messages:
            if message.get("role") in {"system", "developer"}:
                continue
            content = message.get("content")
            parsed = parse_conversation(content) if isinstance(content, str) else []
            turns.extend(turns_of(parsed if parsed else [message]))
        return turns

    def _tokens(self) -> TokenCounter:
        with self._lock:
            if self._counter is None:
                from harnessmem.tokens import TokenCounter

                self._counter = TokenCounter()
            return self._counter
