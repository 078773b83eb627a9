"""Backend base classes (index, model) and the built-in backends.

The names are those of :mod:`~harnessmem.backends.base` and of the types it deals in,
:mod:`~harnessmem.backends.entries` and :mod:`~harnessmem.backends.search`.
"""

from harnessmem.backends import base, entries, search
from harnessmem.backends.base import *
from harnessmem.backends.entries import *
from harnessmem.backends.search import *

__all__ = [*base.__all__, *entries.__all__, *search.__all__]
