"""The offline extractive model backend: facts, summaries and consolidation without a model.

See :mod:`harnessmem.backends.extractive.backend`.
"""

from harnessmem.backends.extractive.backend import (
    ExtractiveBackend,
    ExtractiveOptions,
    replaces,
    term_set,
)

__all__ = [
    "ExtractiveBackend",
    "ExtractiveOptions",
    "replaces",
    "term_set",
]
