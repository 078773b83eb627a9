"""The workspace: a folder of memory files on any fsspec filesystem.

``Workspace.open`` takes a local path, ``file://``, ``memory://``, ``s3://bucket/prefix``
or any other fsspec URL. Paths are workspace-relative POSIX strings and never leave the
workspace. Every write is all-or-nothing, on a full disk too: locally a temp file, fsync and
rename, and an append that fails is cut back to the file's old size; on object stores one
PUT. Appends are serialised across threads, processes and replicas:

- local: an exclusive ``filelock`` on one of 256 files ``<root>/.locks/files/NNN.lock``
  (picked by a hash of the path, so their number stays bounded), then ``O_APPEND`` +
  fsync. Lock files live under ``.locks/`` (never listed) and stay in place.
- S3: read-modify-write with a conditional PUT (``If-Match`` the ETag read, or
  ``If-None-Match: *`` for a new object), retried with jittered backoff; no read when
  this object wrote the file last (:mod:`harnessmem.workspace._own`). Every S3 request
  is one API call, retried on throttling, 5xx, dropped connections and timeouts (see
  :mod:`harnessmem.workspace._s3store`).
- ``memory://``: the same compare-and-swap, made atomic by an in-process lock (the store
  is in-process too).
- other fsspec stores: under a workspace lease (see below). Their compare-and-swap is a
  check-then-write, so exclusion across processes is only as good as the store's
  exclusive create (``pipe_file(mode="create")``): safe within one process only.

Each of these is a :class:`WorkspaceStore` (:mod:`harnessmem.workspace.store`), found by the
URL's protocol in the entry-point group ``harnessmem.storage``, where a plugin can add one
(a GCS or Azure store with their generation or ETag preconditions).

:meth:`Workspace.update_text` is the general form of an append: read, change, write back
only if nobody wrote in between, else read again and change again (the loop is in
:mod:`harnessmem.workspace._conditional`). Paths are checked by
:mod:`harnessmem.workspace._paths`.

Inside :func:`~harnessmem.workspace.changes.watch_changes` every write is noted with the
content hashes of the file before and after it (what the audit log records).

Leases (:meth:`Workspace.lock`) are JSON objects at ``.locks/<safe name>.lease``; see
:mod:`harnessmem.workspace._leases`. fsspec and s3fs are imported only inside
:meth:`Workspace.open`.
"""

from __future__ import annotations

import builtins
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from harnessmem import encoding
from harnessmem.errors import HarnessMemError, PathNotAllowed, WorkspaceError
from harnessmem.layout import (
    HISTORY_DIR,
    LOCKS_DIR,
    original_path,
)
from harnessmem.workspace._conditional import compare_and_swap
from harnessmem.workspace._faults import hint
from harnessmem.workspace._leasing import Leasing
from harnessmem.workspace._listing import Listings
from harnessmem.workspace._own import OwnReads, OwnWrites
from harnessmem.workspace._paths import confined, relative_path
from harnessmem.workspace.changes import ChangeWatch, current_watch
from harnessmem.workspace.files import FileInfo, Snapshot
from harnessmem.workspace.store import (
    WorkspaceStore,
    store_class,
    url_protocol,
)
from harnessmem.workspace.waiter import REAL_TIME

__all__ = ["ORIGINALS_DIR", "FileInfo", "Snapshot", "Workspace"]

logger = logging.getLogger("harnessmem.workspace")

#: Where the original bytes of a file that was not clean UTF-8 are kept before the first
#: write that replaces them (beside consolidation's previous versions of MEMORY.md).
ORIGINALS_DIR = HISTORY_DIR


