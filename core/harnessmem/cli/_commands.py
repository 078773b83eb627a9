"""The short commands: config, plugins, maintain, usage, index, search, get, save, consolidate."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from harnessmem.cli._common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INPUT,
    CommandError,
    CommandGroup,
    command_harness,
    common_options,
    echo_json,
    human_size,
    load_settings,
    print_fields,
    print_table,
    redact,
)

if TYPE_CHECKING:
    from harnessmem.backends.base import SearchMode

# ------------------------------------------------------------------------------ config


@click.group("config", cls=CommandGroup)
def config_group() -> None:
    """Show or check settings."""


@config_group.command("show")
@common_options()
def config_show(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Print the effective settings and where each value came from."""
    from harnessmem.settings import settings_leaves

    settings, overrides = load_settings(config, workspace)
    sources = settings.sources(overrides)
    rows = [(name, redact(name, value), sources[name]) for name, value in settings_leaves(settings)]
    if as_json:
        data = [{"setting": n, "value": v, "source": s} for n, v, s in rows]
        click.echo(json.dumps(data, indent=2, default=str))
        return
    print_table(
        "harnessmem settings",
        ["setting", "value", "source"],
        [[n, json.dumps(v, default=str, ensure_ascii=False), s] for n, v, s in rows],
    )


@config_group.command("validate")
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@common_options()
def config_validate(
    file: str | None, config: str | None, workspace: str | None, as_json: bool
) -> None:
    """Check FILE (default: the config in effect) with the environment applied.

    Loads the index and model backends and the hook plugins the settings name, as a
    harness does when it starts, so unknown backends, backend options, plugin names and
    plugin options are reported too; opens no workspace. Prints one line per problem and
    exits 3 on any.
    """
    from harnessmem.errors import ConfigError
    from harnessmem.plugins import settings_problems
    from harnessmem.settings import config_file_path

    path = file or config
    shown = str(config_file_path(path) or "settings (no config file)")
    try:
        settings, overrides = load_settings(path, workspace)
    except ConfigError as exc:
        problems, hints = exc.problems or [exc.message], [exc.hint] if exc.hint else []
        # The settings that are valid are checked too (backends, plugins): one run lists
        # every problem of the file, not only the first kind.
        more, more_hints = _problems_beside(path, problems)
        problems += [line for line in more if line not in problems]
        hints += [hint for hint in more_hints if hint not in hints]
    else:
        problems, hints = settings_problems(settings, overrides)
    if as_json:
        echo_json({"file": shown, "ok": not problems, "problems": problems})
    elif problems:
        for line in problems:
            click.echo(f"{shown}: {line}", err=True)
        for hint in hints:
            click.echo(f"hint: {hint}", err=True)
    else:
        click.echo(f"{shown}: ok")
    if problems:
        sys.exit(EXIT_CONFIG)


def _problems_beside(path: str | None, problems: list[str]) -> tuple[list[str], list[str]]:
    """The problems of the config file at ``path`` that loading it did not reach: the
    file without the settings ``problems`` name (``index.max_results: ...``) is loaded
    and checked as a harness would; nothing when it still does not load."""
    import tempfile

    from harnessmem.errors import ConfigError
    from harnessmem.plugins import settings_problems
    from harnessmem.settings import HarnessSettings, config_file_path, read_config_file

    found = config_file_path(path)
    if found is None:
        return [], []
    try:
        data = read_config_file(found)
    except ConfigError:
        return [], []
    for line in problems:
        keys = line.split(":", 1)[0].strip().split(".")
        section: Any = data
        for key in keys[:-1]:
            section = section.get(key) if isinstance(section, dict) else None
        if isinstance(section, dict):
            section.pop(keys[-1], None)
    # The pruned file's values as arguments, and an empty file in its place (else a
    # ./harnessmem.toml, the broken file itself, would be read again).
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.toml"
        empty.write_text("", encoding="utf-8")
        try:
            settings = HarnessSettings.load(empty, **data)
        except (ConfigError, ValueError, TypeError):
            return [], []
    lines, hints = settings_problems(settings, data)
    shown = f" [from {found}]" if path is None else f" [from {path}]"
    return [re.sub(r" \[from arguments?\]", shown, line) for line in lines], hints


# ------------------------------------------------------------------------------ plugins


@click.command("plugins")
@common_options()
def plugins_command(config: str | None, workspace: str | None, as_json: bool) -> None:
    """List installed hook plugins and backends with their distribution and version."""
    from harnessmem.plugins import installed_plugins

    settings, _ = load_settings(config, workspace)
    rows = installed_plugins(settings.plugins)
    if as_json:
        click.echo(json.dumps([row.__dict__ for row in rows], indent=2))
        return
    if not rows:
        click.echo("no plugins or backends installed")
        return
    print_table(
        "harnessmem plugins and backends",
        ["kind", "name", "distribution", "version", "status", "object"],
        [[r.kind, r.name, r.distribution, r.version, r.status, r.value] for r in rows],
    )


