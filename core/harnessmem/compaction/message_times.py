"""When each message of a conversation was said, as far as the harness can tell.

Most agent loops send messages without a time of their own, and a session log line is
written when compaction takes the message out of the context, often hours after it was
said. :class:`MessageTimes` notes, for each conversation position, the harness clock at
the first turn the message was seen, with its fingerprint; the offload then records that
time (``said``) for the messages it writes. The fingerprint guards against a list that
changed under the same positions (a caller that edited its history, or started another
conversation under the session id): such a message gets no time rather than a wrong one.

Positions are counted as the compaction plan counts them: 1 is the first message after
the pinned system messages; after a compaction, the summary message at the top says how
many it stands for, and the message below it is the next position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harnessmem.compaction._summary import parse_anchor
from harnessmem.messages import TIME_KEYS, fingerprint

__all__ = ["MessageTimes"]


class MessageTimes:
    """First-seen times of the messages not yet in the session log, by position."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[str, float]] = {}
        self._through = 0  # positions up to here were noted already

    def note(self, conversation: Sequence[Mapping[str, Any]], now: float, head: int = 0) -> None:
        """Note ``now`` for the messages of ``conversation[head:]`` (the list after its
        pinned head) that come after every position noted so far; the others keep their
        time."""
        if len(conversation) <= head:
            return
        anchor = parse_anchor(conversation[head])
        start = head + (1 if anchor else 0)
        first = anchor.covers + 1 if anchor else 1  # the position of conversation[start]
        last = first + len(conversation) - start - 1
        for pos in range(max(first, self._through + 1), last + 1):
            self._seen[pos] = (fingerprint(conversation[start + pos - first]), now)
        self._through = max(self._through, last)

    def said(
        self, positions: Sequence[int], messages: Sequence[Mapping[str, Any]]
    ) -> list[float | None]:
        """When each of ``messages`` (at ``positions``) was first seen; None when it was
        not seen, or a different message was seen at its position."""
        times: list[float | None] = []
        for pos, message in zip(positions, messages, strict=True):
            seen = self._seen.get(pos)
            times.append(seen[1] if seen is not None and seen[0] == fingerprint(message) else None)
        return times

    def stamped(
        self, positions: Sequence[int], messages: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """``messages`` with a ``timestamp`` (seconds since the epoch) where they have no
        time of their own and one was noted (:meth:`said`); the others as they are.
        Fingerprints ignore the key, so the flush's mark is not disturbed."""
        stamped: list[dict[str, Any]] = []
        for message, moment in zip(messages, self.said(positions, messages), strict=True):
            own = any(message.get(key) is not None for key in TIME_KEYS)
            if moment is None or own:
                stamped.append(dict(message))
            else:
                stamped.append({**message, "timestamp": moment})
        return stamped

    def forget(self, through: int) -> None:
        """Drop what was noted for positions up to ``through`` (they are in the log)."""
        for pos in [pos for pos in self._seen if pos <= through]:
            del self._seen[pos]

    def __len__(self) -> int:
        return len(self._seen)
