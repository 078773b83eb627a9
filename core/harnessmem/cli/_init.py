"""``harnessmem init``: a workspace and a commented ``harnessmem.toml``.

The config file is generated from :class:`~harnessmem.settings.HarnessSettings`: every
section and setting with its description and default, commented out, so it can never
drift from the code (a test uncomments every line and loads the result).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import click

from harnessmem import layout
from harnessmem.cli._common import (
    EXIT_FAILED,
    CommandError,
    check_reachable,
    common_options,
    echo_json,
    invoked_as,
    load_settings,
    shown_url,
)

#: Values shown for settings that are unset by default, so that uncommenting gives an example.
_EXAMPLES: dict[str, Any] = {
    "workspace.index_path": "/var/cache/harnessmem/memory_index.db",
    "model.backend": "litellm",
    "model.name": "openai/gpt-4o-mini",
    "model.summary.name": "openai/gpt-4o-mini",
    "model.flush.name": "openai/gpt-4o-mini",
    "model.consolidation.name": "openai/gpt-4o",
    "model.budget.daily_tokens": 2_000_000,
    "model.budget.daily_cost": 1.0,
    "index.refresh_interval": "30s",
}


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any, duration: bool = False) -> str:
    if duration and isinstance(value, int | float) and value:
        for unit, seconds in (("d", 86_400), ("h", 3_600), ("m", 60)):
            if value % seconds == 0:
                return json.dumps(f"{int(value // seconds)}{unit}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:_}" if isinstance(value, int) and abs(value) >= 10_000 else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(key)} = {_toml_value(item)}" for key, item in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _is_duration(field: Any) -> bool:
    from harnessmem.settings import parse_duration

    return any(getattr(item, "func", None) is parse_duration for item in field.metadata)


def _model_of(annotation: Any) -> Any:
    from pydantic import BaseModel

    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _section(
    lines: list[str], dotted: str, model: Any, instance: Any, values: dict[str, Any]
) -> None:
    """Append ``[dotted]`` and its settings (then its sub-tables) to ``lines``; the dotted
    settings in ``values`` are written set to their value, the others commented out."""
    doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
    table = f"[{dotted}]"
    if dotted == "workspace":
        lines += ["", f"# {doc}", table]
    else:
        lines += ["", f"# {doc}", f"# {table}"]
    nested: list[tuple[str, Any, Any]] = []
    for name, field in model.model_fields.items():
        key = f"{dotted}.{name}"
        value = (
            getattr(instance, name)
            if instance is not None
            else field.get_default(call_default_factory=True)
        )
        sub = _model_of(field.annotation)
        if sub is not None:
            nested.append((key, sub, value))
            continue
        lines.extend(
            textwrap.wrap(field.description or "", 88, initial_indent="# ", subsequent_indent="# ")
            or ["#"]
        )
        if key in values:
            lines.append(f"{name} = {_toml_value(values[key])}")
            continue
        if value is None:
            if key not in _EXAMPLES:
                lines.append(f"# {name}: unset by default")
                continue
            lines.append(
                f"# {name} = {_toml_value(_EXAMPLES[key])}  # an example; unset by default"
            )
            continue
        lines.append(f"# {name} = {_toml_value(value, _is_duration(field))}")
    for key, sub, value in nested:
        _section(lines, key, sub, value, values)


def render_config(
    workspace_url: str = "./workspace", *, storage_options: dict[str, Any] | None = None
) -> str:
    """The commented ``harnessmem.toml``: ``workspace.url`` (and ``storage_options``, when
    given) set, every other setting shown commented out with its description and default."""
    from harnessmem.settings import HarnessSettings

    lines = [
        "# harnessmem settings. workspace.url is set (the folder init made); every other",
        "# setting is listed with its default, commented out: uncomment a line to change",
        "# it. Environment variables override this file:",
        "# HARNESSMEM_<SECTION>__<KEY>, e.g. HARNESSMEM_COMPACTION__TRIGGER_MESSAGES=30.",
        "# Reference: docs/configuration.md. Check it with: harnessmem config validate",
    ]
    values: dict[str, Any] = {"workspace.url": workspace_url}
    if storage_options:
        values["workspace.storage_options"] = storage_options
    for name, field in HarnessSettings.model_fields.items():
        model = _model_of(field.annotation)
        _section(lines, name, model, None, values)
    return "\n".join(lines) + "\n"


def _storage_from_file(settings: Any, overrides: dict[str, Any]) -> dict[str, Any] | None:
    """``workspace.storage_options`` when a config file set them: the file init writes
    needs them to reach the workspace. Options from the environment stay there."""
    from harnessmem.settings import source_finder

    source = source_finder(settings, overrides)("workspace.storage_options")
    if source in ("default", "argument") or source.startswith("env "):
        return None
    return dict(settings.workspace.storage_options) or None


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@common_options()
@click.option("--force", is_flag=True, help="Overwrite an existing harnessmem.toml.")
def init_command(
    directory: str, config: str | None, workspace: str | None, as_json: bool, force: bool
) -> None:
    """Create a workspace and a commented harnessmem.toml in DIRECTORY (default: here).

    The workspace is DIRECTORY/workspace unless -w (or workspace.url of the settings) names
    another folder or a URL such as s3://bucket/agent; it is opened with the settings of
    -c, $HARNESSMEM_CONFIG or the environment (workspace.storage_options for an
    S3-compatible store). Run harnessmem from DIRECTORY afterwards: it reads
    ./harnessmem.toml from the current folder.
    """
    from harnessmem.plugins import check_settings
    from harnessmem.workspace import Workspace

    root = Path(directory)
    written = root / "harnessmem.toml"
    if written.exists() and not force:
        raise CommandError(
            f"{written} already exists",
            hint="pass --force to overwrite it, or edit it (harnessmem config validate checks it)",
            code=EXIT_FAILED,
        )
    settings, overrides = load_settings(config, workspace)
    check_settings(settings, overrides=overrides)
    url = settings.workspace.url
    remote = "://" in url or "::" in url
    # A relative folder in the config is relative to where harnessmem runs: DIRECTORY.
    target = url if remote or os.path.isabs(url) else str(root / url)
    where = Workspace.open(target, settings.workspace.storage_options)
    check_reachable(where)
    # A folder every later command sees; on an object store the prefix would else hold
    # nothing, and the commands that only read would find no workspace there.
    where.make_folder(layout.MEMORY_DIR)
    root.mkdir(parents=True, exist_ok=True)
    storage = _storage_from_file(settings, overrides)
    written.write_text(render_config(url, storage_options=storage), encoding="utf-8")
    if as_json:
        echo_json({"config": str(written), "workspace": where.url, "workspace_url": url})
        return
    click.echo(f"created {written}  (the workspace set; every other setting, commented out)")
    click.echo(f"created workspace {shown_url(where.url)}")
    go = "" if root.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(directory)} && "
    click.echo("next:")
    command = shlex.quote(invoked_as(absolute=bool(go)))
    steps = [
        (f"{command} status", "what the workspace holds"),
        (f"{command} replay --example", "feed an example conversation through it"),
        (f"{command} config show", "the settings in effect, and where each comes from"),
    ]
    width = max(len(go + command) for command, _ in steps)
    for command, what in steps:
        click.echo(f"  {(go + command).ljust(width)}   {what}")
