"""``HarnessSettings``: every section of a harness's settings, and where each value came
from (the sources are in :mod:`harnessmem.settings._sources`, the sections in
:mod:`harnessmem.settings.sections`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from harnessmem.settings._sources import ENV_DELIMITER as ENV_DELIMITER
from harnessmem.settings._sources import ENV_PREFIX as ENV_PREFIX
from harnessmem.settings._sources import FileSource, config_override, setting_sources
from harnessmem.settings._sources import config_file_path as config_file_path
from harnessmem.settings._sources import settings_error as settings_error
from harnessmem.settings.mcp import McpSettings
from harnessmem.settings.sections import (
    AuditSettings,
    CompactionSettings,
    ConsolidationSettings,
    ContextSettings,
    EvictionSettings,
    FlushSettings,
    IndexSettings,
    MaintenanceSettings,
    ModelSettings,
    PluginSettings,
    TelemetrySettings,
    ToolsSettings,
    TransferSettings,
    WorkspaceSettings,
)


class HarnessSettings(BaseSettings):
    """Every setting of a harness; build with ``HarnessSettings.load()`` to read a config file."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        validate_default=True,
        case_sensitive=False,
        # The validators are built on the first settings, not at import (see Section).
        defer_build=True,
    )

    workspace: WorkspaceSettings = Field(
        default_factory=WorkspaceSettings, description="Where the workspace lives."
    )
    index: IndexSettings = Field(default_factory=IndexSettings, description="Full-text index.")
    model: ModelSettings = Field(
        default_factory=ModelSettings, description="Model for summaries, flushes, consolidation."
    )
    compaction: CompactionSettings = Field(
        default_factory=CompactionSettings, description="Conversation compaction."
    )
    flush: FlushSettings = Field(default_factory=FlushSettings, description="Fact extraction.")
    consolidation: ConsolidationSettings = Field(
        default_factory=ConsolidationSettings, description="MEMORY.md consolidation."
    )
    maintenance: MaintenanceSettings = Field(
        default_factory=MaintenanceSettings, description="Background maintenance."
    )
    eviction: EvictionSettings = Field(
        default_factory=EvictionSettings, description="Tool-result eviction."
    )
    context: ContextSettings = Field(
        default_factory=ContextSettings, description="System-prompt memory block."
    )
    transfer: TransferSettings = Field(
        default_factory=TransferSettings, description="Export and import of a workspace."
    )
    tools: ToolsSettings = Field(default_factory=ToolsSettings, description="Optional agent tools.")
    plugins: PluginSettings = Field(default_factory=PluginSettings, description="Hook plugins.")
    mcp: McpSettings = Field(default_factory=McpSettings, description="MCP server.")
    audit: AuditSettings = Field(
        default_factory=AuditSettings, description="The audit log of changes."
    )
    telemetry: TelemetrySettings = Field(
        default_factory=TelemetrySettings, description="OpenTelemetry traces and metrics."
    )
    _config_file: Path | None = PrivateAttr(None)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise settings_error(exc, values) from None
        self._config_file = config_override.get() or config_file_path()

    @property
    def config_file(self) -> Path | None:
        """The config file these settings were read from, if any."""
        return self._config_file

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = config_override.get() or config_file_path()
        return init_settings, env_settings, FileSource(settings_cls, path)

    @classmethod
    def load(
        cls, config: str | os.PathLike[str] | None = None, **overrides: Any
    ) -> HarnessSettings:
        """Build settings from arguments, environment, config file and defaults.

        Raises ``ConfigError`` with one line per problem, each naming the dotted
        setting, the bad value and the source it came from.
        """
        token = config_override.set(config_file_path(config))
        try:
            return cls(**overrides)
        finally:
            config_override.reset(token)

    def sources(self, overrides: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Where each leaf setting came from: argument, env variable, config file or default."""
        return setting_sources(self, overrides or {}, self._config_file)
