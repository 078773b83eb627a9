"""Compatibility path of :mod:`harnessmem.memory.redaction`, where this module now lives."""

from harnessmem.memory.redaction import *  # noqa: F403
from harnessmem.memory.redaction import __all__ as __all__
