"""Where settings come from: the config file, the environment, and error messages that say so.

:class:`~harnessmem.settings.HarnessSettings` reads, highest priority first, keyword
arguments, environment variables (``HARNESSMEM_`` prefix, ``__`` between levels), the
config file (:func:`config_file_path`) and the defaults. This module finds and parses
the config file, tells for each setting which of those sources set it (``harnessmem
config show``), and turns a pydantic ``ValidationError`` into a ``ConfigError`` with one
line per problem naming the dotted setting, the bad value and its source. The settings
models themselves live in :mod:`harnessmem.settings`, which imports this module; the
functions here that need the root model import it when called.
"""

from __future__ import annotations

import contextvars
import difflib
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

from harnessmem.errors import ConfigError
from harnessmem.settings.validation import problem_lines

__all__ = [
    "DEFAULT_CONFIG_NAME",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "FileSource",
    "config_file_path",
    "config_override",
    "read_config_file",
    "setting_sources",
    "settings_error",
    "settings_leaves",
    "source_finder",
]

ENV_PREFIX = "HARNESSMEM_"
ENV_DELIMITER = "__"
DEFAULT_CONFIG_NAME = "harnessmem.toml"

#: The config file ``HarnessSettings.load(config=...)`` asked for, while it builds.
config_override: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "harnessmem_config_file", default=None
)


def config_file_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file in effect: ``explicit``, ``$HARNESSMEM_CONFIG``, ``./harnessmem.toml``."""
    if explicit is not None:
        return Path(explicit)
    from_env = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if from_env:
        return Path(from_env)
    default = Path(DEFAULT_CONFIG_NAME)
    return default if default.is_file() else None


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML or YAML config file; errors name the file (and line when known)."""
    if not path.is_file():
        raise ConfigError(
            f"config file {path} not found",
            hint="pass an existing file, or unset HARNESSMEM_CONFIG",
        )
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            with path.open("rb") as handle:
                data: Any = tomllib.load(handle)
        elif suffix in {".yaml", ".yml"}:
            import yaml

            with path.open(encoding="utf-8") as handle:
                data = yaml.safe_load(handle) or {}
        else:
            raise ConfigError(
                f"config file {path}: unknown format {suffix or '(no suffix)'!r}",
                hint="use a .toml, .yaml or .yml file",
            )
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except ImportError as exc:  # pragma: no cover - pyyaml ships with pydantic-settings[yaml]
        raise ConfigError(f"reading {path} needs PyYAML: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("yaml"):
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        raise
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a table of sections")
    return data


class FileSource(PydanticBaseSettingsSource):
    """The config file as a settings source (resolved at load time, not import time)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.path = path
        self.data = read_config_file(path) if path is not None else {}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


def _env_values() -> dict[str, Any]:
    from harnessmem.settings import HarnessSettings

    source = EnvSettingsSource(
        HarnessSettings,
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        case_sensitive=False,
    )
    return source()


def _env_name(dotted: str) -> str:
    return ENV_PREFIX + dotted.upper().replace(".", ENV_DELIMITER)


def _lookup(data: Mapping[str, Any], parts: list[str]) -> bool:
    node: Any = data
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


class _Provenance:
    """Finds which source set a dotted setting; reads env and file once."""

    def __init__(self, overrides: Mapping[str, Any], path: Path | None) -> None:
        self.overrides = overrides
        self.env = _env_values()
        self.path = path
        self.file = read_config_file(path) if path is not None and path.is_file() else {}

    @staticmethod
    def _variable(parts: list[str]) -> str:
        """The variable that set ``parts``: itself, or the table above it given as JSON
        (``HARNESSMEM_INDEX__OPTIONS='{"wal": false}'`` sets ``index.options.wal``)."""
        names = {key.upper() for key in os.environ}
        for end in range(len(parts), 0, -1):
            name = _env_name(".".join(parts[:end]))
            if name in names:
                return name
        return _env_name(".".join(parts))

    def source_of(self, dotted: str) -> str:
        parts = dotted.split(".")
        if _lookup(self.overrides, parts):
            return "argument"
        if _lookup(self.env, parts):
            return f"env {self._variable(parts)}"
        if self.path is not None and _lookup(self.file, parts):
            return str(self.path)
        return "default"


def _leaves(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        dotted = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


def settings_leaves(settings: BaseModel) -> list[tuple[str, Any]]:
    """Every leaf setting as ``(dotted.name, value)``, in declaration order."""
    return list(_leaves(settings))


def setting_sources(
    settings: BaseModel, overrides: Mapping[str, Any], path: Path | None
) -> dict[str, str]:
    """Where each leaf setting came from: argument, env variable, config file or default."""
    provenance = _Provenance(overrides, path)
    return {dotted: provenance.source_of(dotted) for dotted, _ in _leaves(settings)}


def source_finder(settings: Any, overrides: Mapping[str, Any]) -> Callable[[str], str]:
    """``source_of(dotted)`` for ``settings`` (a ``HarnessSettings``): ``argument``, ``env
    <NAME>``, the config file or ``default``; for any depth (``index.options.wal``)."""
    return _Provenance(overrides, settings.config_file).source_of


def _known_names(parts: list[str]) -> list[str]:
    from harnessmem.settings import HarnessSettings

    model: Any = HarnessSettings
    for part in parts:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def settings_error(exc: ValidationError, overrides: Mapping[str, Any]) -> ConfigError:
    """A ``ConfigError`` with one line per problem: dotted path, value, source, suggestion."""
    lines = []
    provenance = _Provenance(overrides, config_override.get() or config_file_path())
    for line, item in zip(problem_lines(exc), exc.errors(include_url=False), strict=True):
        loc = [str(p) for p in item.get("loc", ())]
        dotted = ".".join(loc)
        source = provenance.source_of(dotted) if dotted else "default"
        if source != "default":
            line += f" [from {source}]"
        if item.get("type") == "extra_forbidden" and loc:
            close = difflib.get_close_matches(loc[-1], _known_names(loc[:-1]), n=1)
            if close:
                line += f"; did you mean {'.'.join([*loc[:-1], close[0]])!r}?"
        lines.append(line)
    noun = "problem" if len(lines) == 1 else "problems"
    return ConfigError(
        f"invalid harnessmem settings ({len(lines)} {noun}):\n  " + "\n  ".join(lines),
        problems=lines,
    )
