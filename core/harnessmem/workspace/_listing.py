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

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from harnessmem.workspace.files import FileInfo

__all__ = ["Listing", "Listings"]


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


class Listings:
    """The :meth:`listing_snapshot` blocks of a workspace, one per thread."""

    _listings: threading.local

    def _scan_store(self, rel: str, recursive: bool) -> list[FileInfo]:
        raise NotImplementedError

    @contextmanager
    def listing_snapshot(self) -> Iterator[None]:
        """Within the block, this thread's :meth:`list` and :meth:`scan` are answered from
        one listing of the whole workspace (made at the first of them), except for the
        folders this thread writes to meanwhile. A maintenance tick runs in one: on S3
        its steps cost one LIST instead of one each. Blocks do not nest."""
        if getattr(self._listings, "current", None) is not None:
            yield
            return
        self._listings.current = Listing(lambda: self._scan_store("", recursive=True))
        try:
            yield
        finally:
            self._listings.current = None

    def _listed(self, rel: str, recursive: bool) -> list[FileInfo] | None:
        listing: Listing[FileInfo] | None = getattr(self._listings, "current", None)
        return None if listing is None else listing.scan(rel.strip("/"), recursive)

    @property
    def listing_active(self) -> bool:
        """Whether this thread is inside a :meth:`listing_snapshot` block."""
        return getattr(self._listings, "current", None) is not None
