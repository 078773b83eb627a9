"""One listing of a whole workspace, answering every ``list`` and ``scan`` of a block.

A maintenance tick lists half a dozen folders (daily logs, the archive, session logs, the
usage ledger, evicted results, the index's folders); on S3 each is a LIST request. Inside
``Workspace.listing_snapshot()`` the first ``list`` or ``scan`` lists the whole workspace
once (one request per 1,000 files) and the later ones are answered from it. What this
thread writes, moves or deletes meanwhile makes the folders it touched listed afresh; what
other threads and processes write meanwhile is seen at the next listing, as it would be by
a listing made a moment earlier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["Listing"]


class _Listed(Protocol):
    @property
    def path(self) -> str: ...


F = TypeVar("F", bound=_Listed)


class Listing(Generic[F]):
    """The files of a workspace as one listing found them, and the folders written since."""

    def __init__(self, load: Callable[[], list[F]]) -> None:
        self._load = load
        self._files: list[F] | None = None
        self._stale: set[str] = set()

    def touched(self, path: str) -> None:
        """``path`` was written, moved or deleted: its folder is listed afresh from now on."""
        self._stale.add(path.rpartition("/")[0])

    def scan(self, prefix: str, recursive: bool) -> list[F] | None:
        """The files under folder ``prefix`` (relative, no trailing slash), or None when a
        write touched it since (the caller lists it itself)."""
        if any(
            folder == prefix or (recursive and (not prefix or folder.startswith(prefix + "/")))
            for folder in self._stale
        ):
            return None
        if self._files is None:
            self._files = self._load()
        start = f"{prefix}/" if prefix else ""
        found = []
        for info in self._files:
            rest = info.path[len(start) :] if info.path.startswith(start) else None
            if rest and (recursive or "/" not in rest):
                found.append(info)
        return found