# ------------------------------------------------------------------------------ upkeep


@click.command("maintain")
@common_options()
@click.option(
    "--force", is_flag=True, help="Run steps that already ran within maintenance.min_gap."
)
def maintain_command(config: str | None, workspace: str | None, as_json: bool, force: bool) -> None:
    """Run one maintenance tick now and print its report (for cron or a Kubernetes CronJob).

    Exits 1 when a step failed; skipped steps are not failures, and a tick
    skipped because another process holds the maintenance lease exits 0.
    """
    with command_harness(config, workspace) as harness:
        report = harness.maintain(force=force)
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(str(report))
    if not report.ok:
        sys.exit(EXIT_FAILED)


@click.command("consolidate")
@common_options()
def consolidate_command(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Rewrite MEMORY.md from the daily logs past the watermark, within its budget.

    Exits 1 when the rewrite was rejected (MEMORY.md is then unchanged); "nothing new" and
    "busy" (another process is consolidating) exit 0.
    """
    from dataclasses import asdict

    with command_harness(config, workspace) as harness:
        result = harness.consolidate()
        budget = harness.settings.consolidation.max_memory_tokens
    if as_json:
        echo_json(asdict(result))
    else:
        click.echo(describe_consolidation(result, budget))
    if result.status == "rejected":
        sys.exit(EXIT_FAILED)


def describe_consolidation(result: Any, budget: int) -> str:
    """One line for a :class:`~harnessmem.memory.consolidation.ConsolidationResult`."""
    return str(result.describe(budget))


@click.command("usage")
@common_options()
@click.option("--days", type=click.IntRange(min=1), default=None, help="Only the last N days.")
def usage_command(
    config: str | None, workspace: str | None, as_json: bool, days: int | None
) -> None:
    """Show model calls, tokens and cost per purpose and model, and the daily budget."""
    import time

    from harnessmem.cli._existing import require_workspace
    from harnessmem.models.usage import UsageLedger
    from harnessmem.workspace import Workspace

    settings, _ = load_settings(config, workspace)
    require_workspace(settings)
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
    print_table(
        f"model usage, {span}",
        ["purpose", "model", "calls", "failed", "prompt tokens", "completion tokens", "cost"],
        rows,
    )
    if report.fallbacks:
        click.echo(f"{report.fallbacks} calls answered offline because the budget was reached")
    if report.budget is not None:
        state = "reached" if report.budget.exceeded else "within"
        click.echo(f"daily budget {state}: {report.budget.describe()}")


# ------------------------------------------------------------------------------ index


@click.group("index", cls=CommandGroup)
def index_group() -> None:
    """Build and inspect the full-text index."""


@index_group.command("rebuild")
@common_options()
def index_rebuild(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Empty the index and index every memory file and session log again."""
    from dataclasses import asdict

    with command_harness(config, workspace) as harness:
        result = harness.reindex(full=True)
        stats = harness.kernel.index.stats()
        where = harness.kernel.index_path
    if as_json:
        data = {"result": asdict(result), "files": stats.files, "entries": stats.entries}
        click.echo(json.dumps({**data, "details": dict(stats.details)}, indent=2, default=str))
        return
    click.echo(f"index {where}: {result}")


@index_group.command("status")
@common_options()
def index_status(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Show what the index holds (files and entries per source), without syncing it."""
    with command_harness(config, workspace, existing=True) as harness:
        stats = harness.kernel.index.stats()
    data = {"files": stats.files, "entries": stats.entries, **dict(stats.details)}
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    sources = data.pop("sources", None)
    print_fields(
        [
            ("size" if key == "bytes" else str(key), _shown_stat(str(key), value))
            for key, value in data.items()
        ]
    )
    if isinstance(sources, dict) and sources:
        print_table(
            "indexed sources",
            ["source", "files", "entries"],
            [[name, f"{s['files']:,}", f"{s['entries']:,}"] for name, s in sorted(sources.items())],
        )


def _shown_stat(key: str, value: Any) -> str:
    """An index statistic as a person reads it: sizes in KB/MB, counts with separators."""
    if isinstance(value, int) and not isinstance(value, bool):
        return human_size(value) if key == "bytes" or key.endswith("_bytes") else f"{value:,}"
    return str(value)


# ------------------------------------------------------------------------------ memory


@click.command("search")
@click.argument("query")
@common_options()
@click.option("--limit", "-n", type=click.IntRange(min=1), default=10, help="Most hits to show.")
@click.option(
    "--mode",
    type=click.Choice(["any", "all", "phrase"]),
    default="any",
    help="any: ranked, any word; all: every word; phrase: the words in order.",
)
@click.option("--sessions", is_flag=True, help="Search the session logs instead of memory.")
@click.option("--session-id", default=None, help="Search one session's log (implies --sessions).")
@click.option("--since", default=None, help="Only entries dated on or after this day.")
@click.option("--until", default=None, help="Only entries dated on or before this day.")
def search_command(
    query: str,
    config: str | None,
    workspace: str | None,
    as_json: bool,
    limit: int,
    mode: str,
    sessions: bool,
    session_id: str | None,
    since: str | None,
    until: str | None,
) -> None:
    """Search memory (or session logs) for QUERY, as the memory_search tool does.

    --since and --until take YYYY-MM-DD, today, yesterday, 'N days ago', 'N weeks ago',
    'last week' or 'last month', in the workspace's time zone; both are inclusive.
    """
    from dataclasses import asdict

    from harnessmem.cli._dates import parse_day, today_in
    from harnessmem.tools import format_hits

    settings, _ = load_settings(config, workspace)
    today = today_in(settings.workspace.timezone)
    first = parse_day(since, today) if since else None
    last = parse_day(until, today) if until else None
    if first and last and first > last:
        raise click.BadParameter(f"--since {first} is after --until {last}")
    source = "sessions" if sessions or session_id else "memory"
    with command_harness(config, workspace, existing=True) as harness:
        hits = harness.search(
            query,
            limit,
            mode=cast("SearchMode", mode),
            source=source,
            session_id=session_id,
            since=first,
            until=last,
        )
    if as_json:
        click.echo(json.dumps([asdict(hit) for hit in hits], indent=2, ensure_ascii=False))
        return
    what = "messages" if source == "sessions" else "memories"
    if first or last:
        what += f" dated {first or '...'} to {last or '...'}"
    click.echo(format_hits(hits, query, what=what, hint=""))


@click.command("get")
@click.argument("path")
@common_options()
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
    with command_harness(config, workspace, existing=True) as harness:
        try:
            text = harness.get(path, start_line=start_line, lines=lines)
        except FileNotFoundError:
            raise CommandError(
                f"{path} does not exist in {harness.workspace.url}",
                hint="harnessmem search prints paths as get takes them",
                code=EXIT_INPUT,
            ) from None
    if as_json:
        data = {"path": path, "start_line": start_line, "text": text}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    click.echo(text, nl=False)


@click.command("why")
@click.argument("fact")
@common_options()
@click.option("--limit", "-n", type=click.IntRange(min=1), default=3, help="Most facts to trace.")
def why_command(
    fact: str, config: str | None, workspace: str | None, as_json: bool, limit: int
) -> None:
    """Where a fact of memory came from: FACT is a MEMORY.md line (MEMORY.md:12) or its words.

    Prints each MEMORY.md fact that holds the words, the daily-log entries that say it
    (when and from which session they were flushed) and the session-log messages, said
    before that flush, with the words as they were said.
    """
    from dataclasses import asdict

    from harnessmem.memory.provenance import TraceError

    with command_harness(config, workspace, existing=True) as harness:
        try:
            traces = harness.trace(fact, limit=limit)
        except TraceError as exc:
            raise CommandError(str(exc), code=EXIT_INPUT) from None
    if as_json:
        echo_json([asdict(trace) for trace in traces])
        return
    for number, trace in enumerate(traces):
        if number:
            click.echo()
        for line in trace.lines():
            click.echo(line)


@click.command("save")
@click.argument("text")
@common_options()
def save_command(text: str, config: str | None, workspace: str | None, as_json: bool) -> None:
    """Append TEXT to MEMORY.md as a dated entry, as the agent's memory_save tool does.

    One fact per line (bullets or plain lines, an indented line continues a bullet);
    every line is kept except headings, which are listed as not saved. Facts already in
    MEMORY.md are skipped, and secrets are redacted like a flush.
    """
    if not text.strip():
        raise click.BadParameter("nothing to save: TEXT is empty", param_hint="TEXT")
    with command_harness(config, workspace) as harness:
        result = harness.save(text)
    if as_json:
        echo_json(
            {
                "path": result.path,
                "entries": list(result.entries),
                "duplicates": result.duplicates,
                "warnings": list(result.warnings),
                "left_out": list(result.left_out),
            }
        )
        return
    click.echo(result.message)
    for entry in result.entries:
        click.echo(f"  - {entry}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
