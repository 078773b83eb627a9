"""The workspace: a folder of memory files on any fsspec filesystem.

``Workspace.open`` takes a local path, ``file://``, ``memory://``, ``s3://bucket/prefix``
or any other fsspec URL. Paths are workspace-relative POSIX strings and never leave the
workspace. Every write is all-or-nothing: locally a temp file, fsync and rename; on object
stores one PUT. Appends are serialised across threads, processes and replicas:

- local: an exclusive ``filelock`` on ``<root>/.locks/files/<path>-<hash>.lock``, then
  ``O_APPEND`` + fsync. Lock files live under ``.locks/`` (never listed) so that they do
  not clutter the memory folders; they are small and left in place.
- S3: read-modify-write with a conditional PUT (``If-Match`` the ETag read, or
  ``If-None-Match: *`` for a new object), retried with jittered backoff.
- ``memory://``: the same compare-and-swap, made atomic by an in-process lock (the store
  is in-process too).
- other fsspec stores: under a workspace lease (see below). Their compare-and-swap is a
  check-then-write, so exclusion across processes is only as good as the store's
  exclusive create (``pipe_file(mode="create")``).

Leases (:meth:`Workspace.lock`) are JSON objects at ``.locks/<safe name>.lease``; see
:mod:`harnessmem._leases`. fsspec and s3fs are imported only inside :meth:`Workspace.open`.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessmem._leases import Lease, acquire_lease
from harnessmem._stores import LOCKS, LocalStore, S3Store, Store, hint, inside, protocols
from harnessmem.errors import HarnessMemError, PathNotAllowed, WorkspaceError

__all__ = ["FileInfo", "Lease", "Workspace", "safe_id"]

_SAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_APPEND_ATTEMPTS = 60
_sleep = time.sleep  # the append backoff; tests replace it


def safe_id(text: str, *, max_length: int = 80) -> str:
    """Turn an id (session id, call id, lease name) into one safe path segment.

    Keeps ``[A-Za-z0-9._-]`` and replaces anything else with ``_``. The result is never
    empty, ``.`` or ``..``, and at most ``max_length`` characters. When the text had to be
    changed or cut, a hash of the original is appended, so distinct ids stay distinct;
    safe ids come back unchanged.
    """
    if max_length < 24:
        raise ValueError(f"safe_id max_length must be at least 24, got {max_length}")
    cleaned = _SAFE_CHARS.sub("_", text)
    if cleaned.strip(".") == "":
        cleaned = cleaned.replace(".", "_") or "_"
    if cleaned == text and len(text) <= max_length:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{cleaned[: max_length - len(digest) - 1]}-{digest}"


@dataclass(frozen=True)
class FileInfo:
    """What :meth:`Workspace.info` knows about one file.

    ``etag_or_hash`` changes whenever the content does: the ETag on object stores; locally
    ``"<mtime_ns>-<size>-<inode>"`` (a change token, not a content hash: cheap to get, and
    atomic writes always make a new inode); elsewhere the store's checksum or a blake2b hash.
    """

    path: str
    size: int
    modified: float | None
    etag_or_hash: str


class Workspace:
    """A workspace folder on any fsspec filesystem; open one with :meth:`open`.

    Attributes: ``url`` (normalised, no trailing slash), ``protocol``, ``is_local``,
    ``fs`` (the fsspec filesystem), ``root`` (the root path inside ``fs``),
    ``local_root`` (a Path for local workspaces, else None), ``storage_options``.
    """

    def __init__(
        self,
        store: Store,
        *,
        protocol: str,
        storage_options: dict[str, Any],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self.fs = store.fs
        self.root = store.root
        self.url = store.url
        self.protocol = protocol
        self.is_local = isinstance(store, LocalStore)
        self.local_root = Path(store.root) if self.is_local else None
        self.storage_options = storage_options
        self.clock = clock

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str],
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> Workspace:
        """Open the workspace at ``url``; a local directory is created when missing.

        ``storage_options`` go to the fsspec filesystem (for S3: ``endpoint_url``, ``key``,
        ``secret``, ...). ``clock`` (default ``time.time``) judges lease expiry only.
        """
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        text = os.fspath(url)
        options = dict(storage_options or {})
        has_scheme = "://" in text or "::" in text
        if has_scheme and text.split("://", 1)[0].rsplit("::", 1)[-1] in {"s3", "s3a"}:
            # Several processes share a workspace: a cached listing would hide their writes.
            options.setdefault("use_listings_cache", False)
        try:
            if has_scheme:
                fs, path = fsspec.core.url_to_fs(text, **options)
            else:
                fs, path = LocalFileSystem(), os.path.abspath(os.path.expanduser(text))
            if isinstance(fs, LocalFileSystem):
                Path(path).mkdir(parents=True, exist_ok=True)
                root = os.path.realpath(path)
                store: Store = LocalStore(fs, root, Path(root).as_uri())
            else:
                root = str(path).rstrip("/")
                if not root.strip("/"):
                    raise ValueError("the URL names no bucket or folder")
                kind = S3Store if hasattr(fs, "call_s3") else Store
                store = kind(fs, root, fs.unstrip_protocol(root).rstrip("/"))
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
            protocol=protocols(fs)[0],
            storage_options=options,
            clock=clock or time.time,
        )

    def __repr__(self) -> str:
        return f"Workspace({self.url!r})"

    # Paths.
    def _rel(self, path: str | os.PathLike[str], *, allow_root: bool = False) -> str:
        raw = os.fspath(path)

        def deny(why: str) -> PathNotAllowed:
            return PathNotAllowed(
                f"path {raw!r} is not allowed in workspace {self.url}: {why}",
                hint="use a relative POSIX path inside the workspace, like 'memory/2026-11-30.md'",
            )

        if not isinstance(raw, str):
            raise deny("paths are str, not bytes")
        if "\x00" in raw or "\\" in raw:
            raise deny("it contains a backslash or NUL")
        if raw.startswith("/"):
            raise deny("it is absolute")
        if _SCHEME.match(raw):
            raise deny("it is a URL or drive path")
        parts: list[str] = []
        for segment in raw.split("/"):
            if segment == "..":
                if not parts:
                    raise deny("'..' leaves the workspace")
                parts.pop()
            elif segment not in ("", "."):
                parts.append(segment)
        if parts and parts[0] == LOCKS:
            raise deny(f"{LOCKS}/ holds the workspace's locks and leases")
        if not parts and not allow_root:
            raise deny("it names the workspace root, not a file")
        return "/".join(parts)

    def _full(self, rel: str) -> str:
        full = self._store.join(rel)
        if self.is_local and not inside(os.path.realpath(full), self.root):
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
    def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """The content of ``path``; FileNotFoundError when it does not exist."""
        return self._store.read(self.resolve(path))

    def read_text(self, path: str | os.PathLike[str]) -> str:
        """The content of ``path`` decoded as UTF-8."""
        return self.read_bytes(path).decode("utf-8")

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Replace ``path`` with ``data`` atomically: readers see the old or the new content."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"write_bytes needs bytes, got {type(data).__name__}")
        self._store.write(self.resolve(path), bytes(data))

    def write_text(self, path: str | os.PathLike[str], text: str) -> None:
        """Replace ``path`` with ``text`` (UTF-8) atomically."""
        if not isinstance(text, str):
            raise TypeError(f"write_text needs str, got {type(text).__name__}")
        self.write_bytes(path, text.encode("utf-8"))

    def append_text(self, path: str | os.PathLike[str], text: str) -> None:
        """Append ``text`` (UTF-8) to ``path``, creating it; concurrent appends are all kept.

        A ``write_*`` of the same file racing with an append may replace it; writers that
        rewrite an appended file hold a lease for it.
        """
        if not isinstance(text, str):
            raise TypeError(f"append_text needs str, got {type(text).__name__}")
        rel = self._rel(path)
        full, data = self._full(rel), text.encode("utf-8")
        store = self._store
        if isinstance(store, LocalStore):
            store.append(full, data)
            return
        # Threads of this process take turns first, so that their conditional writes only
        # compete with other processes instead of wasting requests on each other.
        with store.thread_lock(full):
            if store.conditional:
                self._append_cas(full, data)
            else:
                with self.lock(f"append:{rel}", ttl=60.0, timeout=60.0):
                    self._append_cas(full, data)

    def _append_cas(self, full: str, data: bytes) -> None:
        delay = 0.005
        for _ in range(_APPEND_ATTEMPTS):
            current = self._store.read_versioned(full)
            body = current[0] + data if current else data
            if self._store.put_if(full, body, current[1] if current else None):
                return
            # Full jitter spreads competing writers so that one of them wins each round.
            _sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.25)
        raise WorkspaceError(
            f"append {self._store.rel(full)!r} in {self.url} failed: the file kept changing "
            f"({_APPEND_ATTEMPTS} conditional writes lost to other writers)",
            hint="too many writers append to this one file; spread them over more files",
        )

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is an existing file."""
        return self._store.exists(self.resolve(path))

    def info(self, path: str | os.PathLike[str]) -> FileInfo:
        """Size, modification time and change token of ``path``; FileNotFoundError if missing."""
        rel = self._rel(path)
        size, modified, tag = self._store.info(self._full(rel))
        return FileInfo(rel, size, modified, tag)

    def delete(self, path: str | os.PathLike[str], missing_ok: bool = True) -> None:
        """Delete ``path``; FileNotFoundError when it is missing and not ``missing_ok``."""
        try:
            self._store.delete(self.resolve(path))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def move(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Move ``src`` to ``dst``, replacing it: rename locally, copy + delete on object stores."""
        self._store.move(self.resolve(src), self.resolve(dst))

    def list(self, prefix: str = "", *, recursive: bool = True) -> list[str]:
        """Sorted workspace-relative paths of the files under directory ``prefix``.

        Files only (no directories, no directory marker objects, nothing in ``.locks/``);
        a missing directory gives an empty list.
        """
        found = self._store.find(self._full(self._rel(prefix, allow_root=True)), recursive)
        return sorted({p for p in found if p.split("/", 1)[0] != LOCKS})

    # Leases.
    def _lease_path(self, name: str) -> str:
        return self._store.join(f"{LOCKS}/{safe_id(name)}.lease")

    def lock(self, name: str, ttl: float = 60.0, *, timeout: float | None = 0) -> Lease:
        """Take the named lease, excluding other holders across threads, processes, replicas.

        Acquired on call; use as ``with ws.lock("maintenance"):`` to release on exit.
        ``timeout`` 0 tries once, a positive value waits that many seconds, None waits
        forever; LeaseError (naming the holder and its expiry) when still held. A lease
        whose expiry has passed by the workspace clock is taken over.
        """
        lease = acquire_lease(
            self._store,
            name,
            self._lease_path(name),
            ttl=ttl,
            clock=self.clock,
            timeout=timeout,
            required=True,
        )
        assert lease is not None
        return lease

    def try_lock(self, name: str, ttl: float = 60.0) -> Lease | None:
        """Take the named lease if it is free (or expired); None when someone holds it."""
        return acquire_lease(
            self._store,
            name,
            self._lease_path(name),
            ttl=ttl,
            clock=self.clock,
            timeout=0,
            required=False,
        )
