"""Plugins: the hook plugins of a harness, its backends by name, and the hook facade.

- :mod:`~harnessmem.plugins.discovery`: the installed entry points of the four groups;
- :mod:`~harnessmem.plugins.manager`: each harness's plugin manager, ``hookimpl``, the
  options of a plugin, ``harnessmem plugins``' listing;
- :mod:`~harnessmem.plugins.registry`: index and model backends by name;
- :mod:`~harnessmem.plugins.facade`: :class:`HookFacade`, the only caller of ``pm.hook``.
"""

from harnessmem.plugins._check import check_settings, settings_problems
from harnessmem.plugins.discovery import (
    CORE_DISTRIBUTION,
    INDEX_GROUP,
    MODEL_GROUP,
    PLUGIN_GROUP,
    STORAGE_GROUP,
    refresh_entry_points,
)
from harnessmem.plugins.facade import HookFacade
from harnessmem.plugins.manager import (
    PluginInfo,
    check_plugin_names,
    hookimpl,
    installed_plugins,
    make_plugin_manager,
    plugin_options,
)
from harnessmem.plugins.registry import BackendRegistry, index_registry, model_registry

__all__ = [
    "CORE_DISTRIBUTION",
    "INDEX_GROUP",
    "MODEL_GROUP",
    "PLUGIN_GROUP",
    "STORAGE_GROUP",
    "BackendRegistry",
    "HookFacade",
    "PluginInfo",
    "check_plugin_names",
    "check_settings",
    "hookimpl",
    "index_registry",
    "installed_plugins",
    "make_plugin_manager",
    "model_registry",
    "plugin_options",
    "refresh_entry_points",
    "settings_problems",
]
