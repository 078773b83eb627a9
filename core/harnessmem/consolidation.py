"""Compatibility path of :mod:`harnessmem.memory.consolidation`, where this module now lives."""

from harnessmem.memory.consolidation import *  # noqa: F403
from harnessmem.memory.consolidation import __all__ as __all__
