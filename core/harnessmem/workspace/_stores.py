"""Storage primitives behind :class:`harnessmem.workspace.Workspace` (private).

One class per kind of store: :class:`Store` (any fsspec filesystem), :class:`LocalStore`
(``os`` calls, filelocks) and, in :mod:`harnessmem.workspace._s3store`, ``S3Store`` (one request per
primitive, conditional PUT/DELETE, retries).
Full paths are paths inside the fsspec filesystem; storage errors become WorkspaceError
naming the operation and the workspace-relative path, a missing file stays
FileNotFoundError. ``put_if``/``delete_if`` are the compare-and-swap that appends and
leases are built on.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from harnessmem._text import content_hash
from harnessmem.errors import HarnessMemError, WorkspaceError
from harnessmem.layout import LOCKS_DIR, file_lock_path

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_TMP_SUFFIX = ".harnessmem-tmp"
# memory:// lives in this process, so one process-wide lock makes its compare-and-swap atomic.
_PROCESS_LOCK = threading.Lock()


def error_code(exc: BaseException) -> str:
    """The S3 error code (or HTTP status) behind an exception s3fs translated."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
            return str(error.get("Code") or status)
        seen = seen.__cause__ or seen.__context__
    return ""


_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "503",
        "ServiceUnavailable",
        "500",
        "InternalError",
        "502",
        "BadGateway",
        "504",
        "GatewayTimeout",
        "RequestTimeout",
        "RequestTimeoutException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "429",
    }
)
_BOTOCORE_TRANSIENT = frozenset(
    {"HTTPClientError", "ResponseStreamingError", "IncompleteReadError", "ProxyConnectionError"}
)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed S3 request is worth repeating: throttling, 5xx, transport errors."""
    if error_code(exc) in _TRANSIENT_CODES:
        return True
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError | ConnectionError):
            return True
        module = type(seen).__module__
        name = type(seen).__name__
        # botocore's HTTPClientError/ConnectionError family (timeouts, closed connections,
        # streaming errors), aiohttp's client errors and http.client's IncompleteRead:
        # checked by name so that none of these libraries is imported here.
        if module.startswith(("botocore", "aiobotocore")) and (
            "Connection" in name or "Timeout" in name or name in _BOTOCORE_TRANSIENT
        ):
            return True
        if module.startswith("aiohttp") and name != "ClientResponseError":
            return True
        if name in ("IncompleteRead", "FSTimeoutError", "RemoteProtocolError"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def hint(exc: BaseException) -> str | None:
    """How to fix a storage failure, when its cause is a common one."""
    text = f"{type(exc).__name__} {exc} {error_code(exc)}"
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Credentials" in text:
        return "check the credentials in storage_options (key/secret) and the permissions"
    if "NoSuchBucket" in text:
        return "create the bucket first, or fix the bucket name in the workspace URL"
    if "EndpointConnectionError" in text or "Could not connect" in text:
        return "check that the store is reachable (endpoint_url in storage_options)"
    if is_transient(exc):
        return (
            "the store kept failing (throttling, 5xx answers, dropped connections or "
            "timeouts) through every retry; nothing was half-written: try again later"
        )
    return None


class Store:
    """Storage primitives over fsspec, for stores without a more specific class.

    Full paths are paths inside ``fs``. Errors become WorkspaceError naming the
    operation and the workspace-relative path; a missing file stays FileNotFoundError.
    """

    def __init__(self, fs: AbstractFileSystem, root: str, url: str) -> None:
        self.fs = fs
        self.root = root
        self.url = url
        #: Whether put_if/delete_if are atomic against every other writer.
        self.conditional = "memory" in protocols(fs)
        self._thread_locks: dict[str, threading.Lock] = {}
        self._thread_locks_guard = threading.Lock()

    def thread_lock(self, full: str) -> threading.Lock:
        """A lock for ``full`` shared by the threads using this store (one per path)."""
        with self._thread_locks_guard:
            return self._thread_locks.setdefault(full, threading.Lock())

    def join(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def rel(self, full: str) -> str:
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
        with self.op("read", full):
            return bytes(self.fs.cat_file(full))

    def read_range(self, full: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of ``full``; fewer at the end of the file."""
        with self.op("read", full):
            return bytes(self.fs.cat_file(full, start=start, end=end))

    def write(self, full: str, data: bytes) -> None:
        with self.op("write", full):
            self.fs.pipe_file(full, data)
            self.fs.invalidate_cache(full)

    def exists(self, full: str) -> bool:
        with self.op("exists", full):
            self.fs.invalidate_cache(full)
            return bool(self.fs.isfile(full))

    def info(self, full: str) -> tuple[int, float | None, str]:
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
        with self.op("delete", full):
            if not self.fs.isfile(full):
                if missing_ok:
                    return
                raise FileNotFoundError(full)
            self.fs.rm_file(full)
            self.fs.invalidate_cache(full)

    def move(self, src: str, dst: str) -> None:
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
        return [path for path, *_ in self.scan(directory, recursive)]

    def scan(self, directory: str, recursive: bool) -> Iterator[tuple[str, int, float | None, str]]:
        """``(rel path, size, modified, change token)`` of the files under ``directory``.

        From one listing with details where the store gives a checksum or ETag in it;
        otherwise the token is a content hash (one read per file).
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

    # Compare-and-swap, for appends and leases. A version is a content hash here.
    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        try:
            data = self.read(full)
        except FileNotFoundError:
            return None
        return data, content_hash(data)

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        """Write ``data`` if the current version is ``version`` (None: the file is absent).

        Returns the new version, or None when the condition did not hold. ``append`` says
        that ``data`` extends the current content: a store that can append in place may.
        """
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


class LocalStore(Store):
    """The local filesystem through ``os``: temp + fsync + rename, filelocks, real renames."""

    def __init__(self, fs: AbstractFileSystem, root: str, url: str) -> None:
        super().__init__(fs, root, url)
        self.conditional = True
        self._prefix = root.rstrip(os.sep) + os.sep  # "/" itself as a root stays "/"

    @contextmanager
    def file_lock(self, full: str) -> Iterator[None]:
        """Exclusive across threads and processes, for appends and compare-and-swap.

        One of ``layout.LOCK_STRIPES`` lock files, chosen by a hash of the path: their number
        stays bounded however many files a workspace gets (a lock file cannot be deleted
        safely while another process may be waiting on it). Two paths sharing a stripe
        only wait for each other's short critical section; none is ever held while
        waiting for another lock.
        """
        from filelock import FileLock

        path = os.path.join(self.root, file_lock_path(self.rel(full)))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with FileLock(path, poll_interval=0.002):
            yield

    def join(self, rel: str) -> str:
        # Concatenation, not os.path.join: ``rel`` is normalised already, and an index
        # rebuild joins a path per file (os.path.join costs more than the open).
        if not rel:
            return self.root
        return self._prefix + (rel if os.sep == "/" else rel.replace("/", os.sep))

    def rel(self, full: str) -> str:
        # A slice for paths under the root (every listed file): relpath costs more than
        # the stat of the file, and a listing calls this once per file.
        if full.startswith(self._prefix):
            rel = full[len(self._prefix) :]
            return rel if os.sep == "/" else rel.replace(os.sep, "/")
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    def read(self, full: str) -> bytes:
        try:  # no ``op`` context manager: an index rebuild reads hundreds of files
            with open(full, "rb") as f:
                return f.read()
        except OSError:
            with self.op("read", full):
                raise

    def read_range(self, full: str, start: int, end: int) -> bytes:
        try:
            with open(full, "rb") as f:
                f.seek(start)
                return f.read(end - start)
        except OSError:
            with self.op("read", full):
                raise

    def write(self, full: str, data: bytes) -> None:
        with self.op("write", full):
            self._replace(full, data)

    def _replace(self, full: str, data: bytes) -> None:
        directory = os.path.dirname(full)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(full)}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with open(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, full)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)

    def append(self, full: str, data: bytes) -> None:
        with self.op("append", full):
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with self.file_lock(full), open(full, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

    def exists(self, full: str) -> bool:
        return os.path.isfile(full)

    def info(self, full: str) -> tuple[int, float | None, str]:
        with self.op("info", full):
            st = os.stat(full)
            if not stat.S_ISREG(st.st_mode):
                raise FileNotFoundError(full)
            return st.st_size, st.st_mtime, f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"

    def delete(self, full: str, *, missing_ok: bool = False) -> None:
        with self.op("delete", full):
            try:
                os.unlink(full)
            except FileNotFoundError:
                if not missing_ok:
                    raise

    def move(self, src: str, dst: str) -> None:
        with self.op("move", src):
            if not os.path.isfile(src):
                raise FileNotFoundError(src)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            _fsync_dir(os.path.dirname(dst))

    def make_folder(self, full: str) -> None:
        with self.op("create folder", full):
            os.makedirs(full, exist_ok=True)

    def find(self, directory: str, recursive: bool) -> list[str]:
        found: list[str] = []
        with self.op("list", directory):
            for current, dirs, files in os.walk(directory):
                if current == self.root:
                    dirs[:] = [d for d in dirs if d != LOCKS_DIR]
                if not recursive:
                    dirs.clear()
                for name in files:
                    path = os.path.join(current, name)
                    if name.endswith(_TMP_SUFFIX):
                        continue
                    if os.path.islink(path) and not inside(os.path.realpath(path), self.root):
                        continue
                    found.append(self.rel(path))
        return found

    def scan(self, directory: str, recursive: bool) -> Iterator[tuple[str, int, float | None, str]]:
        """:meth:`find`'s files with ``info``'s fields, from ``os.scandir``: the entry knows
        whether it is a link (no ``lstat``) and gives the stat ``info`` would take."""
        found: list[tuple[str, int, float | None, str]] = []
        with self.op("list", directory):
            pending = [directory]
            while pending:
                current = pending.pop()
                try:
                    entries = os.scandir(current)
                except OSError:  # missing or unreadable, as os.walk skips it
                    continue
                with entries:
                    for entry in entries:
                        name = entry.name
                        if entry.is_dir():  # follows links, but a linked folder is not entered
                            skip = entry.is_symlink() or (
                                current == self.root and name == LOCKS_DIR
                            )
                            if recursive and not skip:
                                pending.append(entry.path)
                            continue
                        if name.endswith(_TMP_SUFFIX):
                            continue
                        path = entry.path
                        if entry.is_symlink() and not inside(os.path.realpath(path), self.root):
                            continue
                        try:
                            st = entry.stat()
                        except OSError:
                            continue  # deleted since the listing, or a broken link
                        if stat.S_ISREG(st.st_mode):
                            token = f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"
                            found.append((self.rel(path), st.st_size, st.st_mtime, token))
        yield from sorted(found)

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        with self.op("conditional write", full), self.file_lock(full):
            current = self.read_versioned(full)
            if (current[1] if current else None) != version:
                return None
            if append and current and current[0] and data.startswith(current[0]):
                # O_APPEND + fsync, like append(); a rename would change the folder's
                # mtime, which makes the index look for new files.
                with open(full, "ab") as f:
                    f.write(data[len(current[0]) :])
                    f.flush()
                    os.fsync(f.fileno())
            else:
                self._replace(full, data)
            return content_hash(data)

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full), self.file_lock(full):
            current = self.read_versioned(full)
            if current is None or current[1] != version:
                return False
            os.unlink(full)
            return True


def _fsync_dir(directory: str) -> None:
    # Makes the rename durable; not possible on every OS/filesystem, hence best effort.
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


def inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
