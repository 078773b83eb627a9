"""What this workspace object wrote last, per file: the bytes and version of its own
conditional writes (private).

On S3 an append is a read and a conditional PUT; when this process wrote the file last
(a daily log it flushes into, the audit log, a session log it offloads to), the read gives
back what it already holds. :class:`OwnWrites` keeps those bytes with the version their
write returned, so that the next append can start from them: a conditional PUT
(``If-Match`` that version) without the GET. The record is never trusted on its own: the
PUT is the check, and when another writer changed the file meanwhile it fails and the
append reads the file and tries again (one request more than reading first).

A file that others write too (a daily log several replicas flush into) would make that
first PUT fail again and again, at two requests more each time (the failed PUT and the
HEAD that tells it from a lost answer of its own): once it failed, the file is read first
again for :data:`CONTENDED_FOR` seconds.

Bounded (:data:`PER_FILE` bytes a file, :data:`TOTAL` in all, least recently written
dropped first); any other write to a path through the workspace (replace, create,
delete, move) drops its record.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from harnessmem import encoding
from harnessmem.workspace.files import Snapshot

if TYPE_CHECKING:
    from harnessmem.workspace._listing import Listing
    from harnessmem.workspace.files import FileInfo
    from harnessmem.workspace.store import WorkspaceStore

__all__ = ["CONTENDED_FOR", "PER_FILE", "TOTAL", "OwnReads", "OwnWrites"]

#: Files larger than this are not kept (the next append reads them).
PER_FILE = 256 * 1024
#: The most bytes kept for one workspace.
TOTAL = 1024 * 1024
#: Seconds a file is read before each write again after another writer changed it.
CONTENDED_FOR = 60.0
_CONTENDED_KEPT = 256


class OwnWrites:
    """path -> (bytes written, their version, when): this object's last conditional
    write of each file, while nothing else was written through it since."""

    def __init__(self, per_file: int = PER_FILE, total: int = TOTAL) -> None:
        self.per_file = per_file
        self.total = total
        self._kept: OrderedDict[str, tuple[bytes, str, float]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._contended: OrderedDict[str, float] = OrderedDict()

    def put(self, path: str, data: bytes, version: str, at: float) -> None:
        """Record a conditional write of ``data`` to ``path`` that returned ``version``."""
        with self._lock:
            self._drop(path)
            if len(data) > self.per_file:
                return
            self._kept[path] = (data, version, at)
            self._size += len(data)
            while self._size > self.total:
                _, (old, _, _) = self._kept.popitem(last=False)
                self._size -= len(old)

    def get(self, path: str, now: float | None = None) -> tuple[bytes, str, float] | None:
        """The record of ``path`` (kept), or None; with ``now``, also None while it is
        contended (for a use that nothing checks before the write)."""
        with self._lock:
            if now is not None and self._is_contended(path, now):
                return None
            return self._kept.get(path)

    def take(self, path: str, now: float) -> tuple[bytes, str, float] | None:
        """The record of ``path``, removed (a write is about to replace it), or None (also
        while it is contended)."""
        with self._lock:
            found = self._kept.get(path)
            self._drop(path)
            return None if self._is_contended(path, now) else found

    def contended(self, path: str, now: float) -> None:
        """Another writer changed ``path`` since this process wrote it: read it first for
        a while (see the module doc)."""
        with self._lock:
            self._contended[path] = now + CONTENDED_FOR
            self._contended.move_to_end(path)
            while len(self._contended) > _CONTENDED_KEPT:
                self._contended.popitem(last=False)

    def _is_contended(self, path: str, now: float) -> bool:
        until = self._contended.get(path)
        if until is None:
            return False
        if now < until:
            return True
        del self._contended[path]
        return False

    def drop(self, path: str) -> None:
        """Forget ``path``: it was written by other means, moved or deleted."""
        with self._lock:
            self._drop(path)

    def _drop(self, path: str) -> None:
        old = self._kept.pop(path, None)
        if old is not None:
            self._size -= len(old[0])


class OwnReads:
    """What a :class:`~harnessmem.workspace.Workspace` holds of its own writes and reads,
    and the reads it answers from them."""

    _own: OwnWrites | None
    _store: WorkspaceStore
    _cache: dict[str, tuple[float, bytes | None]]
    _cache_lock: threading.Lock
    _written: dict[str, tuple[bytes, str]]
    _listings: threading.local
    clock: Callable[[], float]

    def _rel(self, path: str | os.PathLike[str], *, allow_root: bool = False) -> str:
        raise NotImplementedError

    def _token(self, version: str) -> str | None:
        raise NotImplementedError

    def read_bytes(self, path: str | os.PathLike[str], *, max_age: float = 0.0) -> bytes:
        raise NotImplementedError

    def info(self, path: str | os.PathLike[str], *, listed: bool = False) -> FileInfo:
        raise NotImplementedError

    @property
    def listing_active(self) -> bool:
        raise NotImplementedError

    def recall(self, path: str | os.PathLike[str], *, max_age: float) -> Snapshot | None:
        """What this object's own last write of ``path`` (an append or update) left there,
        at most ``max_age`` seconds ago, as a snapshot, without a request; None when it
        holds none (a local workspace, another write through it since, too large, not
        clean UTF-8).

        Not checked against the file: another process may have written since. Hand it to
        :meth:`update_text`, whose conditional write checks it (and reads the file when it
        fails), and use its text only where a slightly stale copy does no harm.
        """
        if self._own is None or max_age <= 0:
            return None
        now = self.clock()
        found = self._own.get(self._rel(path), now)
        if found is None or not 0 <= now - found[2] < max_age:
            return None
        text, problem = encoding.decode(found[0])
        if problem is not None:
            return None  # not clean UTF-8 (written whole): read_snapshot keeps the bytes
        return Snapshot(text, found[1], self._token(found[1]))

    def held(self, path: str | os.PathLike[str], token: str | None) -> bytes | None:
        """The content of ``path`` at change token ``token`` (from a listing or
        :meth:`info` just made, which vouches for it) when this object's own last write of
        it is that very version, else None: no request either way."""
        if self._own is None or token is None or not self._store.versions_are_tokens:
            return None
        found = self._own.get(self._rel(path))  # checked by ``token``: contended or not
        return found[0] if found is not None and found[1] == token else None

    def read_at(self, path: str | os.PathLike[str], token: str | None) -> bytes:
        """The content of ``path``, which a listing just found at change token ``token``
        (:meth:`scan`): :meth:`held` when it can, else read now."""
        held = self.held(path, token)
        return held if held is not None else self.read_bytes(path)

    def read_listed(self, path: str | os.PathLike[str]) -> bytes:
        """The content of ``path`` as the listing of this thread's :meth:`listing_snapshot`
        block finds it: missing there, FileNotFoundError without a request; listed at the
        version of this object's own last write of it, those bytes; else read now. For a
        reader to whom that listing is as good as a read (made after the lease that every
        writer of the file holds, or a look that is checked again later). Outside a
        block, :meth:`read_bytes`."""
        if not self.listing_active:
            return self.read_bytes(path)
        info = self.info(path, listed=True)
        return self.read_at(info.path, info.etag_or_hash)

    def _remember(self, rel: str, at: float, data: bytes | None) -> None:
        with self._cache_lock:
            self._cache[rel] = (at, data)

    def _forget(self, rel: str, *, own: bool = True) -> None:
        """Drop what this object holds of ``rel``, about to be written (``own``: also its
        record of its own last write, which an update takes itself instead)."""
        listing: Listing[FileInfo] | None = getattr(self._listings, "current", None)
        if listing is not None:
            listing.touched(rel)
        if own and self._own is not None:
            self._own.drop(rel)
        if self._cache or self._written:
            with self._cache_lock:
                self._cache.pop(rel, None)
                self._written.pop(rel, None)

    def take_written(self, path: str | os.PathLike[str]) -> tuple[bytes, str] | None:
        """What :meth:`update_text` just wrote to ``path``, with its change token, once.

        For an index that follows this process's writes: it gets the bytes without reading
        them back. None when unknown (another write since, or a store whose change token
        needs its own request).
        """
        rel = self._rel(path)
        with self._cache_lock:
            return self._written.pop(rel, None)
