"""Workspaces: a local folder or S3, read and written through one class.

:mod:`~harnessmem.workspace.workspace` holds :class:`Workspace`,
:mod:`~harnessmem.workspace.files` what it says about a file; the store contract and the
stores that register through the ``harnessmem.storage`` entry points are in
:mod:`~harnessmem.workspace.store`.
"""

from harnessmem.layout import safe_id
from harnessmem.workspace._leases import Lease
from harnessmem.workspace._s3store import S3Store
from harnessmem.workspace._stores import LocalStore
from harnessmem.workspace.files import FileInfo, Snapshot
from harnessmem.workspace.store import FsspecStore, MemoryStore, WorkspaceStore, installed_stores
from harnessmem.workspace.workspace import ORIGINALS_DIR, Workspace

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
