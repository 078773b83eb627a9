"""Workspaces: a local folder or S3, read and written through one class.

See :mod:`harnessmem.workspace.workspace`.
"""

from harnessmem.workspace.workspace import (
    ORIGINALS_DIR,
    FileInfo,
    FsspecStore,
    Lease,
    LocalStore,
    MemoryStore,
    S3Store,
    Snapshot,
    Workspace,
    WorkspaceStore,
    installed_stores,
    safe_id,
)

__all__ = [
    "ORIGINALS_DIR",
    "FileInfo",
    "FsspecStore",
    "Lease",
    "LocalStore",
    "MemoryStore",
    "S3Store",
    "Snapshot",
    "Workspace",
    "WorkspaceStore",
    "installed_stores",
    "safe_id",
]
