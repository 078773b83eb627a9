"""Plugin manager factory, entry-point discovery, backend registries, and the hook facade.

Four entry-point groups:

- ``harnessmem.plugins``: hook plugins (a module, a class instantiated with no
  arguments, or an object); all load unless blocked by ``plugins.disable``,
  ``plugins.only`` or ``plugins.autoload = false`` (which keeps only the
  plugins of the harnessmem distribution itself).
- ``harnessmem.index`` and ``harnessmem.model``: backend classes, imported only
  when the configuration picks their name.
- ``harnessmem.storage``: workspace stores by protocol, imported only when a workspace
  URL has that protocol (see :mod:`harnessmem.workspace.store`).

The hook facade, :class:`HookFacade`, is in :mod:`harnessmem.plugins.facade`.

Nothing here is global but a cache of the installed entry points (kept until a folder on
``sys.path`` changes): each harness builds its own manager and registries.
:class:`HookFacade` is the only code that calls ``pm.hook``.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import pluggy

from harnessmem import hookspecs
from harnessmem.errors import BackendNotFound, ConfigError, PluginError
from harnessmem.plugins._check import check_settings, settings_problems
from harnessmem.plugins._known import KNOWN_BACKENDS
from harnessmem.plugins.facade import HookFacade
from harnessmem.settings.validation import parse_options

if TYPE_CHECKING:
    from pydantic import BaseModel

    from harnessmem.backends.base import IndexBackend, ModelBackend
    from harnessmem.settings import HarnessSettings, PluginSettings

__all__ = [
    "BackendRegistry",
    "HookFacade",
    "PluginInfo",
    "check_plugin_names",
    "check_settings",
    "hookimpl",
    "installed_plugins",
    "make_plugin_manager",
    "plugin_options",
    "settings_problems",
]

logger = logging.getLogger("harnessmem.plugins")

PLUGIN_GROUP = "harnessmem.plugins"
INDEX_GROUP = "harnessmem.index"
MODEL_GROUP = "harnessmem.model"
STORAGE_GROUP = "harnessmem.storage"
CORE_DISTRIBUTION = "harnessmem"

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)

B = TypeVar("B")
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


#: Entry points by group, for one state of the folders on ``sys.path`` (see _path_stamp).
_ENTRY_POINTS: dict[tuple[str, tuple[tuple[str, int], ...]], list[metadata.EntryPoint]] = {}
#: A folder modified closer to now than this may change again within its timestamp's tick.
_SETTLED_NS = 2_000_000_000


def _path_stamp() -> tuple[tuple[str, int], ...] | None:
    """The modification times of the ``sys.path`` folders; None if one changed just now.

    Installing or removing a distribution changes the folder that holds its metadata,
    so the stamp changes with what ``importlib.metadata`` would find. A folder modified
    within ``_SETTLED_NS`` may be modified again without its time moving (timestamps
    tick every few milliseconds): then nothing is cached.
    """
    stamp = []
    now = time.time_ns()
    for folder in sys.path:
        try:
            mtime = os.stat(folder or ".").st_mtime_ns
        except OSError:
            mtime = -1
        if now - mtime < _SETTLED_NS:
            return None
        stamp.append((folder, mtime))
    return tuple(stamp)


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group`` by name.

    Scanning every distribution's metadata costs milliseconds per call (~4-12 ms with a
    hundred packages installed), paid by each harness that opens a backend; the result
    is kept per process until a folder on ``sys.path`` changes.
    """
    stamp = _path_stamp()
    found = _ENTRY_POINTS.get((group, stamp)) if stamp is not None else None
    if found is None:
        found = sorted(metadata.entry_points(group=group), key=lambda ep: ep.name)
        if stamp is not None:
            if len(_ENTRY_POINTS) > 16:  # sys.path changed; old stamps will not come back
                _ENTRY_POINTS.clear()
            _ENTRY_POINTS[(group, stamp)] = found
    return list(found)


def _dist_of(entry_point: metadata.EntryPoint) -> tuple[str, str]:
    dist = entry_point.dist
    if dist is None:
        return "?", "?"
    return dist.metadata["Name"] or dist.name, dist.version


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
    for entry_point in _entry_points(PLUGIN_GROUP):
        dist_name, version = _dist_of(entry_point)
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
    known = {ep.name for ep in _entry_points(PLUGIN_GROUP)}
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
    for entry_point in _entry_points(PLUGIN_GROUP):
        dist_name, version = _dist_of(entry_point)
        status = _plugin_status(entry_point.name, dist_name, settings)
        rows.append(
            PluginInfo("plugin", entry_point.name, entry_point.value, dist_name, version, status)
        )
    for kind, group in (("index", INDEX_GROUP), ("model", MODEL_GROUP), ("storage", STORAGE_GROUP)):
        for entry_point in _entry_points(group):
            dist_name, version = _dist_of(entry_point)
            rows.append(PluginInfo(kind, entry_point.name, entry_point.value, dist_name, version))
    return rows


