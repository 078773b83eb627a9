"""``harnessmem export`` and ``harnessmem import``: a workspace to one archive and back."""

from __future__ import annotations

import click

from harnessmem.cli._common import (
    command_harness,
    common_options,
    echo_json,
    human_size,
    load_settings,
    plural,
)


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@common_options()
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
def export_command(
    file: str, config: str | None, workspace: str | None, as_json: bool, force: bool
) -> None:
    """Write every file of the workspace into the archive FILE (a .tar.gz).

    MEMORY.md and its history, the daily logs and their archive, the session logs,
    evicted tool results, the consolidation watermark, maintenance state and usage
    records; not the index, which an import rebuilds. FILE appears only when complete.
    """
    from harnessmem.transfer import export_workspace

    with command_harness(config, workspace, existing=True) as harness:
        result = export_workspace(
            harness.workspace, file, clock=harness.kernel.clock, overwrite=force
        )
        source = harness.workspace.url
    if as_json:
        echo_json({"workspace": source, **result.as_dict()})
        return
    click.echo(
        f"exported {plural(result.files, 'file')} ({human_size(result.bytes)}) "
        f"of {source} to {result.path}"
    )


@click.command("import")
@click.argument("source", type=click.Path(exists=True))
@common_options()
@click.option(
    "--from",
    "origin",
    type=click.Choice(["harnessmem", "java"]),
    default="harnessmem",
    show_default=True,
    help="What SOURCE is: an archive of harnessmem export, or the Java harness's workspace folder.",
)
@click.option("--user", default=None, help="With --from java: the user folder to import.")
def import_command(
    source: str,
    config: str | None,
    workspace: str | None,
    as_json: bool,
    origin: str,
    user: str | None,
) -> None:
    """Import SOURCE into the workspace (made if it does not exist), then reindex.

    Nothing is written unless all of SOURCE can be: a damaged archive, one that unpacks
    beyond the transfer.* limits, a path the workspace cannot hold, or a file the
    workspace already holds with other content, stops the import before it starts. Files
    already there with the same content are skipped, so an interrupted import is finished
    by running it again. With --from java, session logs are converted to harnessmem's and
    pass the secret redactor; files that are not memory (AGENTS.md, knowledge/, ...) are
    listed and left out.
    """
    from harnessmem import transfer

    if user is not None and origin != "java":
        raise click.UsageError("--user goes with --from java")
    settings, _ = load_settings(config, workspace)
    # The source is read and checked first: a bad one creates no workspace.
    found: transfer.Archive | transfer.JavaWorkspace
    if origin == "java":
        found = transfer.read_java_workspace(
            source, user=user, eviction_path=settings.eviction.path
        )
    else:
        found = transfer.read_archive(source, limits=settings.transfer)
    with command_harness(config, workspace) as harness:
        if isinstance(found, transfer.JavaWorkspace):
            result = transfer.import_java_workspace(harness, found)
        else:
            result = transfer.import_archive(harness, found)
        target = harness.workspace.url
    if as_json:
        echo_json({"workspace": target, **result.as_dict()})
        return
    click.echo(
        f"imported {source} into {target}: {plural(len(result.written), 'file')} written, "
        f"{len(result.unchanged)} already there"
    )
    if origin == "java":
        click.echo(
            f"  {plural(result.sessions, 'session log')} with "
            f"{plural(result.messages, 'message')} ({result.messages_new} new)"
        )
    if result.skipped:
        click.echo(f"  left out (not memory): {', '.join(result.skipped)}")
    if result.bad_lines:
        shown = ", ".join(result.bad_lines[:5]) + (", ..." if len(result.bad_lines) > 5 else "")
        click.echo(f"  unreadable lines skipped: {shown}", err=True)
