"""The local store: a workspace folder on this machine's disk (private; see
:class:`harnessmem.workspace.LocalStore`).

Plain ``os`` calls: a write is a temp file, fsync and rename; an append an ``O_APPEND`` +
fsync under a file lock; a compare-and-swap a read and a write under the same lock. The
lock files (:data:`LOCK_STRIPES` of them) live in ``<root>/.locks/files/``.

Every write is all-or-nothing, a full disk included (``ENOSPC``, ``EFBIG`` at the file size
limit, ``EDQUOT``, or any failure of the write or its fsync): a temp file that could not be
written whole is deleted, and an append that failed is cut back to the file's old size
(a file it created is deleted), still under the lock, so a retry adds exactly one copy.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from harnessmem.encoding import content_hash
from harnessmem.errors import WorkspaceError
from harnessmem.layout import LOCK_STRIPES, LOCKS_DIR, file_lock_path, lock_stripe
from harnessmem.workspace.store import WorkspaceStore

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["LOCK_STRIPES", "LocalStore", "inside", "lock_stripe"]

_TMP_SUFFIX = ".harnessmem-tmp"
#: How much longer than a file's name the temp file that _replace writes first is named.
_TMP_EXTRA = len(f"..{uuid.uuid4().hex}{_TMP_SUFFIX}")


class LocalStore(WorkspaceStore):
    """The local filesystem through ``os``: temp + fsync + rename, filelocks, real renames.

    Serves plain paths and ``file://`` / ``local://`` URLs. Appends and compare-and-swaps
    take one of :data:`LOCK_STRIPES` file locks, so they are atomic across the threads and
    processes of this machine (and of others sharing the folder, where the filesystem's
    locks work: not on every network filesystem).
    """

    protocols = ("file", "local")
    conditional = True
    cross_process = True
    is_local = True
    native_append = True

    @cached_property
    def _prefix(self) -> str:
        return self.root.rstrip(os.sep) + os.sep  # "/" itself as a root stays "/"

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any], *, create: bool = True) -> Self:
        """A plain path (``~`` expanded, made absolute) or a ``file://`` URL; the root is
        the real path of the folder, made when missing unless ``create`` is False."""
        from fsspec.implementations.local import LocalFileSystem

        fs: AbstractFileSystem
        if "://" in url or "::" in url:
            import fsspec

            fs, path = fsspec.core.url_to_fs(url, **storage_options)
            if not isinstance(fs, LocalFileSystem):
                raise ValueError(f"{url!r} is not on the local filesystem")
        else:
            fs, path = LocalFileSystem(), os.path.abspath(os.path.expanduser(url))
        if create:
            Path(path).mkdir(parents=True, exist_ok=True)
        root = os.path.realpath(path)
        return cls(fs, root, Path(root).as_uri(), storage_options)

    def check_reachable(self) -> None:
        return None

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

    @cached_property
    def _limits(self) -> tuple[int, int]:
        """The file system's longest name and path in bytes (POSIX's least common values
        where it does not say)."""

        def ask(name: str, default: int) -> int:
            try:
                return int(os.pathconf(self.root, name))
            except (OSError, ValueError, AttributeError):  # no pathconf (Windows), no value
                return default

        return ask("PC_NAME_MAX", 255), ask("PC_PATH_MAX", 4096)

    def name_problem(self, full: str) -> str | None:
        name_max, path_max = self._limits
        parts = self.rel(full).split("/")
        for number, part in enumerate(parts, start=1):
            # The file itself is written under a longer temp name first, then renamed.
            room = name_max - (_TMP_EXTRA if number == len(parts) else 0)
            size = len(os.fsencode(part))
            if size > room:
                return (
                    f"its part {part[:40]!r}... is {size} bytes long; a "
                    f"{'file' if number == len(parts) else 'folder'} name here holds at most "
                    f"{room} (this file system's names: {name_max} bytes)"
                )
        size = len(os.fsencode(full)) + _TMP_EXTRA
        if size >= path_max:
            return f"it makes a path of {size} bytes; this file system's paths hold {path_max}"
        return None

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

    def write(self, full: str, data: bytes) -> str | None:
        with self.op("write", full):
            self._replace(full, data)
        return None

    def _replace(self, full: str, data: bytes) -> None:
        directory = os.path.dirname(full)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(full)}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666
            )
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, full)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)

    def append(self, full: str, data: bytes) -> None:
        with self.op("append", full):
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with self.file_lock(full):
                self._append_whole(full, data)

    def _append_whole(self, full: str, data: bytes) -> None:
        """``O_APPEND`` + fsync of ``data``, or nothing; the caller holds the file lock.

        A write that fails part-way (a full disk writes what fits, then fails) or an fsync
        that fails leaves ``data`` partly or wholly in the file: it is cut back to the size
        it had (a file this call created is deleted), so that the file is as it was and a
        retry appends one whole copy. Other appenders wait on the same lock, so nothing of
        theirs is cut.
        """
        fd, created = _open_append(full)
        try:
            size = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except BaseException as exc:
                undone = _undo_append(fd, full, size, created)
                if undone is not None:
                    raise WorkspaceError(
                        f"append {self.rel(full)!r} in {self.url} failed "
                        f"({type(exc).__name__}: {exc}), and cutting the partial write "
                        f"back failed too ({type(undone).__name__}: {undone}): the file "
                        f"ends in a partial write after byte {size}",
                        hint=f"once the disk has room again, truncate the file to {size} "
                        f"bytes (truncate -s {size} FILE)",
                    ) from exc
                raise
        finally:
            os.close(fd)

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
                self._append_whole(full, data[len(current[0]) :])
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


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``; a short write (a disk nearly full) is continued,
    and the next write then fails with the disk's error."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # not seen on regular files; guards against a loop without end
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _open_append(full: str) -> tuple[int, bool]:
    """``full`` opened for ``O_APPEND`` writes, and whether this call created it."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0)
    while True:
        try:
            return os.open(full, flags | os.O_CREAT | os.O_EXCL, 0o666), True
        except FileExistsError:
            pass
        try:
            return os.open(full, flags), False
        except FileNotFoundError:
            continue  # deleted in between (a rename or delete does not take the lock)


def _undo_append(fd: int, full: str, size: int, created: bool) -> OSError | None:
    """Cut ``fd`` back to ``size`` bytes (and delete the file if ``created``); the error
    when that failed, else None. Shrinking a file needs no space, so it works on a full disk."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        return exc
    with suppress(OSError):  # the cut is in the page cache already; durable when it can be
        os.fsync(fd)
    if created and size == 0:
        with suppress(OSError):
            # Only while the path is still this file (a rename may have replaced it).
            if os.path.samestat(os.fstat(fd), os.stat(full)):
                os.unlink(full)
    return None


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
