"""harnessmem: memory that lasts across sessions for any LLM agent, with a bounded context.

The public names are declared once, in ``__init__.pyi``, and load on first use (PEP 562,
through lazy_loader), so ``import harnessmem`` and the ``harnessmem`` command start fast;
litellm, tiktoken, SQLAlchemy and s3fs load only when a feature needs them.
"""

from typing import Any

import lazy_loader

_lazy_getattr, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)

__all__ = [*_names, "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("harnessmem")
    try:
        value = _lazy_getattr(name)
    except AttributeError:
        raise AttributeError(f"module 'harnessmem' has no attribute {name!r}") from None
    globals()[name] = value  # later lookups skip this function
    return value
