"""Storage primitives behind :class:`harnessmem.workspace.Workspace` (private).

One class per kind of store: :class:`Store` (any fsspec filesystem), :class:`S3Store`
(conditional PUT/DELETE through s3fs) and :class:`LocalStore` (``os`` calls, filelocks).
Full paths are paths inside the fsspec filesystem; storage errors become WorkspaceError
naming the operation and the workspace-relative path, a missing file stays
FileNotFoundError. ``put_if``/``delete_if`` are the compare-and-swap that appends and
leases are built on.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from harnessmem.errors import HarnessMemError, WorkspaceError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

LOCKS = ".locks"
_TMP_SUFFIX = ".harnessmem-tmp"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# memory:// lives in this process, so one process-wide lock makes its compare-and-swap atomic.
_PROCESS_LOCK = threading.Lock()
# S3 answers for a conditional request that lost to another writer: read again and retry.
_LOST_RACE = frozenset(
    {"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"}
)


def _content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _error_code(exc: BaseException) -> str:
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


def hint(exc: BaseException) -> str | None:
    """How to fix a storage failure, when its cause is a common one."""
    text = f"{type(exc).__name__} {exc} {_error_code(exc)}"
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Credentials" in text:
        return "check the credentials in storage_options (key/secret) and the permissions"
    if "NoSuchBucket" in text:
        return "create the bucket first, or fix the bucket name in the workspace URL"
    if "Connect" in text or "Endpoint" in text:
        return "check that the store is reachable (endpoint_url in storage_options)"
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
            if isinstance(exc, FileNotFoundError) and _error_code(exc) != "NoSuchBucket":
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
            tag = str(tag).strip('"') if tag else _content_hash(bytes(self.fs.cat_file(full)))
            return int(meta["size"]), modified, tag

    def delete(self, full: str) -> None:
        with self.op("delete", full):
            if not self.fs.isfile(full):
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

    def find(self, directory: str, recursive: bool) -> list[str]:
        with self.op("list", directory):
            self.fs.invalidate_cache(directory)
            found = self.fs.find(directory, maxdepth=None if recursive else 1, detail=True)
            # Directory marker objects ("a/") and look-alike siblings ("memory2/") are not
            # files under the directory.
            return [
                self.rel(name)
                for name, meta in found.items()
                if meta.get("type") == "file"
                and not name.endswith("/")
                and name.startswith(directory.rstrip("/") + "/")
            ]

    # Compare-and-swap, for appends and leases. A version is a content hash here.
    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        try:
            data = self.read(full)
        except FileNotFoundError:
            return None
        return data, _content_hash(data)

    def put_if(self, full: str, data: bytes, version: str | None) -> bool:
        with self.op("conditional write", full), _PROCESS_LOCK:
            if version is None:
                try:
                    self.fs.pipe_file(full, data, mode="create")
                except FileExistsError:
                    return False
                return True
            current = self.read_versioned(full)
            if current is None or current[1] != version:
                return False
            self.fs.pipe_file(full, data)
            return True

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full), _PROCESS_LOCK:
            current = self.read_versioned(full)
            if current is None or current[1] != version:
                return False
            self.fs.rm_file(full)
            return True


class S3Store(Store):
    """S3 through s3fs: conditional PUT/DELETE; HEAD and fresh listings, never cached ones."""

    def __init__(self, fs: AbstractFileSystem, root: str, url: str) -> None:
        super().__init__(fs, root, url)
        self.conditional = True

    def _call(self, method: str, full: str, **kwargs: Any) -> Any:
        bucket, key, _ = self.fs.split_path(full)
        return self.fs.call_s3(method, Bucket=bucket, Key=key, **kwargs)

    def exists(self, full: str) -> bool:
        try:
            self.info(full)
        except FileNotFoundError:
            return False
        return True

    def info(self, full: str) -> tuple[int, float | None, str]:
        with self.op("info", full):
            head = self._call("head_object", full)
            etag = str(head["ETag"]).strip('"')
            return int(head["ContentLength"]), head["LastModified"].timestamp(), etag

    def delete(self, full: str) -> None:
        self.info(full)  # S3 deletes of missing keys succeed; we must report them.
        with self.op("delete", full):
            self._call("delete_object", full)
            self.fs.invalidate_cache(full)

    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        from fsspec.asyn import sync

        async def get() -> tuple[bytes, str]:
            # One GET gives the body and its ETag together; HEAD then GET could pair a
            # newer body with an older ETag and let a conditional write lose an append.
            bucket, key, _ = self.fs.split_path(full)
            response = await self.fs._call_s3("get_object", Bucket=bucket, Key=key)
            async with response["Body"] as body:
                return bytes(await body.read()), str(response["ETag"])

        try:
            with self.op("read", full):
                return sync(self.fs.loop, get)  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    def put_if(self, full: str, data: bytes, version: str | None) -> bool:
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        with self.op("conditional write", full):
            try:
                self._call("put_object", full, Body=data, **condition)
            except OSError as exc:
                # 412: changed since read; 409: a concurrent conditional write; NoSuchKey:
                # deleted since read. All mean "read again".
                if isinstance(exc, FileExistsError) or _error_code(exc) in _LOST_RACE:
                    return False
                raise
            finally:
                self.fs.invalidate_cache(full)
        return True

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full):
            try:
                self._call("delete_object", full, IfMatch=version)
            except OSError as exc:
                code = _error_code(exc)
                if code in _LOST_RACE:
                    return False
                if code not in {"NotImplemented", "501", "InvalidArgument"}:
                    raise
                # Stores without conditional deletes: check, then delete (best effort).
                current = self.read_versioned(full)
                if current is None or current[1] != version:
                    return False
                self._call("delete_object", full)
            finally:
                self.fs.invalidate_cache(full)
        return True


class LocalStore(Store):
    """The local filesystem through ``os``: temp + fsync + rename, filelocks, real renames."""

    def __init__(self, fs: AbstractFileSystem, root: str, url: str) -> None:
        super().__init__(fs, root, url)
        self.conditional = True

    @contextmanager
    def file_lock(self, full: str) -> Iterator[None]:
        """Exclusive across threads and processes, for appends and compare-and-swap."""
        from filelock import FileLock

        rel = self.rel(full)
        # Readable prefix for people looking at .locks/, hash so distinct paths never share.
        name = f"{_UNSAFE.sub('_', rel)[:60]}-{_content_hash(rel.encode())[:16]}.lock"
        path = os.path.join(self.root, LOCKS, "files", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with FileLock(path, poll_interval=0.002):
            yield

    def join(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/")) if rel else self.root

    def rel(self, full: str) -> str:
        return os.path.relpath(full, self.root).replace(os.sep, "/")

    def read(self, full: str) -> bytes:
        with self.op("read", full), open(full, "rb") as f:
            return f.read()

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
            if not os.path.isfile(full):
                raise FileNotFoundError(full)
            return st.st_size, st.st_mtime, f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"

    def delete(self, full: str) -> None:
        with self.op("delete", full):
            os.unlink(full)

    def move(self, src: str, dst: str) -> None:
        with self.op("move", src):
            if not os.path.isfile(src):
                raise FileNotFoundError(src)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            _fsync_dir(os.path.dirname(dst))

    def find(self, directory: str, recursive: bool) -> list[str]:
        found: list[str] = []
        with self.op("list", directory):
            for current, dirs, files in os.walk(directory):
                if current == self.root:
                    dirs[:] = [d for d in dirs if d != LOCKS]
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

    def put_if(self, full: str, data: bytes, version: str | None) -> bool:
        with self.op("conditional write", full), self.file_lock(full):
            current = self.read_versioned(full)
            if (current[1] if current else None) != version:
                return False
            self._replace(full, data)
            return True

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


def inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
