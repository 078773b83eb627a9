"""Compaction: a conversation summarised, its old messages offloaded, past its budget.

See :mod:`harnessmem.compaction.compactor`.
"""

from harnessmem.backends.overflow import is_context_overflow
from harnessmem.compaction.compactor import CompactionPlugin, ConversationCompactor
from harnessmem.events import CompactionResult

__all__ = [
    "CompactionPlugin",
    "CompactionResult",
    "ConversationCompactor",
    "is_context_overflow",
]
