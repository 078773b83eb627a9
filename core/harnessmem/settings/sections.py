"""Typed settings: every section, every default, and where each value came from.

Sources, highest priority first: keyword arguments, environment variables
(``HARNESSMEM_`` prefix, ``__`` between levels, e.g.
``HARNESSMEM_COMPACTION__TRIGGER_MESSAGES=31``), the config file, the
defaults. The config file is the one passed explicitly (``--config``,
``HarnessSettings.load(config=...)``), else ``$HARNESSMEM_CONFIG``, else
``./harnessmem.toml`` when it exists; TOML or YAML by suffix. Reading the
config file, telling where a value came from and formatting errors are in
:mod:`harnessmem.settings._sources`; ``HarnessSettings`` in :mod:`harnessmem.settings.harness`;
the sections here (the ``[mcp]`` one in :mod:`harnessmem.settings.mcp`).
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from harnessmem import layout

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

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}


def parse_duration(value: Any) -> Any:
    """Seconds from a number or a string such as ``"90s"``, ``"30m"``, ``"6h"``, ``"7d"``."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError("expected seconds or a duration such as '30m', '6h' or '7d'")
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return value


Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class WorkspaceSettings(_Section):
    """Where the workspace lives."""

    url: str = Field(
        "./workspace",
        description="Workspace folder: a local path or any fsspec URL (file://, memory://, s3://).",
    )
    storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options for the fsspec filesystem (for s3fs: endpoint_url, key, secret, ...).",
    )
    timezone: str = Field(
        "UTC", description="IANA time zone that names daily logs and dates retention."
    )
    index_path: str | None = Field(
        None,
        description=(
            "Local file of the default SQLite index. Unset: memory_index.db beside a local "
            "workspace, or a per-workspace file in the user cache dir for remote ones."
        ),
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name such as 'UTC')"
            ) from None
        return value


class IndexSettings(_Section):
    """The full-text index backend."""

    backend: str = Field(
        "sqlite", description="Name of the index backend (entry point in harnessmem.index)."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Backend options, validated by the backend's own model."
    )
    search_timeout: Seconds = Field(
        5.0,
        description="A search running longer is stopped with SearchTimeout (0 = no limit).",
    )
    max_results: int = Field(
        50, gt=0, description="Cap on the number of hits of one search, whatever it asks."
    )
    include_archive: bool = Field(
        False, description="Also index memory/archive/*.md (expired daily logs)."
    )
    time_in_query: bool = Field(
        True,
        description=(
            "A search whose query names a time ('last week', 'On May 4th', 'since March') "
            "ranks the entries of those days first, then the rest; the time words need not "
            "match. A search given since/until keeps to them instead."
        ),
    )
    refresh_interval: Seconds | None = Field(
        None,
        description=(
            "Seconds between full checks for changed files, made before a search. Local "
            "workspaces also check new, deleted and recently changed files before every "
            "search. Unset: 30, or 0 for memory:// workspaces."
        ),
    )


class ModelPurposeSettings(_Section):
    """A per-purpose override of the model settings."""

    backend: str | None = Field(None, description="Backend for this purpose; unset: model.backend.")
    name: str | None = Field(None, description="Model name for this purpose; unset: model.name.")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Options merged over model.options for this purpose."
    )
    max_tokens: int | None = Field(
        None, gt=0, description="Answer length cap for this purpose; unset: model.max_tokens."
    )


class ModelBudgetSettings(_Section):
    """A daily limit on what the upkeep jobs (flush, consolidation) spend on a metered model."""

    daily_tokens: int | None = Field(
        None,
        gt=0,
        description=(
            "Prompt + completion tokens per day (workspace.timezone) for all purposes; past it, "
            "flush and consolidation use the extractive backend. Unset: no limit."
        ),
    )
    daily_cost: float | None = Field(
        None,
        gt=0,
        description=(
            "US dollars per day, as litellm prices the calls; past it, flush and consolidation "
            "use the extractive backend. Unset: no limit."
        ),
    )


