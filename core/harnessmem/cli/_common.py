"""What every command shares: options, settings, the harness, errors and exit codes, output.

Only ``click`` is imported at module level; everything heavier is imported inside the
functions, so ``harnessmem --help`` stays fast.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])

#: Exit statuses (docs/getting-started.md lists them; scripts may rely on them).
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and something failed (a maintenance step, a consolidation)
EXIT_USAGE = 2  # a bad option or argument (click's own status)
EXIT_CONFIG = 3  # settings that cannot be used: a bad value, an unknown backend, no model
EXIT_INPUT = 4  # bad input: a missing or malformed file, a path that may not be read
EXIT_WORKSPACE = 5  # the workspace cannot be opened, reached or written
EXIT_MODEL = 6  # the model failed: unreachable, rejected the key, or answered junk
EXIT_INTERRUPTED = 130  # Ctrl-C

_DEBUG_KEY = "harnessmem.debug"


class CommandError(Exception):
    """A failure a command detects itself: one line, a hint, an exit status.

    Printed the same with or without ``--debug``: it is an expected failure, not a bug.
    """

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


# ------------------------------------------------------------------------------ errors


def _print_error(message: str, hint: str | None) -> None:
    click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)
    if hint:
        click.echo(click.style("hint: ", fg="yellow") + hint, err=True)


def exit_code_of(exc: BaseException) -> int:
    """The documented exit status for an exception a command let through."""
    from harnessmem.errors import (
        ArchiveError,
        ConfigError,
        ForgetError,
        HarnessMemError,
        MessageFormatError,
        ModelError,
        PathNotAllowed,
        PluginError,
        ProbeFormatError,
        WorkspaceError,
        WorkspaceFileNotFound,
    )

    if isinstance(exc, ConfigError | PluginError):
        return EXIT_CONFIG
    if isinstance(
        exc,
        ArchiveError
        | ForgetError
        | MessageFormatError
        | PathNotAllowed
        | ProbeFormatError
        | WorkspaceFileNotFound,
    ):
        return EXIT_INPUT
    if isinstance(exc, WorkspaceError | OSError):
        return EXIT_WORKSPACE
    if isinstance(exc, ModelError):
        return EXIT_MODEL
    if isinstance(exc, HarnessMemError):
        return EXIT_FAILED
    return EXIT_FAILED


def report_error(exc: BaseException) -> int:
    """Print ``exc`` as ``error: ...`` plus ``hint: ...`` (no traceback); its exit status."""
    from harnessmem.errors import HarnessMemError

    if isinstance(exc, HarnessMemError):
        _print_error(exc.message, exc.hint)
    elif isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        _print_error(
            f"{exc.strerror or type(exc).__name__}{where}",
            "check that the path exists and that you may read and write it",
        )
    else:
        _print_error(
            f"unexpected {type(exc).__name__}: {exc}",
            "this is a bug in harnessmem or in a plugin; run the command again with --debug "
            "to see the traceback, and report it",
        )
    return exit_code_of(exc)


def debugging(ctx: click.Context | None = None) -> bool:
    """Whether ``--debug`` was given (to the group or to the command)."""
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_DEBUG_KEY))


class CommandGroup(click.Group):
    """A group whose command list shows each description's first sentence whole.

    click cuts a listed description at 45 characters ("..."); a person then has to run
    ``--help`` on each command to learn what it does."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.short_help = cmd.short_help or cmd.get_short_help_str(limit=200)
        super().add_command(cmd, name)


class HarnessmemGroup(CommandGroup):
    """The top-level group: turns exceptions into one error line, a hint and an exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly, and keep Python from
            # complaining about the closed stdout at exit.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(EXIT_FAILED) from None
        except KeyboardInterrupt:
            if debugging(ctx):
                raise
            click.echo("\ninterrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except CommandError as exc:
            _print_error(exc.message, exc.hint)
            raise click.exceptions.Exit(exc.code) from None
        except Exception as exc:
            if debugging(ctx):
                raise
            raise click.exceptions.Exit(report_error(exc)) from None


# ------------------------------------------------------------------------------ logging


class _EchoHandler(logging.Handler):
    """Log records as ``warning: ...`` lines on the stderr of the moment (click's)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = record.levelname.lower()
            where = f"{record.name}: " if record.levelno < logging.WARNING else ""
            click.echo(f"{level}: {where}{record.getMessage()}", err=True)
        except Exception:  # a log line must never break a command
            self.handleError(record)


def enable_logging(ctx: click.Context) -> None:
    """Show harnessmem's warnings (all its log records under ``--debug``) while ``ctx`` runs."""
    logger = logging.getLogger("harnessmem")
    handler = _EchoHandler(logging.WARNING)
    logger.addHandler(handler)
    level = logger.level
    ctx.meta["harnessmem.log_handler"] = handler

    def restore() -> None:
        logger.removeHandler(handler)
        logger.setLevel(level)

    ctx.call_on_close(restore)
    if debugging(ctx):
        _debug_logging(ctx)


def _debug_logging(ctx: click.Context) -> None:
    handler = ctx.meta.get("harnessmem.log_handler")
    if isinstance(handler, logging.Handler):
        handler.setLevel(logging.DEBUG)
        logging.getLogger("harnessmem").setLevel(logging.DEBUG)


def _debug_callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[_DEBUG_KEY] = True
        _debug_logging(ctx)


# ------------------------------------------------------------------------------ options


def debug_option(func: F) -> F:
    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_debug_callback,
        help="Show tracebacks and debug logging.",
    )(func)


