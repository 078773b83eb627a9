"""The previous versions of MEMORY.md that consolidation keeps in ``memory/.history/``:
where the next one goes, which ones it pushes out, and how it is written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessmem import layout
from harnessmem.memory import files as mf

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.memory._watermark import Watermark
    from harnessmem.workspace import Workspace

__all__ = ["keep_version", "plan_history"]


def plan_history(
    kernel: Kernel, watermark: Watermark, current: str
) -> tuple[str | None, list[str]]:
    """Where the previous version ``current`` goes in memory/.history/ (None: not kept)
    and the versions to delete for it; ``watermark.history`` becomes what is kept.

    The versions come from the watermark, which records them; memory/.history/ is
    listed only when it does not (see :attr:`Watermark.history`).
    """
    keep = kernel.settings.consolidation.history_keep
    if not keep or not current.strip():
        return None, []
    existing = watermark.history
    folders, history = watermark.folders, layout.HISTORY_DIR.rpartition("/")[2]
    if existing is None and folders is not None and history not in folders:
        existing = []  # memory/'s listing just showed no such folder
    if existing is None:
        existing = kernel.workspace.list(layout.HISTORY_DIR, recursive=False)
    stamp = mf.utc_now_compact(kernel.clock())
    path = layout.history_path(stamp)
    counter = 1
    while path in existing:
        path = layout.history_path(stamp, counter)
        counter += 1
    versions = sorted(
        (p for p in [*existing, path] if layout.is_history_path(p)),
        key=_history_order,
    )
    watermark.history = versions[-keep:]
    return path, versions[:-keep]


def keep_version(workspace: Workspace, path: str, text: str) -> None:
    """Write a previous MEMORY.md to ``path`` in memory/.history/: a new name, so one
    create-if-absent PUT (a plain write would first read what it replaces, for the
    audit log); written over only if a stray file holds the name."""
    if not workspace.create_text(path, text):
        workspace.write_text(path, text)


def _history_order(path: str) -> tuple[str, int]:
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    parts = stem.split("-")
    counter = int(parts[-1]) if len(parts) > 2 and parts[-1].isdigit() else 0
    return parts[1] if len(parts) > 1 else stem, counter
