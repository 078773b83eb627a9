"""Template plugins for harnessmem; copy this folder to start your own.

- :mod:`harnessmem_example.wordfilter`: a hook plugin (``transform_memory_text``);
- :mod:`harnessmem_example.jsonindex`: an index backend (``index.backend = "jsonfile"``).
  Not imported here: loading the hook plugin must not import the backend, which
  harnessmem imports only when a config names it.
"""

from harnessmem_example.wordfilter import WordFilter, WordFilterOptions

__all__ = ["WordFilter", "WordFilterOptions"]