class BackendRegistry(Generic[B]):
    """Name → backend class, resolved lazily from an entry-point group.

    ``register`` adds a class in-process (for tests and embedding); entry points
    are imported only by ``load``.
    """

    def __init__(self, kind: str, group: str, base: type[Any]) -> None:
        self.kind = kind
        self.group = group
        self.base = base
        self._local: dict[str, type[B]] = {}

    def register(self, name: str, cls: type[B]) -> None:
        self._local[name] = cls

    def available(self) -> dict[str, str]:
        """Installed names with the distribution that provides each."""
        found = dict.fromkeys(self._local, "registered in-process")
        for entry_point in _entry_points(self.group):
            dist_name, version = _dist_of(entry_point)
            found.setdefault(entry_point.name, f"{dist_name} {version}")
        return found

    def sources(self) -> dict[str, str]:
        """Installed names with what each loads and from where (nothing is imported)."""
        found = {
            name: f"{cls.__module__}:{cls.__qualname__}, registered in-process"
            for name, cls in self._local.items()
        }
        for entry_point in _entry_points(self.group):
            dist_name, version = _dist_of(entry_point)
            found.setdefault(entry_point.name, f"{entry_point.value}, {dist_name} {version}")
        return found

    def load(self, name: str, *, setting: str | None = None) -> type[B]:
        """The class registered as ``name``; ``setting`` (default ``<kind>.backend``) is the
        dotted setting that named it, for the hint of a ``BackendNotFound``."""
        setting = setting or f"{self.kind}.backend"
        cls = self.find(name, setting=setting)
        if cls is None:
            raise self._not_found(name, setting)
        return cls

    def find(self, name: str, *, setting: str | None = None) -> type[B] | None:
        """:meth:`load`, but None when nothing is registered as ``name``; a registered
        class that fails to import, or is no subclass of the base, still raises."""
        if name in self._local:
            return self._local[name]
        setting = setting or f"{self.kind}.backend"
        matches = [ep for ep in _entry_points(self.group) if ep.name == name]
        if not matches:
            return None
        entry_point = matches[0]
        try:
            cls = entry_point.load()
        except Exception as exc:
            dist_name, version = _dist_of(entry_point)
            raise PluginError(
                f"{self.kind} backend {name!r} ({entry_point.value}, {dist_name} {version}) "
                f"failed to import: {type(exc).__name__}: {exc}",
                hint=f"reinstall {dist_name}, or pick another {setting}",
            ) from exc
        if not (inspect.isclass(cls) and issubclass(cls, self.base)):
            # Reading the distribution's metadata costs a millisecond: only for the message.
            dist_name, _ = _dist_of(entry_point)
            raise PluginError(
                f"{self.kind} backend {name!r} from {dist_name} is {cls!r}, "
                f"not a subclass of {getattr(self.base, '__name__', self.base)}"
            )
        return cast("type[B]", cls)

    def _not_found(self, name: str, setting: str) -> BackendNotFound:
        installed = self.available()
        listing = ", ".join(f"{n} ({d})" for n, d in sorted(installed.items())) or "none"
        known = KNOWN_BACKENDS.get(self.kind, {})
        if name in known:
            # A name we know comes from a distribution that is not installed: say which.
            source = known[name]
            return BackendNotFound(
                f"no {self.kind} backend {name!r}: it comes with {source.distribution} "
                f"({source.about}), which is not installed; installed: {listing}",
                hint=f"{source.install}, or set {setting} to an installed name",
            )
        message = f"no {self.kind} backend {name!r}; installed: {listing}"
        close = difflib.get_close_matches(name, [*installed, *known], n=1, cutoff=0.5)
        if close and close[0] in installed:
            message += f"; did you mean {close[0]!r}?"
        elif close:
            message += f"; did you mean {close[0]!r} ({known[close[0]].install})?"
        return BackendNotFound(
            message,
            hint=(
                f"set {setting} to an installed name, or install the distribution "
                f"that provides {name!r} (its entry point goes in the {self.group!r} group)"
            ),
        )


def index_registry() -> BackendRegistry[IndexBackend]:
    from harnessmem.backends.base import IndexBackend

    return BackendRegistry[IndexBackend]("index", INDEX_GROUP, IndexBackend)


def model_registry() -> BackendRegistry[ModelBackend]:
    from harnessmem.backends.base import ModelBackend

    return BackendRegistry[ModelBackend]("model", MODEL_GROUP, ModelBackend)
