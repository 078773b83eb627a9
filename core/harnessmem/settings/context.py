"""The settings of what a conversation's context holds: compaction (and the shortening of
old tool arguments before it), the eviction of large tool results, and the memory block and
recall the model is given."""

from __future__ import annotations

import posixpath
from typing import Literal

from pydantic import Field, field_validator

from harnessmem import layout
from harnessmem.settings._section import Seconds, Section

__all__ = [
    "DEFAULT_EXCLUDED_TOOLS",
    "CompactionSettings",
    "ContextSettings",
    "EvictionSettings",
    "TruncateArgsSettings",
]

DEFAULT_EXCLUDED_TOOLS = (
    "read_file",
    "write_file",
    "edit_file",
    "grep_files",
    "glob_files",
    "list_files",
    "memory_search",
    "memory_get",
    "session_search",
)


class TruncateArgsSettings(Section):
    """Pre-pass that shortens long tool-call arguments of old messages before summarising."""

    trigger_messages: int = Field(
        25, ge=0, description="Run when at least this many messages (0 = off)."
    )
    trigger_tokens: int = Field(
        40_000, ge=0, description="Run when at least this many tokens (0 = off)."
    )
    max_arg_chars: int = Field(2_000, gt=0, description="Arguments longer than this are cut.")


class CompactionSettings(Section):
    """Summarising the old part of a conversation when it grows too long."""

    enabled: bool = Field(True, description="Compact conversations in before_reasoning.")
    trigger_messages: int = Field(
        50, ge=0, description="Compact when the conversation has this many messages (0 = off)."
    )
    trigger_tokens: int = Field(
        80_000, ge=0, description="Compact when the conversation has this many tokens (0 = off)."
    )
    keep_messages: int = Field(20, ge=0, description="Messages kept verbatim at the tail.")
    keep_tokens: int = Field(
        0, ge=0, description="When > 0, keep a tail of this many tokens instead of keep_messages."
    )
    flush_before_compact: bool = Field(
        True, description="Extract facts from the prefix into the daily log before summarising."
    )
    offload_before_compact: bool = Field(
        True, description="Append the raw prefix to sessions/<id>.log.jsonl before summarising."
    )
    offload_lease_timeout: Seconds = Field(
        5.0,
        description="Seconds a compaction waits for the session log's lease held by another "
        "live process before it is postponed to the next turn (a dead holder on this "
        "machine is taken over at once).",
    )
    summary_prompt: str | None = Field(
        None, description="Summary prompt template; unset: the built-in four-section prompt."
    )
    summary_max_tokens: int = Field(
        2_000,
        gt=0,
        description=(
            "Size bound of a summary, also capped at a quarter of trigger_tokens; a longer "
            "answer is rejected (degraded compaction)."
        ),
    )
    facts_in_summary: bool = Field(
        True,
        description=(
            "Ask for the dropped messages' new facts in the summary call (one model call per "
            "compaction, not two) when one model serves both; off: a separate flush call."
        ),
    )
    summary_backoff_max: int = Field(
        16,
        ge=0,
        description=(
            "After a summariser failure, the next 1, 2, 4 ... compactions (at most this many) "
            "use the automatic summary without asking it; 0 asks it every time."
        ),
    )
    truncate_args: TruncateArgsSettings | None = Field(
        None, description="Tool-argument truncation pre-pass; unset: off."
    )


class EvictionSettings(Section):
    """Moving huge tool results out of the conversation into files."""

    enabled: bool = Field(True, description="Evict oversized tool results.")
    max_result_chars: int = Field(
        80_000, gt=0, description="Results longer than this many characters are evicted."
    )
    preview_chars: int = Field(
        2_000, ge=0, description="Characters kept from the head and from the tail."
    )
    path: str = Field(
        layout.EVICTION_DIR,
        description=(
            "Workspace folder for evicted results: a relative folder other than memory/, "
            "sessions/, MEMORY.md and hidden names such as .locks."
        ),
    )
    excluded_tools: list[str] = Field(
        default_factory=lambda: list(DEFAULT_EXCLUDED_TOOLS),
        description="Tools whose results are never evicted.",
    )
    retention_days: int = Field(
        30, gt=0, description="Evicted results older than this are deleted."
    )

    @field_validator("path")
    @classmethod
    def _own_folder(cls, value: str) -> str:
        folder = posixpath.normpath(value.strip("/") or ".")
        parts = folder.split("/")
        if folder in (".", "..") or parts[0] == ".." or "\\" in value or ":" in parts[0]:
            raise ValueError(
                "must name a folder inside the workspace, such as 'large_tool_results'"
            )
        if parts[0] in layout.RESERVED_NAMES or any(part.startswith(".") for part in parts):
            raise ValueError(
                f"{folder!r} is reserved for harnessmem's own files (MEMORY.md, memory/, "
                "sessions/ and hidden names such as .locks); use a folder of its own, such "
                "as 'large_tool_results'"
            )
        return value


class ContextSettings(Section):
    """The memory block injected into the system prompt."""

    enabled: bool = Field(
        True,
        description=(
            "Give the model MEMORY.md: in the system message (context.inject) or through "
            "system_context(); off, neither places anything."
        ),
    )
    inject: Literal["system", "manual"] = Field(
        "system",
        description=(
            "Where the memory block goes: 'system' puts the current block in the system "
            "message at every before_reasoning (refreshing an earlier copy in place, "
            "re-reading MEMORY.md only when it changed); 'manual' leaves the messages "
            "alone and the caller puts system_context() in its prompt."
        ),
    )
    max_tokens: int = Field(
        8_000,
        gt=0,
        description=(
            "Token bound of the injected MEMORY.md; above it a visible truncation marker, a "
            "warning event and a consolidation request (never a silent cut)."
        ),
    )
    recall: bool = Field(
        False,
        description=(
            "Recall before replying: at each before_reasoning, search the memory with the "
            "latest user message and put the best hits not already in the context into a "
            "<memory_recall> block (searched again only when that message changes)."
        ),
    )
    recall_place: Literal["system", "user"] = Field(
        "system",
        description=(
            "Where the recall block goes: appended to the system message, or as a user-side "
            "note just before the latest user message. Either way one block, replaced each turn."
        ),
    )
    recall_hits: int = Field(3, ge=1, le=20, description="Most memory hits the recall block shows.")
    recall_max_tokens: int = Field(
        400,
        ge=100,
        le=8_000,
        description=(
            "Token bound of the whole recall block, its preamble included; a hit that does "
            "not fit is cut with a marker naming the lines to read with memory_get."
        ),
    )
