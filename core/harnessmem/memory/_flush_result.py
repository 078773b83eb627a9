"""What one flush did: :class:`FlushResult` (exported by :mod:`harnessmem.memory.flush`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FlushResult", "FlushStatus"]

FlushStatus = Literal[
    "written",
    "nothing_new",
    "no_reply",
    "duplicates",
    "failed",
    "deferred",
    "batched",
    "queued",
    "disabled",
]


@dataclass(frozen=True)
class FlushResult:
    """What one flush did.

    ``status``: ``written`` (an entry was appended and verified), ``nothing_new`` (no
    unflushed message with text), ``no_reply`` (the model found nothing to remember),
    ``duplicates`` (every fact was already on file), ``failed`` (``error`` says why; the
    mark did not move, so the messages are sent again next time), ``deferred`` (the flush
    model failed on the last occasions and is backed off: it was not asked, the mark did
    not move; ``error`` says why), ``batched`` (under ``flush.batch_tokens`` of new
    conversation: held back for a later flush, the mark did not move), ``queued``
    (background mode) or ``disabled``. ``ok`` is true for every status but ``failed``,
    ``deferred`` and ``batched``: after an ok result, the messages are durably covered.
    """

    session_id: str
    status: FlushStatus
    path: str | None = None
    entries: tuple[str, ...] = ()
    duplicates: int = 0
    messages: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status not in ("failed", "deferred", "batched")

    @property
    def written(self) -> bool:
        return self.status == "written"
