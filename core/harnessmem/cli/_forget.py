"""``harnessmem forget`` and ``harnessmem edit``: correct what the agent remembers.

Both show what would change first (the dry run), then ask before changing anything,
unless ``--yes``; with ``--json`` (one document, no prompt) they need ``--yes`` or
``--dry-run``. A query that matches nothing or too much exits 4 and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from harnessmem.cli._common import (
    EXIT_USAGE,
    CommandError,
    command_harness,
    common_options,
    echo_json,
)

if TYPE_CHECKING:
    from harnessmem.memory.erasure import ForgetResult

__all__ = ["edit_command", "forget_command"]

_DRY_RUN = click.option("--dry-run", is_flag=True, help="List what would change; change nothing.")
_YES = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
_LIMIT = click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Refuse (and change nothing) when more facts than this match.",
)


def _print(result: ForgetResult) -> None:
    click.echo(str(result))
    for removal in result.removals:
        click.echo(f"  {removal.path}:{removal.line}  [{removal.kind}]  {removal.preview}")
    if result.replacement is not None:
        click.echo(f"  new text: {result.replacement}")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)


def _preview_then_run(
    run: Callable[[bool], ForgetResult], *, dry_run: bool, yes: bool, as_json: bool
) -> None:
    """The dry run first (a bad query fails there, before any question), then, once
    confirmed, the real run; prints the result."""
    result = run(True)
    if not dry_run:
        if not _confirmed(result, yes=yes, as_json=as_json):
            click.echo("nothing changed", err=True)
            return
        result = run(False)
    if as_json:
        echo_json(result.to_dict())
    else:
        _print(result)


def _confirmed(preview: ForgetResult, *, yes: bool, as_json: bool) -> bool:
    if yes:
        return True
    if as_json:
        raise CommandError(
            "--json prints one document and asks nothing, so it needs --yes or --dry-run",
            hint="run with --dry-run --json to see what would change, then with --yes --json",
            code=EXIT_USAGE,
        )
    _print(preview)
    return click.confirm("Change the workspace for good?", default=False, err=True)


@click.command("forget")
@click.argument("query")
@_DRY_RUN
@click.option("--sessions", is_flag=True, help="Redact the session logs (raw conversations) too.")
@_LIMIT
@_YES
@common_options()
def forget_command(
    query: str,
    dry_run: bool,
    sessions: bool,
    limit: int,
    yes: bool,
    config: str | None,
    workspace: str | None,
    as_json: bool,
) -> None:
    """Remove every fact matching QUERY from memory, for good.

    A fact matches when it holds every word of QUERY (any case) or its exact text. It
    leaves MEMORY.md (and its previous versions), the daily logs and their archive,
    evicted tool results, with --sessions the session logs, and the index; a tombstone
    keeps later flushes and consolidations from writing it again. See docs/memory.md.
    """
    with command_harness(config, workspace) as harness:

        def run(dry_run: bool) -> ForgetResult:
            return harness.forget(query, dry_run=dry_run, sessions=sessions, limit=limit)

        _preview_then_run(run, dry_run=dry_run, yes=yes, as_json=as_json)


@click.command("edit")
@click.argument("old")
@click.argument("new")
@_DRY_RUN
@_LIMIT
@_YES
@common_options()
def edit_command(
    old: str,
    new: str,
    dry_run: bool,
    limit: int,
    yes: bool,
    config: str | None,
    workspace: str | None,
    as_json: bool,
) -> None:
    """Replace the facts matching OLD in MEMORY.md and the daily logs with NEW.

    OLD matches as forget's QUERY does; its words are tombstoned, so NEW must drop at
    least one of them.
    """
    with command_harness(config, workspace) as harness:

        def run(dry_run: bool) -> ForgetResult:
            return harness.forget(old, replace_with=new, dry_run=dry_run, limit=limit)

        _preview_then_run(run, dry_run=dry_run, yes=yes, as_json=as_json)
