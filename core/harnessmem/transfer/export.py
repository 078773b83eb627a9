"""Export: every file of a workspace (but its audit log) into one archive, and the archive's
format."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.errors import ArchiveError

if TYPE_CHECKING:
    from harnessmem.workspace import Workspace

__all__ = ["FORMAT", "MANIFEST", "PREFIX", "VERSION", "ExportResult", "export_workspace"]

FORMAT = "harnessmem-export"
VERSION = 1
#: The manifest's name inside the archive; the files are under ``workspace/``.
MANIFEST = "harnessmem-export.json"
#: The folder of the archive that holds the workspace's files.
PREFIX = "workspace/"


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_workspace` wrote: the archive, its files and their bytes."""

    path: str
    files: int
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def export_workspace(
    workspace: Workspace,
    destination: str | os.PathLike[str],
    *,
    clock: Callable[[], float],
    overwrite: bool = False,
) -> ExportResult:
    """Write every file of ``workspace`` but its audit log into the archive ``destination``
    (a local path)."""
    target = Path(destination)
    if target.exists() and not overwrite:
        raise ArchiveError(
            f"{target} already exists; nothing was written",
            hint="choose another file name, or pass --force to replace it",
        )
    if not target.parent.is_dir():
        raise ArchiveError(f"folder {target.parent} does not exist; nothing was written")
    # The audit log stays: it records this workspace's changes (the import is recorded in
    # the log of the workspace it goes to).
    files = sorted(p for p in workspace.list("") if p.split("/", 1)[0] != layout.AUDIT_DIR)
    listed: list[dict[str, Any]] = []
    total = 0
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for rel in files:
                try:
                    data = workspace.read_bytes(rel)
                except FileNotFoundError:
                    continue  # deleted since the listing (pruned, moved to the archive)
                _add(tar, PREFIX + rel, data, clock())
                listed.append(
                    {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                )
                total += len(data)
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "workspace": workspace.url,
                "exported_at": _iso(clock()),
                "files": listed,
            }
            _add(tar, MANIFEST, json.dumps(manifest, indent=1).encode(), clock())
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return ExportResult(str(target), len(listed), total)


def _add(tar: tarfile.TarFile, name: str, data: bytes, moment: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(moment)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
