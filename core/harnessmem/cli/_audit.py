"""``harnessmem audit``: the audit log, filtered (see :mod:`harnessmem.audit`)."""

from __future__ import annotations

import json
from datetime import datetime, time
from zoneinfo import ZoneInfo

import click

from harnessmem.cli._common import common_options, load_settings, plural, print_table
from harnessmem.cli._dates import FORMS, parse_day, today_in
from harnessmem.layout import AUDIT_OPERATIONS

__all__ = ["audit_command"]


@click.command("audit")
@common_options()
@click.option("--since", metavar="DAY", help=f"Only changes from this day on ({FORMS}).")
@click.option("--until", metavar="DAY", help="Only changes up to this day, inclusive.")
@click.option(
    "--op",
    "ops",
    multiple=True,
    type=click.Choice(AUDIT_OPERATIONS),
    help="Only this operation (repeat for several).",
)
@click.option(
    "--actor",
    metavar="ACTOR",
    help="Only this actor: cli, maintenance, inspector, api, mcp:<client>, session:<id>, or "
    "a kind alone (session, mcp).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="The latest N changes that match.",
)
def audit_command(
    config: str | None,
    workspace: str | None,
    as_json: bool,
    since: str | None,
    until: str | None,
    ops: tuple[str, ...],
    actor: str | None,
    limit: int,
) -> None:
    """Show who changed the workspace, when, and which files (content hashes, no text)."""
    from harnessmem.audit import read_audit
    from harnessmem.cli._existing import require_workspace
    from harnessmem.workspace import Workspace

    settings, _ = load_settings(config, workspace)
    zone = settings.workspace.timezone
    today = today_in(zone)
    first = None if since is None else parse_day(since, today)
    last = None if until is None else parse_day(until, today)
    if first is not None and last is not None and first > last:
        raise click.BadParameter(f"--since {first} is after --until {last}", param_hint="--since")
    require_workspace(settings)
    where = Workspace.open(settings.workspace.url, settings.workspace.storage_options)
    tz = ZoneInfo(zone)
    records = read_audit(
        where,
        since=None if first is None else datetime.combine(first, time.min, tz).timestamp(),
        until=None if last is None else datetime.combine(last, time.max, tz).timestamp(),
        ops=ops or None,
        actor=actor,
        limit=limit,
        timezone=zone,
    )
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in records], indent=2, ensure_ascii=False))
        return
    if not records:
        click.echo(f"no change recorded in {where.url} that matches")
        return
    rows = []
    for record in records:
        when = datetime.fromtimestamp(record.at, tz).isoformat(timespec="seconds")
        files = "; ".join(
            f"{c.path} {(c.before or 'none')[:8]}→{(c.after or 'none')[:8]}" for c in record.files
        )
        counts = ", ".join(f"{k} {v}" for k, v in record.counts.items())
        what = record.op + (f" (failed: {record.error})" if record.error else "")
        who = record.actor + (f" [{record.tenant}]" if record.tenant else "")
        rows.append([when, what, who, files, counts])
    print_table(
        f"audit log, {plural(len(records), 'change')}",
        ["when", "operation", "actor", "files (hash before→after)", "counts"],
        rows,
    )
