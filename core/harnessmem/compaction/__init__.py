"""Compaction: a conversation summarised, its old messages offloaded, past its budget.

See :mod:`harnessmem.compaction.compactor`. Also public, for a plugin that compacts in its own
way or reads what compaction left (docs/compaction.md describes both):

- the cut: :func:`choose_cut`, :func:`head_length`, :func:`truncate_tool_args` and
  :data:`TRUNCATION_MARK`, pure functions over messages, property-tested;
- the summary message: :func:`build_anchor` writes it, :func:`parse_anchor` reads it back as
  an :class:`Anchor`, :func:`normalise_summary` brings a model's answer to the
  :data:`SECTIONS` of the canonical form or says why it is rejected;
- :class:`MessageTimes`, when each message was first seen, for the ``said`` of the session
  log lines it offloads.
"""

from harnessmem.backends.overflow import is_context_overflow
from harnessmem.compaction._cutoff import (
    TRUNCATION_MARK,
    choose_cut,
    head_length,
    truncate_tool_args,
)
from harnessmem.compaction._summary import (
    SECTIONS,
    Anchor,
    build_anchor,
    normalise_summary,
    parse_anchor,
)
from harnessmem.compaction.compactor import CompactionPlugin, ConversationCompactor
from harnessmem.compaction.message_times import MessageTimes
from harnessmem.events import CompactionResult

__all__ = [
    "SECTIONS",
    "TRUNCATION_MARK",
    "Anchor",
    "CompactionPlugin",
    "CompactionResult",
    "ConversationCompactor",
    "MessageTimes",
    "build_anchor",
    "choose_cut",
    "head_length",
    "is_context_overflow",
    "normalise_summary",
    "parse_anchor",
    "truncate_tool_args",
]
