"""What a consolidation run and a ``memory_save`` did: :class:`ConsolidationResult` and
:class:`SaveResult` (exported by :mod:`harnessmem.memory.consolidation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ConsolidationResult", "ConsolidationStatus", "SaveResult"]


ConsolidationStatus = Literal[
    "consolidated", "unchanged", "nothing_new", "rejected", "deferred", "busy", "disabled"
]


@dataclass(frozen=True)
class ConsolidationResult:
    """What one consolidation run did.

    ``status``: ``consolidated`` (MEMORY.md rewritten, watermark advanced), ``unchanged``
    (the model answered NO_REPLY; watermark advanced), ``nothing_new`` (no log text past the
    watermark and MEMORY.md within budget: no model call), ``rejected`` (``reason`` says
    why; nothing changed), ``deferred`` (the model failed or was rejected on the last runs
    and is backed off: not asked; ``reason`` says why), ``busy`` (another run holds the
    lease) or ``disabled``.
    ``pending`` is true when more log text waits for the next run.
    """

    status: ConsolidationStatus
    reason: str = ""
    files: tuple[str, ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    entries_before: int = 0
    entries_lost: int = 0
    preserved_appends: int = 0
    history_path: str | None = None
    pending: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def accepted(self) -> bool:
        return self.status in ("consolidated", "unchanged")

    def describe(self, budget: int | None = None) -> str:
        """What the run did, as a person reads it (``budget``: MEMORY.md's token budget)."""
        files = len(self.files)
        source = f"{files} daily log{'s' if files != 1 else ''}"
        if self.status == "consolidated":
            within = f" (budget {budget:,})" if budget is not None else ""
            text = (
                f"consolidated {source} into MEMORY.md: {self.tokens_before:,} -> "
                f"{self.tokens_after:,} tokens{within}"
            )
            if self.history_path:
                text += f"; previous version kept in {self.history_path}"
        elif self.status == "unchanged":
            text = f"read {source}: nothing to add to MEMORY.md"
        elif self.status == "nothing_new":
            text = "nothing new to consolidate: every daily log is past the watermark"
        elif self.status == "rejected":
            text = f"rewrite rejected, MEMORY.md unchanged: {self.reason}"
        elif self.status == "deferred":
            text = f"not asked, the model is backed off: {self.reason}"
        elif self.status == "busy":
            text = "another process is consolidating this workspace; try again later"
        else:
            text = "consolidation is disabled (consolidation.enabled = false)"
        if self.pending:
            text += "; more daily-log text waits for the next run"
        return text

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class SaveResult:
    """What ``harness.save(text)`` did: ``entries`` appended to MEMORY.md, ``duplicates``
    skipped because MEMORY.md already held them, ``left_out`` the lines of the text that
    are not facts (headings), each with why."""

    path: str
    entries: tuple[str, ...]
    duplicates: int = 0
    warnings: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    @property
    def saved(self) -> bool:
        return bool(self.entries)

    def __str__(self) -> str:
        count = len(self.entries)
        if not count:
            if not self.duplicates:
                return "nothing saved: the text holds no fact"
            return "nothing new: every fact was already there"
        skipped = f", {self.duplicates} already there" if self.duplicates else ""
        return f"{count} new {'entry' if count == 1 else 'entries'}{skipped}"

    @property
    def left_out_note(self) -> str:
        """``Not saved: ...`` naming each left-out line and why; "" when none was."""
        if not self.left_out:
            return ""
        return (
            f"Not saved: {'; '.join(self.left_out)}. Write each fact as its own line or "
            "bullet that makes sense without the heading."
        )

    @property
    def message(self) -> str:
        """The text the ``memory_save`` tool answers with."""
        count = len(self.entries)
        if not count:
            text = (
                f"Already in {self.path}: nothing new to save"
                if self.duplicates
                else f"Nothing saved to {self.path}: the text holds no fact"
            )
        else:
            noun = "memory" if count == 1 else "memories"
            skipped = f" ({self.duplicates} already there)" if self.duplicates else ""
            text = f"Saved {count} {noun} to {self.path}{skipped}"
        return f"{text}. {self.left_out_note}" if self.left_out else text