def config_option(func: F) -> F:
    return click.option(
        "--config",
        "-c",
        "config",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config file (TOML or YAML); default $HARNESSMEM_CONFIG or ./harnessmem.toml.",
    )(func)


def workspace_option(func: F) -> F:
    return click.option(
        "--workspace",
        "-w",
        "workspace",
        default=None,
        metavar="URL",
        help="Workspace folder or fsspec URL (s3://bucket/prefix); default: workspace.url "
        "of the settings (./workspace).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print data as JSON.")(func)


def common_options(
    *, workspace: bool = True, as_json: bool = True, config: bool = True
) -> Callable[[F], F]:
    """``-w/--workspace``, ``-c/--config``, ``--json`` (where output is data), ``--debug``."""

    def decorate(func: F) -> F:
        func = debug_option(func)
        if as_json:
            func = json_option(func)
        if workspace:
            func = workspace_option(func)
        return config_option(func) if config else func

    return decorate


# ------------------------------------------------------------------------ settings and harness


def load_settings(
    config: str | None, workspace: str | None, **sections: Any
) -> tuple[HarnessSettings, dict[str, Any]]:
    """Settings from ``--config``, the environment and ``-w``; and the overrides given."""
    from harnessmem.settings import HarnessSettings

    overrides: dict[str, Any] = dict(sections)
    if workspace is not None:
        overrides["workspace"] = {**overrides.get("workspace", {}), "url": workspace}
    return HarnessSettings.load(config, **overrides), overrides


def check_reachable(workspace: Workspace) -> None:
    """Fail early, with a hint, when an object-store workspace's bucket cannot be reached
    (:meth:`Workspace.check_reachable`)."""
    workspace.check_reachable()


def open_harness(
    settings: HarnessSettings,
    *,
    plugins: tuple[object, ...] = (),
    reached: bool = False,
    maintenance: bool = False,
    **kwargs: Any,
) -> MemoryHarness:
    """A harness for one command: no maintenance thread (it would only idle; ``maintenance``
    keeps it as the settings say, for a command that serves for hours), bucket checked
    (unless ``reached``: the caller just reached it, and a second check is one more request).

    The harness checks what the settings name (backends, plugins) before it creates the
    workspace, so a misspelt one leaves nothing behind."""
    from harnessmem.harness import MemoryHarness

    if not maintenance:
        settings.maintenance.enabled = False
    harness = MemoryHarness(settings, plugins=plugins, **kwargs)
    if reached:
        return harness
    try:
        check_reachable(harness.workspace)
    except BaseException:
        harness.close()
        raise
    return harness


@contextmanager
def command_harness(
    config: str | None, workspace: str | None, *, existing: bool = False
) -> Iterator[MemoryHarness]:
    """``with command_harness(config, workspace) as harness:`` for the simple commands.

    ``existing=True`` (the commands that only read) refuses a folder that holds no
    workspace, and creates nothing there."""
    settings, _ = load_settings(config, workspace)
    if existing:
        from harnessmem.cli._existing import require_workspace

        require_workspace(settings)  # reaches the store, and creates nothing
    with open_harness(settings, reached=existing) as harness:
        yield harness


# ------------------------------------------------------------------------------ output


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def on_terminal() -> bool:
    """Whether stdout is a terminal (rich output) rather than a pipe or a file (plain)."""
    return sys.stdout.isatty()


#: Width of plain tables when stdout is not a terminal and ``COLUMNS`` is unset.
PLAIN_WIDTH = 100
_NARROWEST = 10  # a column is not squeezed below this to make a table fit


def _fit_widths(widths: list[int], width: int) -> list[int]:
    """Column widths that fit ``width`` with two spaces between: the widest give way first."""
    fitted = list(widths)
    gaps = 2 * (len(fitted) - 1)
    while sum(fitted) + gaps > width:
        widest = fitted.index(max(fitted))
        if fitted[widest] <= _NARROWEST:
            break
        fitted[widest] -= 1
    return fitted


def _split_word(word: str, width: int) -> list[str]:
    """A word wider than ``width`` in pieces, cut after ``.:/_,`` where it can be."""
    pieces = []
    while len(word) > width:
        cut = max(word.rfind(mark, 0, width) for mark in ".:/_,") + 1
        cut = cut if cut > width // 3 else width
        pieces.append(word[:cut])
        word = word[cut:]
    return [*pieces, word]


