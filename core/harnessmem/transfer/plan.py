"""What an import writes: every path checked against the workspace before anything is
written, and the order of the writes (shared by the archive and the Java harness imports)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ArchiveError, PathNotAllowed
from harnessmem.layout import CONSOLIDATION_STATE, MEMORY_FILE

if TYPE_CHECKING:
    from harnessmem.workspace import Workspace

__all__ = ["ImportResult", "folders_of", "plan_writes", "sha256_of", "write_order"]


@dataclass
class ImportResult:
    """What an import wrote (``written``), found already there (``unchanged``) and left out.

    ``sessions`` and ``messages`` count the session logs converted from the Java harness's
    and the messages they held (``messages_new`` of them newly written); ``skipped`` lists
    source files that are not memory, ``bad_lines`` the unreadable lines of session logs.
    """

    source: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    sessions: int = 0
    messages: int = 0
    messages_new: int = 0
    skipped: list[str] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "written": list(self.written),
            "unchanged": list(self.unchanged),
            "sessions": self.sessions,
            "messages": self.messages,
            "messages_new": self.messages_new,
            "skipped": list(self.skipped),
            "bad_lines": list(self.bad_lines),
        }


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def folders_of(rel: str) -> list[str]:
    """The folders ``rel`` is in: ``a/b/c`` is in ``a`` and ``a/b``."""
    parts = rel.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]


def plan_writes(
    workspace: Workspace, digests: Mapping[str, str], source: str
) -> tuple[list[str], list[str]]:
    """(paths to write, paths already holding the same bytes), from each path's SHA-256.

    Every path is checked before anything is written, so that an import either writes
    all it brings or nothing: the workspace's path rules, the store's limits on names (a
    part too long for the file system), a file where the workspace has a folder or a
    folder where it has a file, and a file already there with other bytes.
    """
    refused: list[str] = []
    for rel in sorted(digests):
        try:
            problem = workspace.store.name_problem(workspace.resolve(rel))
        except PathNotAllowed as exc:
            raise ArchiveError(f"{source}: {exc.message}; nothing was imported") from None
        if problem:
            refused.append(f"{rel[:80]!r}{'...' if len(rel) > 80 else ''}: {problem}")
    if refused:
        raise ArchiveError(
            f"{source}: {len(refused)} of its paths cannot be written to workspace "
            f"{workspace.url}; nothing was imported: {refused[0]}"
            + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""),
            hint="import it into another kind of workspace (an S3 key holds 1,024 bytes), or "
            "rename those files where the archive was made",
        )
    _check_folders(workspace, digests, source)
    write: list[str] = []
    same: list[str] = []
    conflicts: list[str] = []
    for rel, digest in digests.items():
        try:
            current = workspace.read_bytes(rel)
        except FileNotFoundError:
            write.append(rel)
            continue
        (same if sha256_of(current) == digest else conflicts).append(rel)
    if conflicts:
        shown = ", ".join(sorted(conflicts)[:5]) + (", ..." if len(conflicts) > 5 else "")
        raise ArchiveError(
            f"workspace {workspace.url} already holds {len(conflicts)} of these files with other "
            f"content ({shown}); nothing was imported",
            hint="import into a new or empty workspace (-w), or move those files away first",
        )
    return write, same


def _check_folders(workspace: Workspace, paths: Iterable[str], source: str) -> None:
    """ArchiveError when a path names a folder of the workspace, or lies under a file of it."""
    held = set(workspace.list(""))
    folders = {folder for rel in held for folder in folders_of(rel)}
    for rel in sorted(paths):
        local = workspace.local_path(rel)
        if rel in folders or (local is not None and local.is_dir()):
            clash = f"{rel!r} is a folder in workspace {workspace.url}"
        else:
            under = next((folder for folder in folders_of(rel) if folder in held), None)
            if under is None:
                continue
            clash = (
                f"{under!r} is a file in workspace {workspace.url}, and {rel!r} would be under it"
            )
        raise ArchiveError(
            f"{source}: {clash}; nothing was imported",
            hint="import into a new or empty workspace (-w), or move that file away first",
        )


def write_order(paths: Iterable[str]) -> list[str]:
    # MEMORY.md and the watermark last: a reader of a half-finished import sees daily logs
    # that are not consolidated yet rather than a watermark claiming logs that are missing.
    last = (CONSOLIDATION_STATE, MEMORY_FILE)
    return sorted(paths, key=lambda p: (p in last, last.index(p) if p in last else 0, p))
