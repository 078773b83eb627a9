"""One listing of a whole workspace, answering every ``list`` and ``scan`` of a block.

A maintenance tick lists half a dozen folders (daily logs, the archive, session logs, the
usage ledger, evicted results, the index's folders); on S3 each is a LIST request. Inside
``Workspace.listing_snapshot()`` the first ``list`` or ``scan`` lists the whole workspace
once (one request per 1,000 files) and the later ones are answered from it. What this
thread writes or deletes meanwhile is added to it when the write tells what it left (the
size and, on S3, the ETag: a conditional or plain PUT answers with it); a write whose
outcome is not known so (a failed one, a move) makes its folder listed afresh. What other
threads and processes write meanwhile is seen at the next listing, as it would be by a
listing made a moment earlier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from harnessmem.layout import LOCKS_DIR
from harnessmem.workspace.files import FileInfo

if TYPE_CHECKING:
    from harnessmem.workspace.store import WorkspaceStore

__all__ = ["Listing", "Listings"]


class _Listed(Protocol):
    @property
    def path(self) -> str: ...


F = TypeVar("F", bound=_Listed)


class Listing(Generic[F]):
    """The files of a workspace as one listing found them, and what was written since."""

    def __init__(self, load: Callable[[], list[F]]) -> None:
        self._load = load
        self._files: list[F] | None = None
        # Paths about to be written, or written with an unknown outcome: their folders are
        # listed afresh. And the paths written since with what they hold (None: deleted).
        self._unknown: set[str] = set()
        self._stale: set[str] = set()
        self._wrote: dict[str, F | None] = {}

    def touched(self, path: str) -> None:
        """``path`` is about to be written, moved or deleted: its folder is listed afresh,
        unless :meth:`wrote` says next what the write left."""
        self._unknown.add(path)
        self._stale.add(path.rpartition("/")[0])

    def wrote(self, path: str, info: F | None) -> None:
        """``path`` was just written and holds what ``info`` says (None: deleted)."""
        self._unknown.discard(path)
        self._stale = {p.rpartition("/")[0] for p in self._unknown}
        self._wrote[path] = info

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
            self._wrote.clear()  # the listing has them (or newer)
        files: dict[str, F | None] = {info.path: info for info in self._files}
        files.update(self._wrote)
        start = f"{prefix}/" if prefix else ""
        found = []
        for path, info in sorted(files.items()):
            rest = path[len(start) :] if path.startswith(start) else None
            if info is not None and rest and (recursive or "/" not in rest):
                found.append(info)
        return found


class Listings:
    """The :meth:`listing_snapshot` blocks of a workspace, one per thread."""

    _listings: threading.local
    _store: WorkspaceStore
    clock: Callable[[], float]

    def _note_write(self, rel: str, size: int | None, version: str | None = None) -> None:
        """Tell this thread's listing (if any) what a write just left at ``rel``: ``size``
        bytes at ``version`` (a change token only where versions are tokens: else the
        folder is listed afresh), or nothing (``size`` None: deleted)."""
        listing: Listing[FileInfo] | None = getattr(self._listings, "current", None)
        if listing is None:
            return
        if size is None:
            listing.wrote(rel, None)
        elif version is not None and self._store.versions_are_tokens:
            listing.wrote(rel, FileInfo(rel, size, self.clock(), version))

    def _rel(self, path: str, *, allow_root: bool = False) -> str:
        raise NotImplementedError

    def _full(self, rel: str) -> str:
        raise NotImplementedError

    def scan_folders(self, prefix: str = "") -> tuple[list[FileInfo], set[str] | None]:
        """:meth:`scan` of the files right under ``prefix``, and the names of the folders
        there that hold files, or None when that would cost another request (a local
        folder, most fsspec stores). On S3 one listing gives both; so does the listing
        of a :meth:`listing_snapshot` block."""
        rel = self._rel(prefix, allow_root=True)
        start = f"{rel}/" if rel else ""
        listed = self._listed(rel, recursive=True)
        if listed is not None:
            below = [info.path[len(start) :] for info in listed]
            files = [info for info, rest in zip(listed, below, strict=True) if "/" not in rest]
            return files, {rest.split("/", 1)[0] for rest in below if "/" in rest}
        found, folders = self._store.scan_folders(self._full(rel))
        infos = sorted(
            (FileInfo(path, size, modified, tag) for path, size, modified, tag in found),
            key=lambda info: info.path,
        )
        if folders is not None and not rel:
            folders.discard(LOCKS_DIR)
        return infos, folders

    def _scan_store(self, rel: str, recursive: bool) -> list[FileInfo]:
        found = self._store.scan(self._full(rel), recursive)
        return sorted(
            (
                FileInfo(path, size, modified, tag)
                for path, size, modified, tag in found
                if path.split("/", 1)[0] != LOCKS_DIR
            ),
            key=lambda info: info.path,
        )

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
