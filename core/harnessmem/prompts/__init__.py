"""Prompts: the templates and the blocks that go into model requests.

See :mod:`harnessmem.prompts.render`.
"""

from harnessmem.prompts.render import (
    BLOCK_TAGS,
    FACTS_TOKENS,
    NO_REPLY,
    SUMMARY_NAME,
    TAG_ALIASES,
    compact_json,
    consolidation_request,
    escape_tag,
    flush_conversation,
    flush_reference,
    flush_request,
    load_template,
    parse_conversation,
    read_blocks,
    render_block,
    render_conversation,
    strip_markers,
    summary_request,
)

__all__ = [
    "BLOCK_TAGS",
    "FACTS_TOKENS",
    "NO_REPLY",
    "SUMMARY_NAME",
    "TAG_ALIASES",
    "compact_json",
    "consolidation_request",
    "escape_tag",
    "flush_conversation",
    "flush_reference",
    "flush_request",
    "load_template",
    "parse_conversation",
    "read_blocks",
    "render_block",
    "render_conversation",
    "strip_markers",
    "summary_request",
]
