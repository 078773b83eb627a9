"""Where the installed litellm package lives, found without importing it.

Importing litellm takes seconds; its folder holds files harnessmem reads on their own
(tiktoken's BPE files, the model price list).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["package_dir"]


def package_dir() -> Path | None:
    """The folder of the installed litellm package, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if Path(location).is_dir():
            return Path(location)
    return None
