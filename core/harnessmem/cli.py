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


@main.command("maintain")
@_config_option
@_workspace_option
@_json_option
@click.option(
    "--force", is_flag=True, help="Run steps that already ran within maintenance.min_gap."
)
def maintain_command(config: str | None, workspace: str | None, as_json: bool, force: bool) -> None:
    """Run one maintenance tick now and print its report (for cron or a Kubernetes CronJob).

    Exits 1 when a step failed; skipped and unavailable steps are not failures, and a tick
    skipped because another process holds the maintenance lease exits 0.
    """
    from harnessmem.harness import MemoryHarness

    with _errors_as_messages():
        settings, _ = _load_settings(config, workspace)
        # This process runs its one tick itself; a scheduler thread would only idle.
        settings.maintenance.enabled = False
        with MemoryHarness(settings) as harness:
            report = harness.maintain(force=force)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        click.echo(str(report))
    if not report.ok:
        sys.exit(1)


@main.command("usage")
@_config_option
@_workspace_option
@_json_option
@click.option("--days", type=click.IntRange(min=1), default=None, help="Only the last N days.")
def usage_command(
    config: str | None, workspace: str | None, as_json: bool, days: int | None
) -> None:
    """Show model calls, tokens and cost per purpose and model, and the daily budget."""
    import time

    from harnessmem.usage import UsageLedger
    from harnessmem.workspace import Workspace

    with _errors_as_messages():
        settings, _ = _load_settings(config, workspace)
        where = Workspace.open(settings.workspace.url, settings.workspace.storage_options)
        ledger = UsageLedger(
            where,
            clock=time.time,
            timezone=settings.workspace.timezone,
            budget=settings.model.budget,
        )
        report = ledger.report(days=days)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    if not report.purposes:
        click.echo(f"no model calls recorded in {where.url}")
        return
    rows = []
    for purpose, models in sorted(report.purposes.items()):
        for model, totals in sorted(models.items()):
            cost = f"${totals.cost:.4f}" + (" +unpriced" if totals.unpriced else "")
            rows.append(
                [
                    purpose,
                    model,
                    str(totals.calls),
                    str(totals.failures),
                    f"{totals.prompt_tokens:,}",
                    f"{totals.completion_tokens:,}",
                    cost,
                ]
            )
    span = f"{report.days[0]} to {report.days[-1]}" if report.days else "no days"
    _print_table(
        f"model usage, {span}",
        ["purpose", "model", "calls", "failed", "prompt tokens", "completion tokens", "cost"],
        rows,
    )
    if report.fallbacks:
        click.echo(f"{report.fallbacks} calls answered offline because the budget was reached")
    if report.budget is not None:
        state = "reached" if report.budget.exceeded else "within"
        click.echo(f"daily budget {state}: {report.budget.describe()}")


def _quiet_harness(config: str | None, workspace: str | None) -> Any:
    """A harness for one command: no maintenance thread (it would only idle)."""
    from harnessmem.harness import MemoryHarness

    settings, _ = _load_settings(config, workspace)
    settings.maintenance.enabled = False
    return MemoryHarness(settings)


@main.group("index")
def index_group() -> None:
    """Build and inspect the full-text index."""


@index_group.command("rebuild")
@_config_option
@_workspace_option
@_json_option
def index_rebuild(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Empty the index and index every memory file and session log again."""
    from dataclasses import asdict

    with _errors_as_messages(), _quiet_harness(config, workspace) as harness:
        result = harness.reindex(full=True)
        stats = harness.index.stats()
        where = harness.index_path
    if as_json:
        data = {"result": asdict(result), "files": stats.files, "entries": stats.entries}
        click.echo(json.dumps({**data, "details": dict(stats.details)}, indent=2, default=str))
        return
    click.echo(f"index {where}: {result}")


@index_group.command("status")
@_config_option
@_workspace_option
@_json_option
def index_status(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Show what the index holds (files and entries per source), without syncing it."""
    with _errors_as_messages(), _quiet_harness(config, workspace) as harness:
        stats = harness.index.stats()
    data = {"files": stats.files, "entries": stats.entries, **dict(stats.details)}
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        click.echo(f"{key}: {value}")


@main.command("search")
@click.argument("query")
@_config_option
@_workspace_option
@_json_option
@click.option("--limit", "-n", type=click.IntRange(min=1), default=10, help="Most hits to show.")
@click.option(
    "--mode",
    type=click.Choice(["any", "all", "phrase"]),
    default="any",
    help="any: ranked, any word; all: every word; phrase: the words in order.",
)
@click.option("--sessions", is_flag=True, help="Search the session logs instead of memory.")
@click.option("--session-id", default=None, help="Search one session's log (implies --sessions).")
def search_command(
    query: str,
    config: str | None,
    workspace: str | None,
    as_json: bool,
    limit: int,
    mode: str,
    sessions: bool,
    session_id: str | None,
) -> None:
    """Search memory (or session logs) for QUERY, as the memory_search tool does."""
    from dataclasses import asdict

    from harnessmem.tools import format_hits

    source = "sessions" if sessions or session_id else "memory"
    with _errors_as_messages(), _quiet_harness(config, workspace) as harness:
        hits = harness.search(query, limit, mode=mode, source=source, session_id=session_id)
    if as_json:
        click.echo(json.dumps([asdict(hit) for hit in hits], indent=2, ensure_ascii=False))
        return
    what = "messages" if source == "sessions" else "memories"
    click.echo(format_hits(hits, query, what=what, hint=""))


@main.command("get")
@click.argument("path")
@_config_option
@_workspace_option
@_json_option
@click.option("--start-line", "-s", type=click.IntRange(min=1), default=1, help="First line.")
@click.option("--lines", "-n", type=click.IntRange(min=1), default=None, help="How many lines.")
def get_command(
    path: str,
    config: str | None,
    workspace: str | None,
    as_json: bool,
    start_line: int,
    lines: int | None,
) -> None:
    """Print lines of a memory file, session log or evicted result (PATH in the workspace)."""
    with _errors_as_messages(), _quiet_harness(config, workspace) as harness:
        try:
            text = harness.get(path, start_line=start_line, lines=lines)
        except FileNotFoundError:
            click.echo(f"error: {path} does not exist in {harness.workspace.url}", err=True)
            sys.exit(1)
    if as_json:
        data = {"path": path, "start_line": start_line, "text": text}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    click.echo(text, nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()
