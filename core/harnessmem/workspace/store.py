"""The storage contract under a workspace: :class:`WorkspaceStore`, and how a store is found.

A store carries out the few primitives :class:`harnessmem.workspace.Workspace` is built
on (read, atomic replace, conditional write and delete, list, delete, move) on one kind
of storage. The workspace adds everything else on top: path confinement, text encoding,
appends and read-modify-writes as compare-and-swap loops, leases, caching.

Stores are found through the entry-point group ``harnessmem.storage``. Each entry point's
name is a protocol (the scheme of a workspace URL), its value a :class:`WorkspaceStore`
subclass that lists that protocol in ``protocols``; a store with several protocols has an
entry point for each. harnessmem registers its own stores there like any plugin would:

====================  ===========================================  ====================
protocols             store                                        across processes
====================  ===========================================  ====================
``file``, ``local``   :class:`~harnessmem.workspace.LocalStore`    yes (file locks)
``s3``, ``s3a``       :class:`~harnessmem.workspace.S3Store`       yes (conditional PUT)
``memory``            :class:`MemoryStore`                         in-process storage
====================  ===========================================  ====================

A protocol that no store claims but fsspec knows (``gcs``, ``az``, ``sftp``, ...) gets
:class:`FsspecStore`, the generic store, with a warning: its compare-and-swap is a check
then a write, so its guarantees hold within one process only. A protocol neither knows is
a :class:`~harnessmem.errors.WorkspaceError` that lists the installed stores.

Writing a store: subclass :class:`WorkspaceStore` (or a store close to yours), implement
:meth:`~WorkspaceStore.put_if` and :meth:`~WorkspaceStore.delete_if` with the storage's own
preconditions (a GCS generation, an Azure ETag), set ``protocols`` and the class flags,
register it under ``harnessmem.storage`` and run
:class:`harnessmem.testing.WorkspaceSuite` against it.
"""

from __future__ import annotations

import difflib
import errno
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Self

from harnessmem.encoding import content_hash
from harnessmem.errors import HarnessMemError, WorkspaceError
from harnessmem.layout import LOCKS_DIR
from harnessmem.workspace._faults import error_code, hint

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

    from harnessmem.plugins import BackendRegistry

__all__ = [
    "LOCKS",
    "FsspecStore",
    "MemoryStore",
    "WorkspaceStore",
    "content_hash",
    "installed_stores",
    "store_class",
    "store_registry",
    "url_protocol",
]

logger = logging.getLogger("harnessmem.workspace")

#: The folder of a workspace's locks and leases; the workspace never lists it.
LOCKS = LOCKS_DIR
# memory:// lives in this process, so one process-wide lock makes its compare-and-swap atomic.
_PROCESS_LOCK = threading.Lock()