class Workspace(Leasing, Listings, OwnReads):
    """A workspace folder on any fsspec filesystem; open one with :meth:`open`.

    Attributes: ``url`` (normalised, no trailing slash), ``protocol``, ``is_local``,
    ``fs`` (the fsspec filesystem), ``root`` (the root path inside ``fs``),
    ``local_root`` (a Path for local workspaces, else None), ``storage_options``,
    ``store`` (the :class:`WorkspaceStore` serving it).
    """

    def __init__(
        self,
        store: WorkspaceStore,
        *,
        protocol: str,
        storage_options: dict[str, Any],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self.store = store
        self.fs = store.fs
        self.root = store.root
        self.url = store.url
        self.protocol = protocol
        self.is_local = store.is_local
        self.local_root = Path(store.root) if self.is_local else None
        self.storage_options = storage_options
        self.clock = clock
        # How lock() waits for a held lease and a lost conditional write backs off
        # (real time; tests set a Waiter of their own).
        self.lease_waiter = REAL_TIME
        # Reads asked for with max_age: path -> (read at, content or None when missing).
        self._cache: dict[str, tuple[float, bytes | None]] = {}
        self._cache_lock = threading.Lock()
        # What update_text last wrote, by path, when its change token is known: an index
        # following the write takes it instead of reading the file back.
        self._written: dict[str, tuple[bytes, str]] = {}
        # This object's last conditional write of each file, to append from without
        # reading it first (remote stores only; see _own). The PUT checks it.
        self._own = None if self.is_local else OwnWrites()
        # Files found not to be clean UTF-8, warned about once each.
        self._damaged: set[str] = set()
        # The listing of a listing_snapshot() block, per thread.
        self._listings = threading.local()

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str],
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] | None = None,
        create: bool = True,
    ) -> Workspace:
        """Open the workspace at ``url``; a local directory is created when missing.

        ``storage_options`` go to the fsspec filesystem (for S3: ``endpoint_url``, ``key``,
        ``secret``, ...). ``clock`` (default ``time.time``) judges lease expiry only.
        ``create=False`` leaves a missing local directory missing (to look before writing).
        The URL's protocol picks the store (:func:`harnessmem.workspace.store.store_class`);
        one that neither a store nor fsspec knows raises a WorkspaceError listing the stores.
        """
        text = os.fspath(url)
        options = dict(storage_options or {})
        try:
            store = store_class(text).open(text, options, create=create)
        except HarnessMemError:
            raise
        except Exception as exc:
            raise WorkspaceError(
                f"open workspace {text!r} failed: {type(exc).__name__}: {exc}",
                hint=hint(exc)
                or "check the URL and storage_options; s3:// needs s3fs "
                "(pip install 'harnessmem[s3]')",
            ) from exc
        return cls(
            store,
            protocol=url_protocol(store.url),
            storage_options=store.storage_options,
            clock=clock or time.time,
        )

    def __repr__(self) -> str:
        return f"Workspace({self.url!r})"

    # Paths.
    def _rel(self, path: str | os.PathLike[str], *, allow_root: bool = False) -> str:
        return relative_path(path, self.url, allow_root=allow_root)

    def _full(self, rel: str) -> str:
        full = self._store.join(rel)
        if self.is_local and not confined(rel, full, self.root):
            raise PathNotAllowed(
                f"path {rel!r} is not allowed in workspace {self.url}: "
                "a symlink on it leads outside the workspace",
                hint="replace the symlink with the file itself",
            )
        return full

    def resolve(self, path: str | os.PathLike[str]) -> str:
        """The full path inside ``fs`` of workspace-relative ``path``; PathNotAllowed if outside."""
        return self._full(self._rel(path))

    def local_path(self, path: str | os.PathLike[str]) -> Path | None:
        """``path`` as a local Path, or None when the workspace is not local."""
        return Path(self.resolve(path)) if self.is_local else None

    # Files.
    def read_bytes(self, path: str | os.PathLike[str], *, max_age: float = 0.0) -> bytes:
        """The content of ``path``; FileNotFoundError when it does not exist.

        ``max_age`` > 0 accepts a copy this workspace object read, or wrote, at most that
        many seconds ago (by its clock), saving a request on remote stores; writes through
        this object drop a copy read. Other processes' writes show after at most
        ``max_age``.
        """
        rel = self._rel(path)
        if max_age > 0:
            with self._cache_lock:
                hit = self._cache.get(rel)
            now = self.clock()
            if hit is not None and 0 <= now - hit[0] < max_age:
                if hit[1] is None:
                    raise FileNotFoundError(errno.ENOENT, f"no such file in {self.url}", rel)
                return hit[1]
            own = self._own.get(rel, now) if self._own is not None else None
            if own is not None and 0 <= now - own[2] < max_age:
                return own[0]
        at = self.clock()
        try:
            data = self._store.read(self._full(rel))
        except FileNotFoundError:
            if max_age > 0:
                self._remember(rel, at, None)
            raise
        if max_age > 0:
            self._remember(rel, at, data)
        return data

    def read_text(self, path: str | os.PathLike[str], *, max_age: float = 0.0) -> str:
        """The content of ``path`` decoded as UTF-8 (``max_age``: see :meth:`read_bytes`).

        Tolerant: a file with a byte-order mark is read in the encoding it names (UTF-16,
        UTF-32), other bytes that are not UTF-8 each read as U+FFFD, and the path is
        logged once as a warning. The bytes stay as they are; the first write through
        :meth:`update_text` that replaces them keeps them in :data:`ORIGINALS_DIR`.
        """
        return self._decode(self._rel(path), self.read_bytes(path, max_age=max_age))[0]

    def decode_text(self, path: str | os.PathLike[str], data: bytes) -> str:
        """Bytes read from ``path`` (whole, or a :meth:`read_range` of it) as :meth:`read_text`
        decodes them, with its one warning per path."""
        return self._decode(self._rel(path), data)[0]

    def _decode(self, rel: str, data: bytes) -> tuple[str, bool]:
        """The text of ``data`` read from ``rel``, and whether the bytes were clean UTF-8."""
        text, problem = encoding.decode(data)
        if problem is None:
            return text, True
        if rel not in self._damaged:
            self._damaged.add(rel)
            logger.warning(
                "%s in %s is %s; it is read anyway (the file is left as it is)",
                rel,
                self.url,
                problem,
            )
        return text, False

    def read_range(self, path: str | os.PathLike[str], start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of ``path``; fewer at the end of the file.

        One bounded read (a ranged GET on S3): for files too large to read whole.
        """
        if not 0 <= start <= end:
            raise ValueError(f"read_range needs 0 <= start <= end, got {start}, {end}")
        if start == end:
            return b""
        return self._store.read_range(self._full(self._rel(path)), start, end)

    # What a change watch needs (see harnessmem.workspace.changes).
    @staticmethod
    def _watching(rel: str, kind: str) -> ChangeWatch | None:
        watch = current_watch()
        if watch is None or not watch.wants(rel, kind):
            return None
        return watch

    def _bytes_of(self, rel: str) -> bytes | None:
        try:
            return self._store.read(self._full(rel))
        except FileNotFoundError:
            return None

    def _hash_of(self, rel: str) -> str | None:
        data = self._bytes_of(rel)
        return None if data is None else encoding.content_hash(data)

    def read_snapshot(self, path: str | os.PathLike[str]) -> Snapshot:
        """The text of ``path`` and its version, from one read (``version`` None: missing).

        Hand it to :meth:`update_text` to write back only if nobody changed it since.
        """
        rel = self._rel(path)
        current = self._store.read_versioned(self._full(rel))
        if current is None:
            return Snapshot("", None)
        text, clean = self._decode(rel, current[0])
        original = None if clean else current[0]
        return Snapshot(text, current[1], self._token(current[1]), original)

    def _token(self, version: str) -> str | None:
        # On S3 the version is the ETag, which is also the change token listings give.
        return version if self._store.versions_are_tokens else None

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Replace ``path`` with ``data`` atomically: readers see the old or the new content."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"write_bytes needs bytes, got {type(data).__name__}")
        rel = self._rel(path)
        self._forget(rel)
        watch = self._watching(rel, "write")
        before = self._hash_of(rel) if watch is not None else None
        version = self._store.write(self._full(rel), bytes(data))
        self._note_write(rel, len(data), version)
        if self._own is not None and version is not None:
            self._own.put(rel, bytes(data), version, self.clock())
        if watch is not None:
            watch.note(rel, before, encoding.content_hash(bytes(data)))

    def write_text(self, path: str | os.PathLike[str], text: str) -> None:
        """Replace ``path`` with ``text`` (UTF-8) atomically.

        Every ``*_text`` write stores what UTF-8 can hold: a lone surrogate (a file name
        read with ``surrogateescape``, a JSON ``\\ud800`` escape) becomes U+FFFD, a
        surrogate pair the character it encodes; the rest is kept as it is.
        """
        if not isinstance(text, str):
            raise TypeError(f"write_text needs str, got {type(text).__name__}")
        self.write_bytes(path, encoding.encode(text))

    def append_text(self, path: str | os.PathLike[str], text: str) -> None:
        """Append ``text`` (UTF-8) to ``path``, creating it; concurrent appends are all kept.

        A ``write_*`` of the same file racing with an append may replace it; writers that
        rewrite an appended file hold a lease for it.
        """
        if not isinstance(text, str):
            raise TypeError(f"append_text needs str, got {type(text).__name__}")
        rel = self._rel(path)
        full, data = self._full(rel), encoding.encode(text)
        store = self._store
        self._forget(rel, own=False)
        if store.native_append:
            watch = self._watching(rel, "append")
            held = self._bytes_of(rel) if watch is not None else None
            store.append(full, data)
            if watch is not None:
                before = None if held is None else encoding.content_hash(held)
                watch.note(rel, before, encoding.content_hash((held or b"") + data))
            return
        self._update(rel, lambda current: current + data, None, "append", append=True)

    def create_text(self, path: str | os.PathLike[str], text: str) -> bool:
        """Write ``path`` only if it does not exist yet; False when it exists.

        One step against other writers (``If-None-Match: *`` on S3, a file lock locally):
        of several processes creating one file at once, exactly one gets True. (False also
        when an earlier attempt of this very call created it and its answer was lost.)
        """
        if not isinstance(text, str):
            raise TypeError(f"create_text needs str, got {type(text).__name__}")
        rel = self._rel(path)
        self._forget(rel)
        store, full, data = self._store, self._full(rel), encoding.encode(text)
        with store.thread_lock(full):
            if store.conditional:
                version = store.put_if(full, data, None)
            else:
                with self.lock(f"append:{rel}", ttl=60.0, timeout=60.0):
                    version = store.put_if(full, data, None)
        created = version is not None
        if created:
            self._note_write(rel, len(data), version)
        watch = self._watching(rel, "create") if created else None
        if watch is not None:
            watch.note(rel, None, encoding.content_hash(data))
        return created

    def update_text(
        self,
        path: str | os.PathLike[str],
        change: Callable[[str], str | None],
        *,
        current: Snapshot | None = None,
        append: bool = False,
    ) -> Snapshot | None:
        """Replace ``path`` with ``change(its text)`` as one step against other writers.

        ``change`` gets the current text ("" for a missing file) and returns the new text,
        or None to leave the file alone. When another writer changed the file between the
        read and the write, it is read again and ``change`` called again, so ``change``
        may run more than once and must depend only on the text it gets (it may record
        what it decided). ``current`` is a :meth:`read_snapshot` taken earlier: the first
        attempt starts from it instead of reading again. Returns the snapshot written, or
        None when ``change`` returned None. The write is atomic (a conditional PUT on S3,
        temp + rename under a file lock locally). ``append`` promises that ``change`` only
        adds text at the end: a local file then grows in place (``O_APPEND``, as
        :meth:`append_text` writes) instead of being replaced.

        A file that is not clean UTF-8 reaches ``change`` as :meth:`read_text` reads it;
        before the first write replaces its bytes they are copied to
        :data:`ORIGINALS_DIR` (the file is UTF-8 from then on).
        """
        rel = self._rel(path)
        self._forget(rel, own=False)
        base = None
        if current is not None:
            stored = current.original
            base = (encoding.encode(current.text) if stored is None else stored, current.version)
        kept: list[bytes] = []

        def encoded(data: bytes) -> bytes | None:
            text, clean = self._decode(rel, data)
            new = change(text)
            if new is None:
                return None
            if not clean and data not in kept:
                self._keep_original(rel, data)
                kept.append(data)
            return encoding.encode(new)

        written = self._update(rel, encoded, base, "update", append=append)
        if written is None:
            return None
        snapshot = Snapshot(written[0].decode("utf-8"), written[1], self._token(written[1]))
        if snapshot.token is not None:
            with self._cache_lock:
                if len(self._written) >= 64:
                    self._written.clear()
                self._written[rel] = (written[0], snapshot.token)
        return snapshot

    def _keep_original(self, rel: str, data: bytes) -> str:
        """Copy bytes of ``rel`` that are about to be replaced to :data:`ORIGINALS_DIR`."""
        target = original_path(rel, self.clock(), data)
        self._store.write(self._full(target), data)
        logger.warning(
            "%s in %s was not clean UTF-8; its original bytes are kept in %s before it is "
            "rewritten as UTF-8",
            rel,
            self.url,
            target,
        )
        return target

    def _update(
        self,
        rel: str,
        change: Callable[[bytes], bytes | None],
        base: tuple[bytes, str | None] | None,
        what: str,
        *,
        append: bool = False,
    ) -> tuple[bytes, str] | None:
        store, full = self._store, self._full(rel)
        # Threads of this process take turns first, so that their conditional writes only
        # compete with other processes instead of wasting requests on each other.
        # A store without conditional writes takes the append lease around the swap.
        with store.thread_lock(full), ExitStack() as held:
            if not store.conditional:
                held.enter_context(self.lock(f"append:{rel}", ttl=60.0, timeout=60.0))
            own = self._own.take(rel, self.clock()) if self._own is not None else None
            if base is None and own is not None:
                base = own[0], own[1]
            recalled = own is not None and base is not None and base[1] == own[1]
            written = compare_and_swap(
                store,
                full,
                change,
                base,
                what,
                append=append,
                url=self.url,
                sleep=self.lease_waiter.sleep,
                # Nobody vouches for what this process wrote last but the PUT itself.
                recalled=recalled,
            )
            if self._own is not None and written is not None:
                if own is not None and recalled and written[2] != own[0]:
                    self._own.contended(rel, self.clock())  # someone else wrote it since
                self._own.put(rel, written[0], written[1], self.clock())
        if written is None:
            return None
        self._note_write(rel, len(written[0]), written[1])
        watch = self._watching(rel, what)
        if watch is not None:
            replaced = written[2]
            before = None if replaced is None else encoding.content_hash(replaced)
            watch.note(rel, before, encoding.content_hash(written[0]))
        return written[0], written[1]

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is an existing file."""
        return self._store.exists(self.resolve(path))

    def info(self, path: str | os.PathLike[str], *, listed: bool = False) -> FileInfo:
        """Size, modification time and change token of ``path``; FileNotFoundError if missing.

        ``listed``: inside a :meth:`listing_snapshot` block, what its listing says (no
        request), for a caller to whom a listing made a moment earlier is as good."""
        rel = self._rel(path)
        if listed:
            folder = rel.rpartition("/")[0]
            found = self._listed(folder, False)
            if found is not None:
                for info in found:
                    if info.path == rel:
                        return info
                raise FileNotFoundError(rel)
        size, modified, tag = self._store.info(self._full(rel))
        return FileInfo(rel, size, modified, tag)

    def delete(self, path: str | os.PathLike[str], missing_ok: bool = True) -> None:
        """Delete ``path``; FileNotFoundError when it is missing and not ``missing_ok``."""
        rel = self._rel(path)
        self._forget(rel)
        watch = self._watching(rel, "delete")
        before = self._hash_of(rel) if watch is not None else None
        self._store.delete(self._full(rel), missing_ok=missing_ok)
        self._note_write(rel, None)
        if watch is not None and before is not None:
            watch.note(rel, before, None)

    def move(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Move ``src`` to ``dst``, replacing it: rename locally, copy + delete on object stores."""
        source, target = self._rel(src), self._rel(dst)
        self._forget(source)
        self._forget(target)
        watch = self._watching(source, "move")
        if watch is None:
            self._store.move(self._full(source), self._full(target))
            return
        moved, replaced = self._hash_of(source), self._hash_of(target)
        self._store.move(self._full(source), self._full(target))
        watch.note(source, moved, None)
        watch.note(target, replaced, moved)

    def make_folder(self, path: str | os.PathLike[str]) -> None:
        """Create the empty folder ``path`` (an existing one is kept): a directory locally,
        a zero-byte ``path/`` marker object on S3. ``harnessmem init`` makes ``memory/``
        so that a workspace no command has written to yet is seen as one."""
        self._store.make_folder(self._full(self._rel(path)))

    def list(self, prefix: str = "", *, recursive: bool = True) -> list[str]:
        """Sorted workspace-relative paths of the files under directory ``prefix``.

        Files only (no directories, no directory marker objects, nothing in ``.locks/``);
        a missing directory gives an empty list.
        """
        rel = self._rel(prefix, allow_root=True)
        listed = self._listed(rel, recursive)
        if listed is not None:
            return [info.path for info in listed]
        found = self._store.find(self._full(rel), recursive)
        return sorted({p for p in found if p.split("/", 1)[0] != LOCKS_DIR})

    def scan(self, prefix: str = "", *, recursive: bool = True) -> builtins.list[FileInfo]:
        """:meth:`list` with each file's :meth:`info`, from one listing where the store allows.

        On S3 a listing carries size, modification time and ETag (one request per 1,000
        files instead of one per file); locally it is a stat per file.
        """
        rel = self._rel(prefix, allow_root=True)
        listed = self._listed(rel, recursive)
        return listed if listed is not None else self._scan_store(rel, recursive)

    def check_reachable(self) -> None:
        """Fail early, with a hint, when an object-store workspace's bucket cannot be reached.

        fsspec opens a remote filesystem without a request, and a missing bucket reads like an
        empty workspace; a command would then report "nothing found" instead of the problem.
        """
        bucket = self.root.split("/", 1)[0]
        try:
            self._store.check_reachable()
        except FileNotFoundError as exc:
            raise WorkspaceError(
                f"workspace {self.url}: bucket {bucket!r} does not exist",
                hint="create the bucket first, or fix the bucket name in the workspace URL",
            ) from exc
        except Exception as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise WorkspaceError(
                f"workspace {self.url} is not reachable: {type(exc).__name__}: {detail}",
                hint=hint(exc)
                or "check workspace.url and workspace.storage_options (endpoint_url, credentials)",
            ) from exc
