"""The settings of how memory is kept: the flush of facts into daily logs, their
consolidation into MEMORY.md, and the maintenance tick (archive, consolidate, prune,
reindex)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harnessmem.settings._section import Seconds, Section

__all__ = ["ConsolidationSettings", "FlushSettings", "MaintenanceSettings"]


class FlushSettings(Section):
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


class ConsolidationSettings(Section):
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


class MaintenanceSettings(Section):
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