class WorkspaceStore(ABC):
    """The storage primitives of a workspace; subclass it to add a kind of storage.

    A store works on *full paths*: paths inside its fsspec filesystem ``fs``, under
    ``root`` (:meth:`join` makes one from a workspace-relative path). The workspace checks
    and normalises every path before a store sees it.

    **Must implement:** :meth:`put_if` and :meth:`delete_if`, the compare-and-swap that
    appends, creates, read-modify-writes and leases are built on. Everything else has a
    default over fsspec that a subclass may replace with fewer or stronger requests:
    :meth:`read_versioned` (its versions must be the ones :meth:`put_if` checks),
    :meth:`write` (must be atomic), :meth:`scan`, :meth:`open` (when fsspec does not know
    the protocol, or the store sets defaults of its own), :meth:`name_problem` (the
    storage's limits on names) and the others.

    **Errors:** run each request inside :meth:`op`: a missing file stays
    ``FileNotFoundError``, anything else becomes a ``WorkspaceError`` naming the operation,
    the path and the workspace, with a hint.

    The class flags below say what the workspace may rely on: set them truthfully, and
    :class:`harnessmem.testing.WorkspaceSuite` checks the claims.
    """

    #: The protocols (URL schemes) this store serves; its entry points are named after them.
    protocols: ClassVar[tuple[str, ...]] = ()
    #: Whether :meth:`put_if` and :meth:`delete_if` are atomic against every other writer.
    #: When False the workspace serialises its compare-and-swaps under a lease, which is
    #: itself only as exclusive as ``put_if(..., None)``.
    conditional: bool = False
    #: Whether the guarantees hold across processes and replicas sharing the workspace
    #: (True), or only among the threads of one process (the generic :class:`FsspecStore`).
    cross_process: ClassVar[bool] = False
    #: Whether files are on this machine's disk at ``os`` paths: the workspace then refuses
    #: symlinks that lead outside the root and offers ``Workspace.local_path``.
    is_local: ClassVar[bool] = False
    #: Whether :meth:`append` adds bytes in place, atomically against other appenders;
    #: when False the workspace appends by compare-and-swap.
    native_append: ClassVar[bool] = False
    #: Whether the versions of :meth:`read_versioned` and :meth:`put_if` are also the change
    #: tokens :meth:`info` and :meth:`scan` give (S3's ETag): an index following this
    #: process's writes then needs no request to learn them.
    versions_are_tokens: ClassVar[bool] = False

    def __init__(
        self,
        fs: AbstractFileSystem,
        root: str,
        url: str,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.fs = fs
        self.root = root
        self.url = url
        #: The options the filesystem was made with (a second instance is opened with them).
        self.storage_options = dict(storage_options or {})
        self._thread_locks: dict[str, threading.Lock] = {}
        self._thread_locks_guard = threading.Lock()

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any], *, create: bool = True) -> Self:
        """The store for workspace ``url``: its filesystem (``fsspec.url_to_fs``) and root.

        ``create`` asks for a missing local folder to be made; object stores need nothing.
        Raise ``ValueError`` for a URL this store cannot serve.
        """
        import fsspec

        fs, path = fsspec.core.url_to_fs(url, **storage_options)
        root = str(path).rstrip("/")
        if not root.strip("/"):
            raise ValueError("the URL names no bucket or folder")
        return cls(fs, root, fs.unstrip_protocol(root).rstrip("/"), storage_options)

    def check_reachable(self) -> None:
        """Raise when the storage cannot be reached (fsspec opens without a request)."""
        self.fs.ls(self.root.split("/", 1)[0], detail=False)

    def thread_lock(self, full: str) -> threading.Lock:
        """A lock for ``full`` shared by the threads using this store (one per path)."""
        with self._thread_locks_guard:
            return self._thread_locks.setdefault(full, threading.Lock())

    def join(self, rel: str) -> str:
        """The full path of workspace-relative ``rel`` ("" is the root)."""
        return f"{self.root}/{rel}" if rel else self.root

    def name_problem(self, full: str) -> str | None:
        """Why this storage cannot hold a file at ``full`` (a name longer than it takes),
        or None. A batch of writes (an import) asks first, so that it is refused before
        anything is written rather than failing half-way; the default knows no limit."""
        return None

    def rel(self, full: str) -> str:
        """The workspace-relative path of ``full``, as listings and error messages give it."""
        if full == self.root:
            return "."
        return full[len(self.root) + 1 :] if full.startswith(self.root + "/") else full

    @contextmanager
    def op(self, op: str, full: str) -> Iterator[None]:
        """Translate storage errors of operation ``op`` on ``full`` (see the class doc)."""
        try:
            yield
        except HarnessMemError:
            raise
        except Exception as exc:
            # s3fs reports a missing bucket as FileNotFoundError too; that one is no
            # missing file but a workspace that cannot work.
            if isinstance(exc, FileNotFoundError) and error_code(exc) != "NoSuchBucket":
                raise FileNotFoundError(
                    errno.ENOENT, f"no such file in workspace {self.url}", self.rel(full)
                ) from exc
            raise WorkspaceError(
                f"{op} {self.rel(full)!r} in {self.url} failed: {type(exc).__name__}: {exc}",
                hint=hint(exc),
            ) from exc

    # Plain operations.
    def read(self, full: str) -> bytes:
        """The content of ``full``; FileNotFoundError when missing."""
        with self.op("read", full):
            return bytes(self.fs.cat_file(full))

    def read_range(self, full: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of ``full``; fewer at the end of the file."""
        with self.op("read", full):
            return bytes(self.fs.cat_file(full, start=start, end=end))

    def write(self, full: str, data: bytes) -> str | None:
        """Replace ``full`` with ``data`` atomically (readers see the old or the new bytes),
        creating parent folders. One PUT on object stores; a temp file and rename on disks.
        Returns the new version when the storage answers with it (S3's ETag), else None."""
        with self.op("write", full):
            self.fs.pipe_file(full, data)
            self.fs.invalidate_cache(full)
        return None

    def append(self, full: str, data: bytes) -> None:
        """Add ``data`` at the end of ``full`` (created when missing), atomically against
        other appenders and all or nothing (a failed append leaves the file as it was);
        only when ``native_append`` is True."""
        raise NotImplementedError(f"{type(self).__name__} has no native append")

    def exists(self, full: str) -> bool:
        """Whether ``full`` is an existing file."""
        with self.op("exists", full):
            self.fs.invalidate_cache(full)
            return bool(self.fs.isfile(full))

    def info(self, full: str) -> tuple[int, float | None, str]:
        """``(size, modified or None, change token)``; the token changes with the content."""
        with self.op("info", full):
            self.fs.invalidate_cache(full)
            meta = self.fs.info(full)
            if meta.get("type") != "file":
                raise FileNotFoundError(full)
            try:
                modified: float | None = self.fs.modified(full).timestamp()
            except (NotImplementedError, AttributeError, OSError):
                modified = None
            tag = next((meta[k] for k in ("ETag", "etag", "md5", "checksum") if k in meta), None)
            tag = str(tag).strip('"') if tag else content_hash(bytes(self.fs.cat_file(full)))
            return int(meta["size"]), modified, tag

    def delete(self, full: str, *, missing_ok: bool = False) -> None:
        """Delete ``full``; FileNotFoundError when missing unless ``missing_ok``."""
        with self.op("delete", full):
            if not self.fs.isfile(full):
                if missing_ok:
                    return
                raise FileNotFoundError(full)
            self.fs.rm_file(full)
            self.fs.invalidate_cache(full)

    def move(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, replacing it; a crash may leave both, never neither."""
        with self.op("move", src):
            if not self.fs.isfile(src):
                raise FileNotFoundError(src)
            self.fs.copy(src, dst)
            self.fs.rm_file(src)
            self.fs.invalidate_cache(src)
            self.fs.invalidate_cache(dst)

    def make_folder(self, full: str) -> None:
        """An empty folder at ``full`` that a listing of its parent shows (kept if there)."""
        with self.op("create folder", full):
            self.fs.makedirs(full, exist_ok=True)
            self.fs.invalidate_cache(full)

    def find(self, directory: str, recursive: bool) -> list[str]:
        """Relative paths of the files under ``directory`` (a missing one has none)."""
        return [path for path, *_ in self.scan(directory, recursive)]

    def scan(self, directory: str, recursive: bool) -> Iterator[tuple[str, int, float | None, str]]:
        """``(rel path, size, modified, change token)`` of the files under ``directory``.

        Files only: no folders, no directory marker objects, no temp files. From one
        listing with details where the store gives a checksum or ETag in it; otherwise the
        token is a content hash (one read per file).
        """
        with self.op("list", directory):
            self.fs.invalidate_cache(directory)
            found = self.fs.find(directory, maxdepth=None if recursive else 1, detail=True)
        for name, meta in sorted(found.items()):
            # Directory marker objects ("a/") and look-alike siblings ("memory2/") are not
            # files under the directory.
            if (
                meta.get("type") != "file"
                or name.endswith("/")
                or not name.startswith(directory.rstrip("/") + "/")
            ):
                continue
            tag = next((meta[k] for k in ("ETag", "etag", "md5", "checksum") if meta.get(k)), None)
            if tag is None:
                try:
                    tag = content_hash(self.read(name))
                except FileNotFoundError:
                    continue  # deleted since the listing
            modified = meta.get("mtime") or meta.get("LastModified") or meta.get("created")
            yield (
                self.rel(name),
                int(meta.get("size") or 0),
                _timestamp(modified),
                str(tag).strip('"'),
            )

    def scan_folders(
        self, directory: str
    ) -> tuple[list[tuple[str, int, float | None, str]], set[str] | None]:
        """:meth:`scan` of ``directory`` (not recursive), and the names of the folders
        right under it that hold something, when the same listing tells them (S3's common
        prefixes); the default does not know them (None) and costs one :meth:`scan`."""
        return list(self.scan(directory, False)), None

    # Compare-and-swap, for appends, creates and leases.
    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        """Content and version of ``full`` from one read, or None when it does not exist.

        The version is what :meth:`put_if` and :meth:`delete_if` compare; here a content
        hash. A store with versions of its own (an ETag, a generation) returns those.
        """
        try:
            data = self.read(full)
        except FileNotFoundError:
            return None
        return data, content_hash(data)

    @abstractmethod
    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        """Write ``data`` if the current version is ``version`` (None: only if absent).

        Returns the new version, or None when the condition did not hold. One step: of
        writers racing from the same version exactly one wins (atomic against all other
        writers when ``conditional``). ``append`` says that ``data`` extends the current
        content: a store that can append in place may. All or nothing: a write that fails
        (a full disk too) leaves the file as it was. A write that landed although its
        answer was lost must not be reported as lost to another writer (S3Store tags each
        write to recognise it).
        """

    @abstractmethod
    def delete_if(self, full: str, version: str) -> bool:
        """Delete ``full`` if its current version is ``version``; False when it is not
        (also when the file is gone). Releasing a lease is one of these."""


class FsspecStore(WorkspaceStore):
    """Any fsspec filesystem: the store for protocols no installed store claims.

    Its compare-and-swap reads, compares and writes under a lock of this process, and a
    create is ``pipe_file(mode="create")``: safe among the threads of one process, and
    across processes only as far as the filesystem's exclusive create is exclusive.
    """

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        with self.op("conditional write", full), _PROCESS_LOCK:
            if version is None:
                try:
                    self.fs.pipe_file(full, data, mode="create")
                except FileExistsError:
                    return None
                return content_hash(data)
            current = self.read_versioned(full)
            if current is None or current[1] != version:
                return None
            self.fs.pipe_file(full, data)
            return content_hash(data)

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full), _PROCESS_LOCK:
            current = self.read_versioned(full)
            if current is None or current[1] != version:
                return False
            self.fs.rm_file(full)
            return True


class MemoryStore(FsspecStore):
    """fsspec's ``memory://`` filesystem: in this process, for tests and demos.

    Every writer of the storage is in this process, so the process-wide lock of
    :class:`FsspecStore` makes its compare-and-swap atomic against all of them.
    """

    protocols = ("memory",)
    conditional = True

    def check_reachable(self) -> None:
        return None


def _timestamp(value: Any) -> float | None:
    """A listing's modification time (datetime, epoch seconds or ISO text) as epoch seconds."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    try:
        from datetime import datetime

        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


# Finding a store. ----------------------------------------------------------------------


def url_protocol(url: str) -> str:
    """The protocol that picks the store of workspace ``url``: its scheme, ``file`` for a
    plain path, the first (outermost) one of a chained URL (``simplecache::s3://...``)."""
    if "://" not in url and "::" not in url:
        return "file"
    return url.split("::", 1)[0].split("://", 1)[0]


def store_registry() -> BackendRegistry[WorkspaceStore]:
    """The stores registered under ``harnessmem.storage``, by protocol, loaded lazily."""
    from harnessmem.plugins import STORAGE_GROUP, BackendRegistry

    return BackendRegistry[WorkspaceStore]("storage", STORAGE_GROUP, WorkspaceStore)


def installed_stores(registry: BackendRegistry[WorkspaceStore] | None = None) -> list[str]:
    """One line per installed store: its protocols and where it comes from (not imported)."""
    by_source: dict[str, list[str]] = {}
    for protocol, source in (registry or store_registry()).sources().items():
        by_source.setdefault(source, []).append(protocol)
    return sorted(f"{', '.join(sorted(names))} ({source})" for source, names in by_source.items())


def store_class(url: str) -> type[WorkspaceStore]:
    """The store class for workspace ``url`` (see the module doc for the rules)."""
    protocol = url_protocol(url)
    registry = store_registry()
    cls = registry.find(protocol, setting="workspace.url")
    if cls is not None:
        if protocol not in cls.protocols:
            from harnessmem.errors import PluginError

            raise PluginError(
                f"store {cls.__module__}.{cls.__qualname__} is registered for protocol "
                f"{protocol!r} but claims only {', '.join(cls.protocols) or 'none'}",
                hint="list every protocol of its entry points in the store's `protocols`",
            )
        return cls
    import fsspec

    stores = installed_stores(registry)
    if protocol not in fsspec.available_protocols():
        known = [name for line in stores for name in line.split(" (", 1)[0].split(", ")]
        close = difflib.get_close_matches(
            protocol, known + fsspec.available_protocols(), n=1, cutoff=0.5
        )
        message = (
            f"open workspace {url!r} failed: no store for protocol {protocol!r} "
            f"(no installed store claims it, and fsspec does not know it); installed "
            f"stores: {'; '.join(stores) or 'none'}"
        )
        raise WorkspaceError(
            message + (f"; did you mean {close[0]!r}?" if close else ""),
            hint="use one of those protocols or one fsspec knows, or install the store's "
            "distribution (it registers its protocols in the 'harnessmem.storage' "
            "entry-point group)",
        )
    logger.warning(
        "workspace %s: no installed store claims protocol %r, so fsspec's generic store "
        "serves it: appends, creates and leases are safe within one process only "
        "(installed stores: %s)",
        url,
        protocol,
        "; ".join(stores) or "none",
    )
    return FsspecStore