class ModelSettings(_Section):
    """The model that writes summaries, extracts facts and consolidates memory."""

    backend: str | None = Field(
        None,
        description=(
            "Model backend (entry point in harnessmem.model). Unset: 'litellm' when a model "
            "name is set, else the offline 'extractive' backend."
        ),
    )
    name: str | None = Field(
        None, description="Model name as the backend knows it, e.g. 'openai/gpt-4o-mini'."
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Backend options (for litellm: api_base, api_key, timeout, num_retries, ...).",
    )
    max_tokens: int = Field(2_000, gt=0, description="Default cap on the length of an answer.")
    summary: ModelPurposeSettings = Field(
        default_factory=ModelPurposeSettings, description="Override for compaction summaries."
    )
    flush: ModelPurposeSettings = Field(
        default_factory=ModelPurposeSettings, description="Override for fact extraction."
    )
    consolidation: ModelPurposeSettings = Field(
        default_factory=ModelPurposeSettings, description="Override for MEMORY.md consolidation."
    )
    budget: ModelBudgetSettings = Field(
        default_factory=ModelBudgetSettings,
        description="Daily upkeep budget; compaction summaries are never held back by it.",
    )
    record_usage: bool = Field(
        True,
        description=(
            "Append one JSON line per model call to usage/<day>.jsonl in the workspace, so "
            "harness.usage() and the daily budget see every process."
        ),
    )

    @property
    def resolved_backend(self) -> str:
        """The backend that serves when no purpose override applies."""
        return self.backend or ("litellm" if self.name else "extractive")


class TruncateArgsSettings(_Section):
    """Pre-pass that shortens long tool-call arguments of old messages before summarising."""

    trigger_messages: int = Field(
        25, ge=0, description="Run when at least this many messages (0 = off)."
    )
    trigger_tokens: int = Field(
        40_000, ge=0, description="Run when at least this many tokens (0 = off)."
    )
    max_arg_chars: int = Field(2_000, gt=0, description="Arguments longer than this are cut.")


class CompactionSettings(_Section):
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


class FlushSettings(_Section):
    """Extracting facts from conversations into daily logs."""

    enabled: bool = Field(True, description="Flush new messages in after_call.")
    mode: Literal["sync", "background"] = Field(
        "sync", description="'sync' writes before after_call returns; 'background' queues it."
    )
    queue_size: int = Field(64, gt=0, description="Capacity of the background flush queue.")
    prompt: str | None = Field(None, description="Extraction prompt; unset: the built-in prompt.")
    batch_tokens: int = Field(
        4_000,
        ge=0,
        description=(
            "after_call flushes once the unflushed part of the conversation reaches this many "
            "tokens; compaction, Session.close() and closing the harness flush the rest "
            "(0 = flush after every call)."
        ),
    )
    transcript: Literal["lean", "full"] = Field(
        "lean",
        description=(
            "'lean' sends tool results and arguments as compact JSON cut to head and tail; "
            "'full' sends them longer and as they are."
        ),
    )
    reference: Literal["related", "full"] = Field(
        "related",
        description=(
            "Dedup reference: 'related' sends the MEMORY.md and today's-log entries that share "
            "the most words with the new messages; 'full' sends both files (each cut to "
            "reference_chars)."
        ),
    )
    reference_chars: int = Field(
        800,
        ge=0,
        description=(
            "Bound on the dedup reference in characters: in all for 'related', for each of "
            "MEMORY.md and today's log for 'full' (0 = no reference)."
        ),
    )
    dedup_search: bool = Field(
        True,
        description=(
            "Also drop extracted facts that the index finds verbatim in older memory files "
            "(write-time dedup across days; skipped while no index is available)."
        ),
    )
    ground_times: bool = Field(
        True,
        description=(
            "Rewrite the relative times of every written fact as absolute dates ('last "
            "Sunday' said on 2023-06-13: 'on Sunday 2023-06-11'), against the time of the "
            "message that said it (its timestamp, else the flush's), in workspace.timezone."
        ),
    )
    backoff_max: int = Field(
        16,
        ge=0,
        description=(
            "After a flush model failure, the session's next 1, 2, 4 ... flushes (at most "
            "this many) are deferred without asking it; 0 asks it every time."
        ),
    )
    retries: int = Field(
        3, ge=0, description="Background mode: retries of a failed flush before it is parked."
    )
    retry_delay: Seconds = Field(
        5.0, description="Background mode: wait before the first retry; doubles each time."
    )


