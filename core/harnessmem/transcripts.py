"""Compatibility path of :mod:`harnessmem.memory.transcripts`, where this module now lives."""

from harnessmem.memory.transcripts import *  # noqa: F403
from harnessmem.memory.transcripts import __all__ as __all__
