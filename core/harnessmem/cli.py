"""The ``harnessmem`` command line.

Commands import what they need when they run, so ``harnessmem --help`` stays fast.
Errors of the ``HarnessMemError`` family print as one or two lines, without a
traceback, and exit with status 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def _errors_as_messages() -> Iterator[None]:
    from harnessmem.errors import HarnessMemError

    try:
        yield
    except HarnessMemError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table on a terminal; plain aligned columns (never cut) when piped."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    for line in [columns, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _config_option(func: F) -> F:
    return click.option(
        "--config",
        "-c",
        "config",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config file (TOML or YAML); default $HARNESSMEM_CONFIG or ./harnessmem.toml.",
    )(func)


def _workspace_option(func: F) -> F:
    return click.option(
        "--workspace",
        "-w",
        "workspace",
        default=None,
        help="Workspace folder or fsspec URL; default: workspace.url of the settings.",
    )(func)


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print data as JSON.")(func)


def _load_settings(config: str | None, workspace: str | None) -> Any:
    from harnessmem.settings import HarnessSettings

    overrides: dict[str, Any] = {}
    if workspace is not None:
        overrides["workspace"] = {"url": workspace}
    return HarnessSettings.load(config, **overrides), overrides


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="harnessmem", prog_name="harnessmem")
def main() -> None:
    """harnessmem: memory that lasts across sessions for LLM agents."""


@main.group()
def config() -> None:
    """Show or check settings."""


@config.command("show")
@_config_option
@_workspace_option
@_json_option
def config_show(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Print the effective settings and where each value came from."""
    from harnessmem.settings import settings_leaves

    with _errors_as_messages():
        settings, overrides = _load_settings(config, workspace)
        sources = settings.sources(overrides)
        rows = [(name, value, sources[name]) for name, value in settings_leaves(settings)]
    if as_json:
        data = [{"setting": n, "value": v, "source": s} for n, v, s in rows]
        click.echo(json.dumps(data, indent=2, default=str))
        return
    _print_table(
        "harnessmem settings",
        ["setting", "value", "source"],
        [[n, json.dumps(_redact(n, v), default=str), s] for n, v, s in rows],
    )


_SECRET_WORDS = ("key", "secret", "token", "password")


def _redact(name: str, value: Any) -> Any:
    """Hide credentials inside option tables when printing settings."""
    if isinstance(value, dict):
        return {
            k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) and v else _redact(k, v))
            for k, v in value.items()
        }
    return value


@config.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
def config_validate(file: str) -> None:
    """Check FILE (with the environment applied); one line per problem, exit 1 on any."""
    from harnessmem.errors import ConfigError
    from harnessmem.settings import HarnessSettings

    try:
        HarnessSettings.load(file)
    except ConfigError as exc:
        for line in exc.problems or [exc.message]:
            click.echo(f"{file}: {line}", err=True)
        sys.exit(1)
    click.echo(f"{file}: ok")


@main.command("plugins")
@_config_option
@_json_option
def plugins_command(config: str | None, as_json: bool) -> None:
    """List installed hook plugins and backends with their distribution and version."""
    from harnessmem.plugins import installed_plugins

    with _errors_as_messages():
        settings, _ = _load_settings(config, None)
        rows = installed_plugins(settings.plugins)
    if as_json:
        click.echo(json.dumps([row.__dict__ for row in rows], indent=2))
        return
    if not rows:
        click.echo("no plugins or backends installed")
        return
    _print_table(
        "harnessmem plugins and backends",
        ["kind", "name", "distribution", "version", "status", "object"],
        [[r.kind, r.name, r.distribution, r.version, r.status, r.value] for r in rows],
    )


if __name__ == "__main__":  # pragma: no cover
    main()
