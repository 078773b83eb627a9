"""Making kept messages smaller without losing them: shrink them into files.

Compaction uses this when dropping messages is not enough (a kept message that alone is
too large): *shrink* moves a message's text to a file under ``eviction.path`` with the
eviction plugin's path scheme and placeholder (head + tail + where the rest is), the same
kind of file an evicted tool result becomes, so nothing is lost.

Every copy sent in place of a message is recorded in :class:`Originals`, so the session
log, the flush and the summariser later get the full original, not the copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from harnessmem.events import ToolResultEvictedEvent

# The eviction plugin owns the path scheme and the placeholder; reusing them makes these
# files the same kind as evicted results (same retention, same reader).
from harnessmem.eviction import eviction_path, placeholder
from harnessmem.messages import fingerprint, text_only

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.tokens import TokenCounter

__all__ = ["MASK_MIN_CHARS", "MessageShrinker", "Originals", "text_of"]

Message = dict[str, Any]

#: Tool outputs up to this long are not worth shrinking.
MASK_MIN_CHARS: Final = 200


def text_of(message: Mapping[str, Any]) -> str | None:
    """The text of a message's content (a string or text parts only); None otherwise."""
    return text_only(message.get("content"))


class Originals:
    """Copies sent in place of messages, by fingerprint, mapped to the full originals.

    In memory only: after a restart a copy stands for itself (a cut argument or a
    pointer), which still says where the full text is.
    """

    def __init__(self) -> None:
        self._by_fingerprint: dict[str, Message] = {}

    def __len__(self) -> int:
        return len(self._by_fingerprint)

    def remember(self, copy: Message, original: Message) -> None:
        """Record that ``copy`` is sent instead of ``original`` (itself maybe a copy)."""
        source = self._by_fingerprint.get(fingerprint(original), original)
        self._by_fingerprint[fingerprint(copy)] = source

    def original(self, message: Message) -> Message:
        """The original ``message`` stands for (itself when it is not a copy)."""
        if not self._by_fingerprint:
            return message
        return self._by_fingerprint.get(fingerprint(message), message)

    def forget(self, messages: Sequence[Message]) -> None:
        """Drop the records of messages that left the conversation."""
        if self._by_fingerprint:
            for message in messages:
                self._by_fingerprint.pop(fingerprint(message), None)


class MessageShrinker:
    """Shrinks the messages of one session (see the module docstring)."""

    def __init__(
        self,
        kernel: Kernel,
        session_id: str,
        counter: TokenCounter,
        originals: Originals,
        log_path: str,
    ) -> None:
        self.kernel = kernel
        self.session_id = session_id
        self.counter = counter
        self.originals = originals
        self.log_path = log_path

    def fit(
        self, messages: list[Message], first: int, limit: int
    ) -> tuple[list[Message], tuple[str, ...]]:
        """Shrink messages from index ``first`` on until the list costs under ``limit`` tokens.

        Tool results go first, then the other messages, the largest first in each group.
        Returns the list (a new one when anything changed) and the files written.
        """
        total = self.counter.count_messages(messages)
        if total < limit:
            return messages, ()
        out = list(messages)
        counts = [self.counter.count_message(m) for m in out]
        order = sorted(
            range(first, len(out)), key=lambda i: (out[i].get("role") != "tool", -counts[i])
        )
        paths: list[str] = []
        for index in order:
            if total < limit:
                break
            shrunk = self.shrink(out[index], total - limit + 1)
            if shrunk is None:
                continue
            new_count = self.counter.count_message(shrunk[0])
            total += new_count - counts[index]
            out[index], counts[index] = shrunk[0], new_count
            paths.append(shrunk[1])
        return out, tuple(paths)

    def shrink(
        self, message: Message, excess: int, *, preview: int | None = None
    ) -> tuple[Message, str] | None:
        """``message`` with its text in an eviction file and only a head + tail kept.

        Aims to save ``excess`` tokens (``preview`` fixes the characters kept at each
        end instead). Returns the copy and the file's path, or None when the message has
        no plain text or would not get shorter.
        """
        original = self.originals.original(message)
        text = text_of(original)
        if text is None or len(text) < 2 * MASK_MIN_CHARS:
            return None
        kernel = self.kernel
        settings = kernel.settings.eviction
        stored = kernel.hooks.transform_memory_text(text, "eviction")
        call_id = message.get("tool_call_id")
        name = call_id if isinstance(call_id, str) and call_id else f"{message.get('role')}-message"
        path = eviction_path(settings.path, self.session_id, name, stored)
        written = not kernel.workspace.exists(path)
        if written:
            kernel.workspace.write_text(path, stored)  # atomic; a racing writer has the same bytes
        before = self.counter.count_message(message)
        target = max(0, before - excess)
        if preview is None:
            share = int(len(stored) * target / max(1, before)) // 2
            preview = min(settings.preview_chars, share)
        while True:
            content: Any = placeholder(stored, path, max(0, preview))
            if isinstance(message.get("content"), list):
                content = [{"type": "text", "text": content}]
            copy = {**message, "content": content}
            if preview <= 0 or self.counter.count_message(copy) <= target:
                break
            preview //= 2
        if self.counter.count_message(copy) >= before:
            return None
        self.originals.remember(copy, original)
        if message.get("role") == "tool":
            kernel.hooks.tool_result_evicted(
                ToolResultEvictedEvent(
                    session_id=self.session_id,
                    tool_name=str(message.get("name") or ""),
                    call_id=name,
                    path=path,
                    original_chars=len(text),
                    kept_chars=len(text_of(copy) or ""),
                    written=written,
                    stage="compaction",
                )
            )
        return copy, path
