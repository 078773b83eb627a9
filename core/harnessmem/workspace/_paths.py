"""The paths a workspace takes: relative POSIX paths that never leave it, by name (no
``..``, scheme, absolute path, backslash or NUL) or, locally, through a symlink."""

from __future__ import annotations

import os
import re
import stat

from harnessmem.errors import PathNotAllowed
from harnessmem.layout import path_problem
from harnessmem.workspace._stores import inside

__all__ = ["confined", "relative_path"]

# A relative path that relative_path returns as it is: parts of common file-name characters
# that do not start with a dot (so no '.', '..', '.locks' or hidden file takes this path).
_PLAIN = re.compile(r"(?:[\w@+=,-][\w.@+=,-]*/)*[\w@+=,-][\w.@+=,-]*", re.ASCII)


def relative_path(path: str | os.PathLike[str], url: str, *, allow_root: bool = False) -> str:
    """``path`` as a normal workspace-relative path; PathNotAllowed (naming the workspace
    ``url``) when it is not one."""
    raw = os.fspath(path)

    def deny(why: str) -> PathNotAllowed:
        return PathNotAllowed(
            f"path {raw!r} is not allowed in workspace {url}: {why}",
            hint="use a relative POSIX path inside the workspace, like 'memory/2026-11-30.md'",
        )

    if type(raw) is str and _PLAIN.fullmatch(raw):
        return raw  # already normal: no '.', '..' or empty part, scheme, NUL or backslash
    if not isinstance(raw, str):
        raise deny("paths are str, not bytes")
    rel, why = path_problem(raw, allow_root=allow_root)
    if why is not None:
        raise deny(why)
    return rel


def confined(rel: str, full: str, root: str) -> bool:
    """Whether ``full`` (``rel`` under the root) resolves inside the workspace.

    ``lstat`` of each part below the (already real) root; only a path through a
    symlink pays for ``realpath`` (a third of the cost of reading a small file).
    A missing part ends the walk: nothing below it can lead anywhere.
    """
    if not rel:
        return True
    # ``full`` is the root's prefix + ``rel`` with its separators in the same places.
    base = len(full) - len(rel)
    cut = rel.find("/")
    while True:
        part = full if cut < 0 else full[: base + cut]
        try:
            mode = os.lstat(part).st_mode
        except OSError:
            return True
        if stat.S_ISLNK(mode):
            return inside(os.path.realpath(full), root)
        if cut < 0:
            return True
        cut = rel.find("/", cut + 1)
