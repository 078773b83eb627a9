"""What settings name, checked against what is installed: backends, their options, plugins.

pydantic checks the shape of :class:`~harnessmem.settings.HarnessSettings`; what the
settings *name* only the installed distributions know: the index and model backends and
the keys of their ``options``, the library the workspace's store needs (s3fs for
``s3://``), and the hook plugins in ``plugins.disable``,
``plugins.only`` and ``plugins.settings``. :func:`check_settings` checks all of that
without opening anything (it imports the backend classes the settings pick, no hook
plugin), so that a harness, and every command, fails before a workspace is created.
:func:`settings_problems` also loads the hook plugins and lets each validate its own
options, as a harness does when it starts (``harnessmem config validate``).

Every problem is one line that starts with the dotted setting, with the source that set
it (``[from harnessmem.toml]``) where it was not a default.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from harnessmem.errors import BackendNotFound, ConfigError, HarnessMemError, PluginError
from harnessmem.settings import source_finder

if TYPE_CHECKING:
    from harnessmem.plugins import BackendRegistry
    from harnessmem.settings import HarnessSettings

__all__ = ["check_settings", "settings_problems"]

_SETTING = re.compile(r"^([a-z_][\w.]*?)(?:\[\d+\])?: ")
_SUGGESTION = "; did you mean "
_SEVERAL_HINTS = (
    "harnessmem config validate lists every problem; harnessmem plugins lists what is installed"
)


def _load(registry: BackendRegistry[Any], name: str, setting: str) -> Any:
    """``registry.load(name)``; a ``BackendNotFound`` names the setting that gave the name."""
    try:
        return registry.load(name, setting=setting)
    except BackendNotFound as exc:
        raise BackendNotFound(f"{setting}: {exc.message}", hint=exc.hint) from exc


def _index_check(settings: HarnessSettings) -> None:
    from harnessmem.plugins import index_registry

    cls = _load(index_registry(), settings.index.backend, "index.backend")
    cls.parse_options(settings.index.options, where="index.options")


def _storage_check(settings: HarnessSettings) -> None:
    """A workspace URL whose store needs a library that is not installed (s3fs for s3://)."""
    from harnessmem.plugins.known import missing_storage

    missing = missing_storage(settings.workspace.url)
    if missing is not None:
        protocol, needs = missing
        raise BackendNotFound(
            f"workspace.url: {protocol}:// workspaces need {needs.module} "
            f"({needs.about}), which is not installed",
            hint=f"{needs.install}, or point workspace.url at another store",
        )


def _model_checks(settings: HarnessSettings) -> list[Callable[[], None]]:
    """One check per distinct route of the purposes: the backend, then its options."""
    from harnessmem.plugins import model_registry
    from harnessmem.settings.routes import PURPOSES, ModelRoute, model_route

    def check(route: ModelRoute) -> None:
        cls = _load(model_registry(), route.backend, route.backend_setting)
        cls.parse_options(route.options, where=f"{route.where}.options")

    routes = [model_route(settings, purpose) for purpose in PURPOSES]
    distinct = {
        json.dumps([r.backend, r.where, r.options], sort_keys=True, default=str): r for r in routes
    }
    return [partial(check, route) for route in distinct.values()]


def _static_checks(
    settings: HarnessSettings, plugins: Sequence[object], *, index: bool, model: bool
) -> list[Callable[[], None]]:
    from harnessmem.plugins import check_plugin_names

    checks: list[Callable[[], None]] = [partial(_storage_check, settings)]
    if index:
        checks.append(partial(_index_check, settings))
    if model:
        checks.extend(_model_checks(settings))
    checks.append(partial(check_plugin_names, settings.plugins, plugins))
    checks.append(partial(_telemetry_check, settings))
    return checks


#: What each telemetry setting needs installed: (module, distribution, extra).
_TELEMETRY_NEEDS = {
    "api": ("opentelemetry.trace", "opentelemetry-api", "otel"),
    "sdk": ("opentelemetry.sdk.trace", "opentelemetry-sdk", "otel-export"),
    "otlp": (
        "opentelemetry.exporter.otlp.proto.http",
        "opentelemetry-exporter-otlp-proto-http",
        "otel-export",
    ),
}


def _telemetry_check(settings: HarnessSettings) -> None:
    """``telemetry.enabled`` without the OpenTelemetry API, or ``telemetry.exporter``
    without the SDK or its exporter: told before anything is opened."""
    telemetry = settings.telemetry
    if not telemetry.enabled:
        return
    needed = [("telemetry.enabled: telemetry", "api")]
    if telemetry.exporter != "none":
        needed.append((f"telemetry.exporter: {telemetry.exporter!r}", "sdk"))
    if telemetry.exporter == "otlp":
        needed.append(("telemetry.exporter: 'otlp'", "otlp"))
    for setting, need in needed:
        module, distribution, extra = _TELEMETRY_NEEDS[need]
        if not _importable(module):
            raise ConfigError(
                f"{setting} needs {distribution}, which is not installed",
                hint=f"pip install 'harnessmem[{extra}]', or turn telemetry.enabled off",
            )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a None in sys.modules
        return False


def _run(checks: Sequence[Callable[[], None]]) -> list[HarnessMemError]:
    errors: list[HarnessMemError] = []
    for check in checks:
        try:
            check()
        except (ConfigError, PluginError) as exc:
            errors.append(exc)
    return errors


def _report(
    errors: Sequence[HarnessMemError], settings: HarnessSettings, overrides: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """One line per problem, each with the source of its setting; and the hints, once each."""
    source_of = source_finder(settings, overrides)

    def with_source(line: str) -> str:
        match = _SETTING.match(line)
        source = source_of(match.group(1)) if match and "[from " not in line else "default"
        if source == "default":
            return line
        head, found, tail = line.partition(_SUGGESTION)
        return f"{head} [from {source}]{found}{tail}"

    raw = [
        line
        for error in errors
        for line in (
            error.problems if isinstance(error, ConfigError) and error.problems else [error.message]
        )
    ]
    hints = list(dict.fromkeys(error.hint for error in errors if error.hint))
    return list(dict.fromkeys(map(with_source, raw))), hints


def check_settings(
    settings: HarnessSettings,
    plugins: Sequence[object] = (),
    *,
    index: bool = True,
    model: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> None:
    """Raise when a backend, a backend option or a plugin name of ``settings`` is unknown.

    ``plugins`` are plugin objects passed in code (their names are known plugins too);
    ``index=False`` / ``model=False`` skip the backends a caller passes as instances;
    ``overrides`` are the settings given as arguments (they are no file's). Every
    problem found is reported at once, one line each; a lone problem keeps its kind of
    error (an unknown backend stays a ``BackendNotFound``). Opens nothing and loads no
    hook plugin.
    """
    errors = _run(_static_checks(settings, plugins, index=index, model=model))
    if not errors:
        return
    lines, hints = _report(errors, settings, overrides or {})
    hint = hints[0] if len(hints) == 1 else (_SEVERAL_HINTS if hints else None)
    first = errors[0]
    if len(lines) == 1 and not isinstance(first, ConfigError):
        raise type(first)(lines[0], hint=hint) from first
    message = (
        lines[0]
        if len(lines) == 1
        else (f"invalid harnessmem settings ({len(lines)} problems):\n  " + "\n  ".join(lines))
    )
    raise ConfigError(message, hint=hint, problems=lines) from first


def settings_problems(
    settings: HarnessSettings, overrides: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """Every problem a harness would meet with ``settings`` as it starts, and the hints.

    The checks of :func:`check_settings`; then the hook plugins are loaded and
    configured, so that each validates its ``plugins.settings``. Nothing is opened.
    """
    from harnessmem.plugins import HookFacade, make_plugin_manager

    def configure() -> None:
        HookFacade(make_plugin_manager(settings.plugins)).configure(settings)

    errors = _run([*_static_checks(settings, (), index=True, model=True), configure])
    return _report(errors, settings, overrides or {}) if errors else ([], [])
