"""The consolidation watermark ``memory/.consolidation_state`` (private).

JSON: for each daily log (by file name, so an archived log keeps its record), how many bytes
were consolidated and the hash of that prefix; the hash of the MEMORY.md it produced; the
previous versions kept in ``memory/.history/`` (so that keeping one more needs no listing);
and, between "about to replace MEMORY.md" and the commit, the new state as ``pending``. The
seed's format, a bare ISO-8601 instant, is read as "logs modified before it are consolidated".
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harnessmem.encoding import content_hash
from harnessmem.memory import files as mf

__all__ = ["Segment", "Watermark", "same_content"]

logger = logging.getLogger("harnessmem.memory.consolidation")


def same_content(data: bytes, recorded: object) -> bool:
    """Whether ``data`` hashes to ``recorded``, a hash the watermark holds.

    New hashes are :func:`~harnessmem.encoding.content_hash`'s. A watermark written before
    that was the one content hash holds blake2b hashes: those still match, so that an
    upgrade does not consolidate every daily log again.
    """
    if not isinstance(recorded, str):
        return False
    if recorded == content_hash(data):
        return True
    return recorded == hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class Watermark:
    """``files``: log name → ``{"bytes": n, "hash": h}`` of the consolidated prefix."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    memory_hash: str | None = None
    legacy_since: float | None = None
    input_limit: int | None = None
    pending: dict[str, Any] | None = None
    #: Paths of the previous MEMORY.md versions in ``memory/.history/``, oldest first;
    #: None when unknown (never recorded, or a run stopped between its writes): list them.
    history: list[str] | None = None
    #: Log names found by this run's listing (not stored).
    live: set[str] | None = None
    #: Folders under memory/ that hold files, when that listing told (not stored).
    folders: set[str] | None = None

    def dumps(self, now: float) -> str:
        data: dict[str, Any] = {
            "version": 1,
            "consolidated_at": mf.iso_utc(now),
            "files": self.files,
            "memory_hash": self.memory_hash,
        }
        if self.input_limit is not None:
            data["input_limit"] = self.input_limit
        if self.legacy_since is not None:
            data["legacy_since"] = self.legacy_since
        if self.pending is not None:
            data["pending"] = self.pending
        if self.history is not None:
            data["history"] = self.history
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def parse(cls, raw: str, *, where: str) -> Watermark:
        """The watermark stored as ``raw`` (empty: nothing consolidated yet)."""
        raw = raw.strip()
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, Mapping):
            return cls._legacy(raw, where)
        files, memory_hash = data.get("files"), data.get("memory_hash")
        limit, since, pending, history = (
            data.get("input_limit"),
            data.get("legacy_since"),
            data.get("pending"),
            data.get("history"),
        )
        return cls(
            files=dict(files) if isinstance(files, Mapping) else {},
            memory_hash=memory_hash if isinstance(memory_hash, str) else None,
            input_limit=limit if isinstance(limit, int) and limit > 0 else None,
            legacy_since=float(since) if isinstance(since, int | float) else None,
            pending=dict(pending) if isinstance(pending, Mapping) else None,
            history=(
                [p for p in history if isinstance(p, str)] if isinstance(history, list) else None
            ),
        )

    @classmethod
    def _legacy(cls, raw: str, where: str) -> Watermark:
        """The seed's watermark: a bare ISO-8601 instant (``2025-06-15T12:00:00Z``)."""
        try:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            logger.warning(
                "%s holds neither JSON nor an ISO timestamp (%r); consolidating every log",
                where,
                raw[:40],
            )
            return cls()
        return cls(legacy_since=moment.timestamp())

    def resolve(self, memory: bytes) -> bool:
        """Adopt the pending state if ``memory`` (MEMORY.md now) starts with what it wrote.

        "Starts with": ``memory_save`` may have appended since. Returns whether it was
        adopted; either way nothing is pending afterwards.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return False
        size = int(pending.get("memory_bytes") or 0)
        if not size or not same_content(memory[:size], pending.get("memory_hash")):
            return False
        files = pending.get("files")
        self.files = dict(files) if isinstance(files, Mapping) else {}
        self.memory_hash = str(pending["memory_hash"])
        return True


@dataclass
class Segment:
    """New text of one daily log for this run."""

    name: str
    path: str
    text: str
    start: int  # bytes of the file consolidated before this run
    end: int  # bytes consolidated after it
    file_hash: str  # hash of the file's first ``end`` bytes
