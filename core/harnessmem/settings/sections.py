"""Typed settings: every section, every default, and where each value came from.

Sources, highest priority first: keyword arguments, environment variables
(``HARNESSMEM_`` prefix, ``__`` between levels, e.g.
``HARNESSMEM_COMPACTION__TRIGGER_MESSAGES=31``), the config file, the
defaults. The config file is the one passed explicitly (``--config``,
``HarnessSettings.load(config=...)``), else ``$HARNESSMEM_CONFIG``, else
``./harnessmem.toml`` when it exists; TOML or YAML by suffix. Reading the
config file, telling where a value came from and formatting errors are in
:mod:`harnessmem.settings._sources`; ``HarnessSettings`` in :mod:`harnessmem.settings.harness`.

The sections: where things live and what reaches them (workspace, index, model, transfer,
tools, plugins) here; what the context holds (compaction, eviction, context) in
:mod:`harnessmem.settings.context`; how memory is kept (flush, consolidation, maintenance)
in :mod:`harnessmem.settings.memory`; the audit log and telemetry in
:mod:`harnessmem.settings.observability`, all re-exported here; the ``[mcp]`` one in
:mod:`harnessmem.settings.mcp`.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from harnessmem.settings._section import Seconds, Section, parse_duration
from harnessmem.settings.context import (
    DEFAULT_EXCLUDED_TOOLS,
    CompactionSettings,
    ContextSettings,
    EvictionSettings,
    TruncateArgsSettings,
)
from harnessmem.settings.memory import ConsolidationSettings, FlushSettings, MaintenanceSettings
from harnessmem.settings.observability import AuditSettings, TelemetrySettings

__all__ = [
    "DEFAULT_EXCLUDED_TOOLS",
    "AuditSettings",
    "CompactionSettings",
    "ConsolidationSettings",
    "ContextSettings",
    "EvictionSettings",
    "FlushSettings",
    "IndexSettings",
    "MaintenanceSettings",
    "ModelBudgetSettings",
    "ModelPurposeSettings",
    "ModelSettings",
    "PluginSettings",
    "Seconds",
    "TelemetrySettings",
    "ToolsSettings",
    "TransferSettings",
    "TruncateArgsSettings",
    "WorkspaceSettings",
    "parse_duration",
]


class WorkspaceSettings(Section):
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


class IndexSettings(Section):
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


class ModelPurposeSettings(Section):
    """A per-purpose override of the model settings."""

    backend: str | None = Field(None, description="Backend for this purpose; unset: model.backend.")
    name: str | None = Field(None, description="Model name for this purpose; unset: model.name.")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Options merged over model.options for this purpose."
    )
    max_tokens: int | None = Field(
        None, gt=0, description="Answer length cap for this purpose; unset: model.max_tokens."
    )


class ModelBudgetSettings(Section):
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


class ModelSettings(Section):
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


class TransferSettings(Section):
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


class ToolsSettings(Section):
    """Which optional agent tools a session offers (the four memory tools always are)."""

    forget: bool = Field(
        False,
        description=(
            "Offer the memory_forget tool: the agent may remove facts from memory for good "
            "(a few at a time, never the session logs). Off by default: forgetting cannot "
            "be undone."
        ),
    )


class PluginSettings(Section):
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
