"""Read commands look before they open: a folder that holds no workspace is reported, not made.

A mistyped ``-w`` would otherwise become a new empty workspace (and an index file beside
it), and the command would answer "nothing found" instead of naming the typo. Only
``init``, ``replay`` and the commands that write create a workspace.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import TYPE_CHECKING, Any

from harnessmem import layout

if TYPE_CHECKING:
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

#: Top-level names harnessmem writes into a workspace; one of them marks a folder as one.
_MARKERS = layout.RESERVED_NAMES | {layout.USAGE_DIR, layout.LOCKS_DIR}


def _names(fs: Any, path: str) -> set[str] | None:
    """Base names of the entries of ``path``; None when it is missing or not a folder."""
    try:
        entries = fs.ls(path, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return {posixpath.basename(str(entry).rstrip("/")) for entry in entries}


def _markers(settings: HarnessSettings) -> frozenset[str]:
    return _MARKERS | {settings.eviction.path.strip("/").split("/", 1)[0]}


def holds_workspace(workspace: Workspace, settings: HarnessSettings) -> bool:
    """Whether ``workspace`` has any file or folder harnessmem writes (one listing)."""
    names = _names(workspace.fs, workspace.root)
    return bool(names and names & _markers(settings))


def _near(workspace: Workspace, settings: HarnessSettings) -> str | None:
    """A sibling of the folder that is a workspace and whose name is close to its name."""
    parent, name = posixpath.split(workspace.root.rstrip("/"))
    if not parent or not name:
        return None
    fs: Any = workspace.fs
    names = _names(fs, parent) or set()
    for candidate in difflib.get_close_matches(name, sorted(names - {name}), n=3, cutoff=0.7):
        if _markers(settings) & (_names(fs, posixpath.join(parent, candidate)) or set()):
            return candidate
    return None


def require_workspace(settings: HarnessSettings) -> None:
    """Raise :class:`~harnessmem.errors.WorkspaceNotFound` unless the settings' workspace
    URL holds a workspace; creates nothing, locally or on an object store."""
    from harnessmem.cli._common import check_reachable, shown_url
    from harnessmem.errors import WorkspaceNotFound
    from harnessmem.plugins import check_settings
    from harnessmem.workspace import Workspace

    check_settings(settings)  # a misspelt backend or plugin is reported first
    where = Workspace.open(settings.workspace.url, settings.workspace.storage_options, create=False)
    check_reachable(where)
    if holds_workspace(where, settings):
        return
    shown = shown_url(where.url)
    near = _near(where, settings)
    exists = _names(where.fs, where.root) is not None
    what = "holds no harnessmem workspace" if exists else "does not exist"
    if near is not None:
        hint = f"did you mean {posixpath.join(posixpath.dirname(settings.workspace.url), near)!r}?"
    else:
        hint = (
            "check -w (or workspace.url); harnessmem init, harnessmem replay or "
            "harnessmem save create a workspace"
        )
    raise WorkspaceNotFound(f"workspace {shown} {what}; nothing was created", hint=hint)
