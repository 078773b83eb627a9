"""The inspector: a small web app to look through a workspace.

See :mod:`harnessmem.inspector.app`.
"""

from harnessmem.inspector.app import (
    check_exposure,
    create_app,
    serve,
)
from harnessmem.settings.exposure import is_loopback

__all__ = [
    "check_exposure",
    "create_app",
    "is_loopback",
    "serve",
]
