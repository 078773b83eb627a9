"""What a workspace says about a file: :class:`FileInfo` (size, modification time, change
token) and :class:`Snapshot` (its text at a version, for a write back only if unchanged)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FileInfo", "Snapshot"]


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


@dataclass(frozen=True)
class Snapshot:
    """A file's text and the version it was read at (:meth:`Workspace.read_snapshot`).

    ``version`` is None when the file does not exist (``text`` is then ""). ``token`` is
    the file's change token as :meth:`Workspace.info` gives it (``etag_or_hash``) when it
    is known without another request, else None. ``original`` holds the stored bytes
    when they were not clean UTF-8 (``text`` is then their tolerant reading, see
    :meth:`Workspace.read_text`), else None.
    """

    text: str
    version: str | None
    token: str | None = None
    original: bytes | None = field(default=None, repr=False)
