"""Settings: every section of harnessmem.toml, its defaults and its checks.

:mod:`~harnessmem.settings.harness` holds ``HarnessSettings``; its sections are in
:mod:`~harnessmem.settings.sections`, :mod:`~harnessmem.settings.context`,
:mod:`~harnessmem.settings.memory` and :mod:`~harnessmem.settings.mcp`;
:mod:`~harnessmem.settings._sources` reads the config file and the environment.
"""

from harnessmem.settings import sections
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
from harnessmem.settings.harness import HarnessSettings
from harnessmem.settings.mcp import McpJwtSettings, McpScopeSettings, McpSettings
from harnessmem.settings.sections import *

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "HarnessSettings",
    "McpJwtSettings",
    "McpScopeSettings",
    "McpSettings",
    "config_file_path",
    "read_config_file",
    "settings_error",
    "settings_leaves",
    "source_finder",
    *sections.__all__,
]
