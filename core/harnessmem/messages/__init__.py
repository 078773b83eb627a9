"""Messages: the shape of a conversation (tool-call pairing, safe cut points, fingerprints).

See :mod:`harnessmem.messages.structure`.
"""

from harnessmem.errors import MessageFormatError
from harnessmem.messages._checks import MAX_DEPTH, check_changes, check_messages, check_tool_call
from harnessmem.messages._formats import (
    FORMATS,
    describe,
    from_java_session_log,
    from_locomo,
    is_locomo,
    is_locomo_list,
    sample_name,
)
from harnessmem.messages._seen import Follower, Look, MessageChanges, SeenMessages
from harnessmem.messages.normalise import from_anthropic, from_swe_agent, normalize_messages
from harnessmem.messages.structure import (
    TIME_KEYS,
    ToolPairing,
    atomic_spans,
    content_text,
    fingerprint,
    message_time,
    pair_tool_calls,
    safe_cut_points,
    text_only,
    tool_call_ids,
    validate_messages,
)

__all__ = [
    "FORMATS",
    "MAX_DEPTH",
    "TIME_KEYS",
    "Follower",
    "Look",
    "MessageChanges",
    "MessageFormatError",
    "SeenMessages",
    "ToolPairing",
    "atomic_spans",
    "check_changes",
    "check_messages",
    "check_tool_call",
    "content_text",
    "describe",
    "fingerprint",
    "from_anthropic",
    "from_java_session_log",
    "from_locomo",
    "from_swe_agent",
    "is_locomo",
    "is_locomo_list",
    "message_time",
    "normalize_messages",
    "pair_tool_calls",
    "safe_cut_points",
    "sample_name",
    "text_only",
    "tool_call_ids",
    "validate_messages",
]
