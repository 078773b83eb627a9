"""The flush's high-water mark: how far each session's conversation is flushed.

:class:`Mark` records how many messages of the list were flushed, the fingerprint of the
last one and the fingerprints of the last :data:`SEEN_LIMIT` flushed messages, so that the
unflushed part of a list that only grew costs one fingerprint to find, and the part of a
list that compaction rewrote is found by fingerprints. :class:`State` is what the state
file ``memory/.flush_state/<session>.json`` holds: the mark, and a pending one while an
entry is being appended (see :mod:`harnessmem.memory.flush`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessmem.messages import fingerprint

logger = logging.getLogger("harnessmem.memory.flush")

__all__ = ["SEEN_LIMIT", "Mark", "State"]

Message = dict[str, Any]
#: Fingerprints of flushed messages the mark remembers, to find the new part of a list
#: that compaction rewrote. A conversation is compacted long before it has this many.
SEEN_LIMIT = 1024


@dataclass
class Mark:
    """How far a session is flushed: ``count`` messages of its list, ending with ``last``."""

    count: int = 0
    last: str | None = None
    seen: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "last": self.last, "seen": self.seen}

    @classmethod
    def from_json(cls, data: Any) -> Mark:
        if not isinstance(data, Mapping):
            return cls()
        seen = data.get("seen")
        last = data.get("last")
        return cls(
            count=int(data.get("count") or 0),
            last=last if isinstance(last, str) else None,
            seen=[s for s in seen if isinstance(s, str)] if isinstance(seen, list) else [],
        )

    def split(self, messages: Sequence[Message]) -> tuple[list[Message], Mark]:
        """The unflushed messages, and the mark that covers all of ``messages``."""
        size = len(messages)
        fps: list[str] | None = None
        count = self.count
        if count and count <= size and _fp(messages[count - 1]) == self.last:
            new = list(messages[count:])
        else:
            # The list is not an extension of what was flushed (compaction rewrote it, or
            # the caller passed a slice): everything after the last flushed message is new,
            # or, when that message is gone, everything not flushed before.
            fps = [_fp(m) for m in messages]
            if self.last in fps:
                start = size - fps[::-1].index(self.last)
                new = list(messages[start:])
            else:
                known = set(self.seen)
                new = [m for m, f in zip(messages, fps, strict=True) if f not in known]
                if not new:
                    # A part of what was flushed (compaction flushing the prefix it
                    # drops): this mark still finds the place of the list that goes on,
                    # one moved to this part would not. Nothing to write, either.
                    return [], self
        added = [_fp(m) for m in new]
        seen = list(dict.fromkeys([*self.seen, *added]))[-SEEN_LIMIT:]
        last = (fps[-1] if fps else _fp(messages[-1])) if size else self.last
        return new, Mark(size, last, seen)


def _fp(message: Message) -> str:
    return fingerprint(message)[:16]


@dataclass
class State:
    mark: Mark
    pending: dict[str, Any] | None = None

    @classmethod
    def loads(cls, raw: str, path: str) -> State:
        """The state a state file holds; a fresh one for an empty or damaged file."""
        if not raw.strip():
            return cls(Mark())
        try:
            data = json.loads(raw)
        except ValueError:
            # Writes are atomic, so this is not a torn write but a damaged file: start over
            # (at worst facts are extracted again, and write-time dedup drops the repeats).
            logger.warning("flush state %s is not JSON; starting a new high-water mark", path)
            return cls(Mark())
        return cls(Mark.from_json(data.get("mark")), data.get("pending"))

    def dumps(self, session_id: str) -> str:
        """The text of the state file of ``session_id``."""
        data: dict[str, Any] = {"version": 1, "session": session_id, "mark": self.mark.to_json()}
        if self.pending is not None:
            data["pending"] = self.pending
        return json.dumps(data, ensure_ascii=False)
