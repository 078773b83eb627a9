"""Compatibility path of :mod:`harnessmem.memory.context`, where this module now lives."""

from harnessmem.memory.context import *  # noqa: F403
from harnessmem.memory.context import __all__ as __all__
