"""A template plugin for harnessmem; copy this folder to start your own."""

from harnessmem_example.wordfilter import WordFilter, WordFilterOptions

__all__ = ["WordFilter", "WordFilterOptions"]
