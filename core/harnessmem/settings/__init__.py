"""Settings: every section of harnessmem.toml, its defaults and its checks.

See :mod:`harnessmem.settings.sections`.
"""

from harnessmem.settings._sources import (
    DEFAULT_CONFIG_NAME,
    ENV_DELIMITER,
    ENV_PREFIX,
    config_file_path,
    read_config_file,
    settings_error,
    settings_leaves,
    source_finder,
)
from harnessmem.settings.sections import (
    CompactionSettings,
    ConsolidationSettings,
    ContextSettings,
    EvictionSettings,
    FlushSettings,
    HarnessSettings,
    IndexSettings,
    MaintenanceSettings,
    McpSettings,
    ModelBudgetSettings,
    ModelPurposeSettings,
    ModelSettings,
    PluginSettings,
    Seconds,
    ToolsSettings,
    TruncateArgsSettings,
    WorkspaceSettings,
    parse_duration,
)

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "CompactionSettings",
    "ConsolidationSettings",
    "ContextSettings",
    "EvictionSettings",
    "FlushSettings",
    "HarnessSettings",
    "IndexSettings",
    "MaintenanceSettings",
    "McpSettings",
    "ModelBudgetSettings",
    "ModelPurposeSettings",
    "ModelSettings",
    "PluginSettings",
    "Seconds",
    "ToolsSettings",
    "TruncateArgsSettings",
    "WorkspaceSettings",
    "config_file_path",
    "parse_duration",
    "read_config_file",
    "settings_error",
    "settings_leaves",
    "source_finder",
]
