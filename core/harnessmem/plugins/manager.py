"""The plugin manager: the hook specs, the hook plugins the settings allow, and the ones
passed in code, each harness with a manager of its own.

A hook plugin is found through the ``harnessmem.plugins`` entry-point group
(:mod:`harnessmem.plugins.discovery`); all load unless blocked by ``plugins.disable``,
``plugins.only`` or ``plugins.autoload = false`` (which keeps only the plugins of the
harnessmem distribution itself). :class:`~harnessmem.plugins.facade.HookFacade` is the
only code that calls ``pm.hook``.
"""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import pluggy

from harnessmem import hookspecs
from harnessmem.errors import ConfigError, PluginError
from harnessmem.plugins.discovery import (
    CORE_DISTRIBUTION,
    INDEX_GROUP,
    MODEL_GROUP,
    PLUGIN_GROUP,
    STORAGE_GROUP,
    distribution_of,
    entry_points,
)
from harnessmem.settings.validation import parse_options

if TYPE_CHECKING:
    from pydantic import BaseModel

    from harnessmem.settings import HarnessSettings, PluginSettings

logger = logging.getLogger("harnessmem.plugins")

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)

M = TypeVar("M", bound="BaseModel")


@dataclass(frozen=True)
class PluginInfo:
    """An installed plugin or backend, as ``harnessmem plugins`` lists it."""

    kind: str  # "plugin", "index", "model" or "storage"
    name: str
    value: str
    distribution: str
    version: str
    status: str = "installed"


def _plugin_status(name: str, dist_name: str, settings: PluginSettings) -> str:
    if settings.only is not None:
        return "loaded" if name in settings.only else "blocked (plugins.only)"
    if name in settings.disable:
        return "blocked (plugins.disable)"
    if not settings.autoload and dist_name != CORE_DISTRIBUTION:
        return "blocked (plugins.autoload = false)"
    return "loaded"


def make_plugin_manager(
    settings: PluginSettings, extra_plugins: Sequence[object] = ()
) -> pluggy.PluginManager:
    """A fresh manager: the specs, the entry-point plugins ``settings`` allow, ``extra_plugins``.

    Raises ``PluginError`` naming the entry point and its distribution when a
    plugin fails to import or implements a hook that has no spec.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if settings.trace:
        pm.trace.root.setwriter(lambda message: logger.debug("%s", message.rstrip()))
        pm.enable_tracing()
    for entry_point in entry_points(PLUGIN_GROUP):
        dist_name, version = distribution_of(entry_point)
        status = _plugin_status(entry_point.name, dist_name, settings)
        if status != "loaded":
            pm.set_blocked(entry_point.name)
            logger.debug("plugin %s %s", entry_point.name, status)
            continue
        where = f"plugin {entry_point.name!r} ({entry_point.value}, {dist_name} {version})"
        try:
            loaded = entry_point.load()
            plugin = loaded() if inspect.isclass(loaded) else loaded
        except Exception as exc:
            raise PluginError(
                f"{where} failed to load: {type(exc).__name__}: {exc}",
                hint=(
                    f"fix or uninstall {dist_name}, or add {entry_point.name!r} to plugins.disable"
                ),
            ) from exc
        _register(pm, plugin, entry_point.name, where)
    for plugin in extra_plugins:
        _register(pm, plugin, _plugin_name(plugin), f"plugin {plugin!r}")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"{exc} (plugin {exc.plugin!r})",
            hint="every @hookimpl must name a hook of harnessmem.hookspecs",
        ) from exc
    return pm


def _plugin_name(plugin: object) -> str | None:
    """The name a plugin passed in code is registered under (its ``name``, or a module's)."""
    name = getattr(plugin, "name", None) or getattr(plugin, "__name__", None)
    return name if isinstance(name, str) else None


def check_plugin_names(settings: PluginSettings, extra_plugins: Sequence[object] = ()) -> None:
    """Raise ``ConfigError`` when ``plugins.disable``, ``plugins.only`` or the keys of
    ``plugins.settings`` name no installed hook plugin (nor one of ``extra_plugins``).

    A misspelt name would otherwise be ignored: the plugin meant stays loaded, or its
    options unread. One line per unknown name, with the nearest installed name.
    """
    known = {ep.name for ep in entry_points(PLUGIN_GROUP)}
    known.update(name for name in map(_plugin_name, extra_plugins) if name)
    named = [("plugins.disable", name) for name in settings.disable]
    named += [("plugins.only", name) for name in settings.only or ()]
    problems = []
    for where, name in named:
        if name not in known:
            line = f"{where}: no hook plugin {name!r} is installed"
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            problems.append(line + (f"; did you mean {close[0]!r}?" if close else ""))
    for name in settings.settings:
        if name not in known:
            line = f"plugins.settings.{name}: options for no installed hook plugin"
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            suggestion = f"; did you mean 'plugins.settings.{close[0]}'?" if close else ""
            problems.append(line + suggestion)
    if problems:
        raise ConfigError(
            "; ".join(problems),
            hint=f"the installed hook plugins are: {', '.join(sorted(known)) or 'none'} "
            "(harnessmem plugins lists them)",
            problems=problems,
        )


def plugin_options(settings: HarnessSettings, name: str, model: type[M]) -> M:
    """The options of plugin ``name`` (``plugins.settings.<name>``) validated with ``model``.

    For ``harnessmem_configure``. A bad value or an unknown key raises ``ConfigError``
    with one line per problem naming the dotted setting (``plugins.settings.<name>.<key>``),
    a did-you-mean for a misspelt key, and a hint listing the options.
    """
    raw = settings.plugins.settings.get(name, {})
    return parse_options(model, raw, where=f"plugins.settings.{name}", owner=f"plugin {name!r}")


def _register(pm: pluggy.PluginManager, plugin: object, name: str | None, where: str) -> None:
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise PluginError(f"{where} cannot be registered: {exc}") from exc


def installed_plugins(settings: PluginSettings) -> list[PluginInfo]:
    """Every hook plugin and backend the environment provides, without importing them."""
    rows = []
    for entry_point in entry_points(PLUGIN_GROUP):
        dist_name, version = distribution_of(entry_point)
        status = _plugin_status(entry_point.name, dist_name, settings)
        rows.append(
            PluginInfo("plugin", entry_point.name, entry_point.value, dist_name, version, status)
        )
    for kind, group in (("index", INDEX_GROUP), ("model", MODEL_GROUP), ("storage", STORAGE_GROUP)):
        for entry_point in entry_points(group):
            dist_name, version = distribution_of(entry_point)
            rows.append(PluginInfo(kind, entry_point.name, entry_point.value, dist_name, version))
    return rows
