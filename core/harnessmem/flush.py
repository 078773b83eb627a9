"""Compatibility path of :mod:`harnessmem.memory.flush`, where this module now lives."""

from harnessmem.memory.flush import *  # noqa: F403
from harnessmem.memory.flush import __all__ as __all__
