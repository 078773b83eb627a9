"""The offline extractive model backend: facts, summaries and consolidation without a model.

See :mod:`harnessmem.backends.extractive.backend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessmem.backends.extractive.backend import (
    ExtractiveBackend,
    ExtractiveOptions,
)

if TYPE_CHECKING:
    from harnessmem.backends.extractive._replacement import replaces
    from harnessmem.backends.extractive._text import term_set

__all__ = [
    "ExtractiveBackend",
    "ExtractiveOptions",
    "replaces",
    "term_set",
]


def __getattr__(name: str) -> Any:
    # The text helpers load on first use: opening a harness imports the backend class only.
    if name == "replaces":
        from harnessmem.backends.extractive._replacement import replaces

        return replaces
    if name == "term_set":
        from harnessmem.backends.extractive._text import term_set

        return term_set
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