def _wrap(cell: str, width: int) -> list[str]:
    import textwrap

    lines = []
    for line in cell.splitlines() or [""]:
        for piece in textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False):
            lines.extend(_split_word(piece, width))
        if not line.strip():
            lines.append("")
    return lines


def plain_table(columns: list[str], rows: list[list[str]], width: int) -> list[str]:
    """The lines of a table in aligned columns within ``width``; a cell too long for its
    column wraps onto the next lines (nothing is cut)."""
    natural = [
        max(len(c), *(len(line) for r in rows for line in r[i].splitlines() or [""]))
        for i, c in enumerate(columns)
    ]
    widths = _fit_widths(natural, width)
    out = []
    for row in [columns, *rows]:
        cells = [_wrap(cell, w) for cell, w in zip(row, widths, strict=True)]
        for depth in range(max(len(c) for c in cells)):
            parts = [
                (c[depth] if depth < len(c) else "").ljust(w)
                for c, w in zip(cells, widths, strict=True)
            ]
            out.append("  ".join(parts).rstrip())
    return out


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table on a terminal; plain aligned columns when piped, long cells wrapped
    to the width (``COLUMNS``, else 100 characters) rather than cut."""
    if on_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    import shutil

    width = shutil.get_terminal_size((PLAIN_WIDTH, 24)).columns
    for line in plain_table(columns, rows, width):
        click.echo(line)


def print_fields(rows: list[tuple[str, str]], indent: str = "") -> None:
    """``label  value`` lines with the labels aligned."""
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        click.echo(f"{indent}{label.ljust(width)}  {value}".rstrip())


def check_port_free(host: str, port: int, option: str) -> None:
    """``CommandError`` (exit 4) when ``host:port`` cannot be listened on (another server
    holds it, or the address is not this machine's), before anything is opened; port 0
    (any free one) always can. It listens as the server will
    (:func:`harnessmem.settings.exposure.listen`), then lets go."""
    import errno
    import socket

    from harnessmem.errors import ConfigError
    from harnessmem.settings.exposure import listen

    if port == 0:
        return
    try:
        sock, _ = listen(host, port)
    except ConfigError as exc:
        cause = exc.__cause__
        if isinstance(cause, socket.gaierror):  # no such host: the port is not the problem
            raise CommandError(f"cannot listen on {host}: {cause}", code=EXIT_INPUT) from None
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            busy = "is in use"
        else:
            busy = f"cannot be used ({cause or exc.message})"
        raise CommandError(
            f"port {port} on {host} {busy}",
            hint=f"pass a free one with {option} (0 picks any free port)",
            code=EXIT_INPUT,
        ) from None
    sock.close()


@contextmanager
def stopped_by_sigterm() -> Iterator[list[int]]:
    """For a server command: SIGTERM stops it as Ctrl-C does, and the command goes on to
    close its harness (draining what is queued) instead of dying where it stood. The
    list it yields gets the signal when one stopped the server.

    uvicorn catches SIGTERM, shuts the server down, then raises the signal again to the
    handler that was there before it: this one, which notes it and lets the command
    return normally."""
    import signal

    caught: list[int] = []

    def note(signum: int, frame: object) -> None:
        caught.append(signum)

    try:
        previous = signal.signal(signal.SIGTERM, note)
    except ValueError:  # not the main thread (an embedding caller): leave signals alone
        yield caught
        return
    try:
        yield caught
    finally:
        signal.signal(signal.SIGTERM, previous)


def invoked_as(*, absolute: bool = False) -> str:
    """The command as the user typed it, for the commands we suggest: ``harnessmem`` when
    that name on ``PATH`` runs this program (or when it was not started as a
    ``harnessmem`` script), else the path it was started by (``.venv/bin/harnessmem``,
    for someone who followed the README without activating the environment; made
    absolute with ``absolute``, for a command that runs after a ``cd``)."""
    import os
    import shutil

    typed = sys.argv[0] if sys.argv else ""
    if os.path.basename(typed) != "harnessmem" or os.sep not in typed:
        return "harnessmem"
    on_path = shutil.which("harnessmem")
    if on_path and os.path.realpath(on_path) == os.path.realpath(typed):
        return "harnessmem"
    return os.path.abspath(typed) if absolute else typed


def shown_url(url: str) -> str:
    """A workspace URL as a person reads it: a local folder as its path."""
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(url).path)
    return url


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 fact``, ``3 facts``, ``1,204 messages``."""
    word = noun if count == 1 else (many or noun + "s")
    return f"{count:,} {word}"


def human_size(size: int) -> str:
    """``812 B``, ``14.2 KB``, ``3.1 MB``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"  # pragma: no cover - the loop returns


_SECRET_WORDS = ("key", "secret", "token", "password")


def redact(name: str, value: Any) -> Any:
    """Hide credentials inside option tables when printing settings."""
    if isinstance(value, Mapping):
        return {
            k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) and v else redact(k, v))
            for k, v in value.items()
        }
    return value