class ConsolidationSettings(_Section):
    """Rewriting MEMORY.md from the daily logs."""

    enabled: bool = Field(True, description="Consolidate daily logs into MEMORY.md.")
    max_memory_tokens: int = Field(4_000, gt=0, description="Token budget of MEMORY.md.")
    prompt: str | None = Field(
        None, description="Consolidation prompt; unset: the built-in prompt."
    )
    max_entry_loss: float = Field(
        0.25,
        ge=0,
        le=1,
        description=(
            "Reject a rewrite that drops more than this share of the prior entries while the "
            "prior MEMORY.md was within budget."
        ),
    )
    min_new_tokens: int = Field(
        2_000,
        ge=0,
        description=(
            "A flush asks for an opportunistic consolidation once the facts it and earlier "
            "flushes of this process wrote reach this many tokens (0: after every flush); "
            "scheduled ticks consolidate whatever waits."
        ),
    )
    backoff_max: int = Field(
        16,
        ge=0,
        description=(
            "After a consolidation model failure or a rejected rewrite, the next 1, 2, 4 ... "
            "maintenance runs (at most this many) skip it; 0 asks it every time."
        ),
    )
    max_input_tokens: int = Field(
        32_000,
        gt=0,
        description=(
            "Bound on the new daily-log text sent per run; the rest waits for the next run."
        ),
    )
    lease_ttl: Seconds = Field(
        600.0,
        gt=0,
        description="Lifetime of the consolidation lease; a crashed holder's expires.",
    )
    history_keep: int = Field(
        10, ge=0, description="Previous MEMORY.md versions kept in memory/.history/."
    )


class MaintenanceSettings(_Section):
    """Background upkeep: archive, consolidate, prune, reindex."""

    enabled: bool = Field(True, description="Run the maintenance scheduler thread.")
    interval: Seconds = Field(6 * 3600.0, description="Time between ticks (seconds, or '6h').")
    min_gap: Seconds = Field(
        30 * 60.0, description="Least time between opportunistic ticks asked for by flushes."
    )
    daily_file_retention_days: int = Field(
        90, gt=0, description="Daily logs older than this move to memory/archive/."
    )
    session_retention_days: int = Field(
        180, gt=0, description="Session logs older than this are deleted."
    )
    lease_ttl: Seconds = Field(
        600.0,
        gt=0,
        description=(
            "Lifetime of the maintenance lease, renewed between steps; a crashed holder's "
            "expires. Must exceed the longest single step (a consolidation)."
        ),
    )
    close_timeout: Seconds = Field(
        30.0,
        description=(
            "How long close() waits for queued flushes and a running tick before it gives up "
            "on them (they are logged)."
        ),
    )


class EvictionSettings(_Section):
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


class TransferSettings(_Section):
    """Moving a workspace: how much ``harnessmem import`` unpacks from an archive."""

    max_import_bytes: int = Field(
        2 * 1024**3,
        gt=0,
        description=(
            "Most bytes an imported archive may unpack to (its tar stream: files and "
            "headers); a larger one is refused before the member that crosses the limit is "
            "read. Default 2 GiB."
        ),
    )
    max_import_ratio: float = Field(
        100.0,
        ge=1,
        description=(
            "Most times its own size an imported archive may unpack to, checked from 16 MiB "
            "unpacked on (an export of text unpacks to 5-10 times its size; a tar bomb to "
            "about 1,000)."
        ),
    )


class ContextSettings(_Section):
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


class ToolsSettings(_Section):
    """Which optional agent tools a session offers (the four memory tools always are)."""

    forget: bool = Field(
        False,
        description=(
            "Offer the memory_forget tool: the agent may remove facts from memory for good "
            "(a few at a time, never the session logs). Off by default: forgetting cannot "
            "be undone."
        ),
    )


class PluginSettings(_Section):
    """Which hook plugins load."""

    autoload: bool = Field(True, description="Load hook plugins from the harnessmem.plugins group.")
    disable: list[str] = Field(default_factory=list, description="Plugin names never loaded.")
    only: list[str] | None = Field(
        None, description="When set, load just these plugin names (built-ins included)."
    )
    trace: bool = Field(False, description="Log every hook call and result at DEBUG level.")
    settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-plugin options, keyed by plugin name."
    )
