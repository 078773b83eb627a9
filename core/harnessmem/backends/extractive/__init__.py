"""The offline extractive model backend: facts, summaries and consolidation without a model.

See :mod:`harnessmem.backends.extractive.backend`.
"""

from harnessmem.backends.extractive._replacement import replaces
from harnessmem.backends.extractive._text import term_set
from harnessmem.backends.extractive.backend import (
    ExtractiveBackend,
    ExtractiveOptions,
)

__all__ = [
    "ExtractiveBackend",
    "ExtractiveOptions",
    "replaces",
    "term_set",
]
