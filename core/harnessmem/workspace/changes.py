"""Which workspace files one operation changed, with their content hashes before and after.

``with watch_changes() as watch:`` collects every write the :class:`Workspace` makes in this
context (this thread, or a task or thread that copied the context) as a :class:`FileChange`
per path: the hash of the bytes it held before the operation's first write and after its
last. The audit log (:mod:`harnessmem.audit`) records them. Outside a watch the workspace
notes nothing and reads nothing extra; inside one, a write that does not read the file
anyway (a plain replace, a delete, a move, a local append) reads it first to hash what it
held. A ``wanted`` predicate leaves paths out (the audit log's own appends, the usage
ledger's): those cost no read either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ChangeWatch", "FileChange", "current_watch", "watch_changes"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file an operation changed: ``before`` / ``after`` are content hashes
    (:func:`harnessmem.encoding.content_hash`), None where the file did not exist."""

    path: str
    before: str | None
    after: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {"path": self.path, "before": self.before, "after": self.after}


class ChangeWatch:
    """The changes noted so far, by path, in the order first touched; thread-safe."""

    def __init__(self, wanted: Callable[[str, str], bool] | None = None) -> None:
        self._wanted = wanted
        self._lock = threading.Lock()
        self._changes: dict[str, FileChange] = {}

    def wants(self, path: str, kind: str) -> bool:
        """Whether a write of ``kind`` (``update``, ``write``, ``append``, ``create``,
        ``delete``, ``move``) to ``path`` is noted."""
        return self._wanted is None or self._wanted(path, kind)

    def note(self, path: str, before: str | None, after: str | None) -> None:
        """``path`` went from ``before`` to ``after``: the first before and the last after
        of a path are kept."""
        with self._lock:
            known = self._changes.get(path)
            self._changes[path] = FileChange(path, known.before if known else before, after)

    @property
    def changes(self) -> list[FileChange]:
        """The files whose content differs from what they held before (a file written
        back with the same bytes, or made and removed again, is left out)."""
        with self._lock:
            return [c for c in self._changes.values() if c.before != c.after]


_WATCH: ContextVar[ChangeWatch | None] = ContextVar("harnessmem_change_watch", default=None)


def current_watch() -> ChangeWatch | None:
    """The watch of this context, None outside one (what the workspace asks per write)."""
    return _WATCH.get()


@contextmanager
def watch_changes(wanted: Callable[[str, str], bool] | None = None) -> Iterator[ChangeWatch]:
    """Note the workspace's writes in this context until the block ends."""
    watch = ChangeWatch(wanted)
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)
