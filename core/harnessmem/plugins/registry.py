"""``BackendRegistry``: backend classes by name, from an entry-point group or registered
in-process, imported only when a configuration picks their name."""

from __future__ import annotations

import difflib
import inspect
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from harnessmem.errors import BackendNotFound, PluginError
from harnessmem.plugins.discovery import INDEX_GROUP, MODEL_GROUP, distribution_of, entry_points
from harnessmem.plugins.known import KNOWN_BACKENDS

if TYPE_CHECKING:
    from harnessmem.backends.base import IndexBackend, ModelBackend

B = TypeVar("B")


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
        for entry_point in entry_points(self.group):
            dist_name, version = distribution_of(entry_point)
            found.setdefault(entry_point.name, f"{dist_name} {version}")
        return found

    def sources(self) -> dict[str, str]:
        """Installed names with what each loads and from where (nothing is imported)."""
        found = {
            name: f"{cls.__module__}:{cls.__qualname__}, registered in-process"
            for name, cls in self._local.items()
        }
        for entry_point in entry_points(self.group):
            dist_name, version = distribution_of(entry_point)
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
        matches = [ep for ep in entry_points(self.group) if ep.name == name]
        if not matches:
            return None
        entry_point = matches[0]
        try:
            cls = entry_point.load()
        except Exception as exc:
            dist_name, version = distribution_of(entry_point)
            raise PluginError(
                f"{self.kind} backend {name!r} ({entry_point.value}, {dist_name} {version}) "
                f"failed to import: {type(exc).__name__}: {exc}",
                hint=f"reinstall {dist_name}, or pick another {setting}",
            ) from exc
        if not (inspect.isclass(cls) and issubclass(cls, self.base)):
            # Reading the distribution's metadata costs a millisecond: only for the message.
            dist_name, _ = distribution_of(entry_point)
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
