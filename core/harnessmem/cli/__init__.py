"""The ``harnessmem`` command line.

Commands import what they need when they run, so ``harnessmem --help`` stays fast. Every
command takes ``-w/--workspace`` (default: ``workspace.url`` of the settings), ``-c/--config``
and ``--debug``; those whose output is data take ``--json``.

A failure prints one ``error:`` line (more only when a config has several problems), a
``hint:`` line, no traceback unless ``--debug``, and exits with a documented status:

====  =========================================================================
0     success
1     the command ran and something failed (a maintenance step, a consolidation
      rejected, fewer replay probes found than ``--fail-under``, an unexpected error)
2     a bad option or argument
3     settings that cannot be used (a bad value, an unknown backend, no model)
4     bad input: a file that is missing or malformed (``replay``, its probes), a path that
      may not be read (``get``), a ``forget`` / ``edit`` query that matches nothing
      or more facts than ``--limit``
5     the workspace cannot be opened, reached or written (bad URL, missing bucket)
6     the model failed (unreachable, key rejected, junk answer); ``chat`` goes on
      after a failed turn and exits with the status of the last one
130   interrupted (Ctrl-C)
====  =========================================================================
"""

from __future__ import annotations

import click

from harnessmem.cli._audit import audit_command
from harnessmem.cli._chat import chat_command
from harnessmem.cli._commands import (
    config_group,
    consolidate_command,
    get_command,
    index_group,
    maintain_command,
    plugins_command,
    save_command,
    search_command,
    usage_command,
    why_command,
)
from harnessmem.cli._common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_MODEL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKSPACE,
    HarnessmemGroup,
    debug_option,
    enable_logging,
)
from harnessmem.cli._forget import edit_command, forget_command
from harnessmem.cli._init import init_command
from harnessmem.cli._inspect import inspect_command
from harnessmem.cli._mcp import mcp_command
from harnessmem.cli._replay import replay_command
from harnessmem.cli._status import status_command
from harnessmem.cli._transfer import export_command, import_command

# The exit statuses of the table above, by name, for scripts and tests that run the CLI.
__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_WORKSPACE",
    "main",
]


@click.group(
    cls=HarnessmemGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="harnessmem", prog_name="harnessmem")
@debug_option
@click.pass_context
def main(ctx: click.Context) -> None:
    """harnessmem: memory that lasts across sessions for LLM agents.

    \b
    Start here:
      harnessmem init                 a workspace and a commented harnessmem.toml
      harnessmem replay --example     feed an example conversation through it
      harnessmem search "QUERY"       find what was remembered
      harnessmem why "FACT"           where a remembered fact came from
      harnessmem status               what the workspace holds
    """
    enable_logging(ctx)
    from harnessmem.audit import set_actor

    # What a command changes is the command line's in the audit log (for its whole run).
    ctx.call_on_close(set_actor("cli"))


for _command in (
    init_command,
    replay_command,
    search_command,
    get_command,
    why_command,
    save_command,
    forget_command,
    edit_command,
    status_command,
    consolidate_command,
    maintain_command,
    index_group,
    config_group,
    plugins_command,
    usage_command,
    audit_command,
    export_command,
    import_command,
    inspect_command,
    chat_command,
    mcp_command,
):
    main.add_command(_command)
del _command
