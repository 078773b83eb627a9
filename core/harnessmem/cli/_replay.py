"""``harnessmem replay``: feed a recorded conversation through a session and show what happened.

The engine is :mod:`harnessmem.replay`; this module loads the file, shows a progress bar
for long files, and prints the timeline (or the JSON report).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harnessmem.cli._common import (
    EXIT_FAILED,
    EXIT_INPUT,
    CommandError,
    common_options,
    echo_json,
    invoked_as,
    load_settings,
    open_harness,
    plural,
    print_table,
    shown_url,
)
from harnessmem.probes import LIMIT as PROBE_LIMIT

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness
    from harnessmem.probes import Probe, ProbeReport, ProbeResult
    from harnessmem.replay import ReplayEvent, ReplayReport, Transcript
    from harnessmem.settings import HarnessSettings

#: Files with at least this many messages get a progress bar (on a terminal).
PROGRESS_FROM = 100
#: What the README's main job searches for after replaying the example.
EXAMPLE_QUERY = "staging database"
#: Where the detail lines of a timeline event start ("  09:03  msg 12   flushed      ").
_INDENT = 2 + 7 + 7 + 2 + 13
#: Longer facts are cut in the timeline (the daily log has them whole).
_FACT_CHARS = 160


@click.command("replay")
@click.argument("transcript", required=False, type=click.Path(dir_okay=False))
@common_options(as_json=False)
@click.option(
    "--example",
    is_flag=True,
    help="Replay the example that ships with harnessmem (three days of a coding agent).",
)
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Session id; default: the file name (a LoCoMo conversation's sample_id).",
)
@click.option(
    "--sample",
    default=None,
    metavar="ID|INDEX",
    help="The conversation of a LoCoMo file to replay, by sample_id or 0-based index "
    "(default: the first); or the runs of a tau-bench file, by 0-based index or range, "
    "3 or 3-5, each a session of its own (default: every run).",
)
@click.option(
    "--report",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the timeline; json: the full report, for scripts.",
)
@click.option(
    "--facts",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Facts shown under each flush (0: counts only).",
)
@click.option(
    "--keep-dates",
    is_flag=True,
    help="Use the messages' timestamps as written (default: shift them to end today).",
)
@click.option(
    "--no-consolidate",
    is_flag=True,
    help="Do not consolidate MEMORY.md when the day changes and at the end.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"Progress bar; default: on a terminal, for files of {PROGRESS_FROM}+ messages.",
)
@click.option(
    "--probe",
    "probe_texts",
    multiple=True,
    metavar="QUESTION=EXPECTED",
    help="After the replay, ask whether a fact can still be found: in MEMORY.md, or in "
    "the search hits for QUESTION (repeatable).",
)
@click.option(
    "--probes",
    "probes_file",
    default=None,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A probes file: one 'QUESTION = EXPECTED' a line; '#' starts a comment line.",
)
@click.option(
    "--probe-limit",
    type=click.IntRange(min=1),
    default=PROBE_LIMIT,
    show_default=True,
    help="Search hits a probe looks at (the memory_search tool's default).",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(min=0, max=100),
    default=None,
    metavar="PERCENT",
    help="Exit with status 1 when fewer than PERCENT of the probes are found.",
)
def replay_command(
    transcript: str | None,
    config: str | None,
    workspace: str | None,
    example: bool,
    session_id: str | None,
    sample: str | None,
    report: str,
    facts: int,
    keep_dates: bool,
    no_consolidate: bool,
    progress: bool | None,
    probe_texts: tuple[str, ...],
    probes_file: str | None,
    probe_limit: int,
    fail_under: float | None,
) -> None:
    """Feed TRANSCRIPT through a session, turn by turn, as an agent loop would.

    TRANSCRIPT is a JSON list of OpenAI chat messages, JSON Lines (one message a line),
    Anthropic messages, a SWE-agent trajectory, tau-bench runs or a LoCoMo conversation
    (each speaker a user with a name, each session on its date). Before each assistant
    message the session may evict and compact; each tool result may be evicted; each agent
    call ends with a flush into the daily log; MEMORY.md is consolidated when the day
    changes and at the end. Prints a timeline of what happened.

    With --probe or --probes, asks after the replay whether each fact can still be found
    (its EXPECTED text, case and whitespace aside, in MEMORY.md or in one of the first
    --probe-limit search hits for its QUESTION) and prints a retention table.
    """
    from harnessmem.replay import ReplayClock, merge_reports, read_transcript, replay

    path = _transcript_path(transcript, example)
    probes = _probes(probe_texts, probes_file)
    if fail_under is not None and not probes:
        raise click.UsageError("--fail-under needs probes: give --probe or --probes")
    try:
        loaded = read_transcript(path, sample=sample)
    except FileNotFoundError:
        raise CommandError(
            f"transcript {path} not found",
            hint="pass the path of a JSON or JSONL file, or --example for the bundled one",
            code=EXIT_INPUT,
        ) from None
    except IsADirectoryError:
        raise CommandError(f"{path} is a folder, not a transcript file", code=EXIT_INPUT) from None
    messages = loaded.messages
    settings, _ = load_settings(config, workspace)
    session = session_id or loaded.conversation or path.name.split(".", 1)[0] or "replay"
    clock = ReplayClock()
    show = progress if progress is not None else _on_terminal() and len(messages) >= PROGRESS_FROM
    started = time.monotonic()
    # A file of runs: each chosen run a session of its own ("<session>-run-3").
    parts = loaded.parts or (("", messages),)
    with open_harness(settings, clock=clock) as harness:
        with _progress_bar(show and report == "text", len(messages), path.name) as advance:
            reports, done = [], 0
            for name, part in parts:
                reports.append(
                    replay(
                        harness,
                        part,
                        session_id=f"{session}-{name}" if name else session,
                        clock=clock,
                        keep_dates=keep_dates,
                        consolidate=not no_consolidate,
                        progress=_offset(advance, done),
                    )
                )
                done += len(part)
        result = reports[0] if len(reports) == 1 else merge_reports(reports)
        seconds = time.monotonic() - started
        retention = _ask(harness, probes, probe_limit) if probes else None
    if report == "json":
        extra = {"conversation": loaded.conversation, "conversations": loaded.conversations}
        asked = {"probes": retention.as_dict()} if retention is not None else {}
        echo_json(
            {
                "transcript": str(path),
                **(extra if loaded.conversation is not None else {}),
                "seconds": round(seconds, 3),
                **result.as_dict(),
                **asked,
            }
        )
    else:
        _print_timeline(result, settings, path, facts, loaded)
        _print_summary(result, seconds)
        if retention is not None:
            _print_probes(retention)
        _print_next(workspace, example)
    if retention is not None and fail_under is not None:
        _check_share(retention, fail_under)


def _offset(advance: Callable[[int], None] | None, done: int) -> Callable[[int], None] | None:
    """The progress callback of one run, counting the runs' messages before it."""
    if advance is None:
        return None
    return lambda count: advance(done + count)


def _transcript_path(transcript: str | None, example: bool) -> Path:
    if example and transcript:
        raise click.UsageError("give a TRANSCRIPT or --example, not both")
    if example:
        from harnessmem.examples import example_path

        return example_path()
    if not transcript:
        raise click.UsageError("give a TRANSCRIPT file, or --example to replay the bundled example")
    return Path(transcript)


# ------------------------------------------------------------------------------ probes


def _probes(texts: tuple[str, ...], file: str | None) -> list[Probe]:
    """The probes of --probes FILE, then those of each --probe; a bad one is an error
    before anything runs."""
    from harnessmem.probes import parse_probe, read_probes

    probes = read_probes(file) if file is not None else []
    probes += [parse_probe(text, f"--probe {text!r}") for text in texts]
    return probes


def _ask(harness: MemoryHarness, probes: list[Probe], limit: int) -> ProbeReport:
    from harnessmem.probes import run_probes

    return run_probes(probes, search=harness.search, workspace=harness.workspace, limit=limit)


def _where(result: ProbeResult, limit: int) -> str:
    """Where a probe was found: ``MEMORY.md:5; search #2 memory/2026-03-10.md:8``."""
    places = []
    if result.memory_line is not None:
        places.append(f"MEMORY.md:{result.memory_line}")
    if result.rank is not None:
        places.append(f"search #{result.rank} {result.hit}")
    if places:
        return "; ".join(places)
    if result.on_file is not None:
        return f"not in the top {limit} hits; {result.on_file} holds it"
    return "no memory file holds it"


def _print_probes(retention: ProbeReport) -> None:
    limit = retention.limit
    rows = [
        [
            str(number),
            result.probe.question,
            result.probe.expected,
            "yes" if result.found else "MISSING",
            _where(result, limit),
        ]
        for number, result in enumerate(retention.results, 1)
    ]
    click.echo("")
    print_table(
        f"Probes (MEMORY.md, then the top {limit} search hits)",
        ["#", "question", "expected", "found", "where"],
        rows,
    )
    totals = retention.totals()
    line = (
        f"Probes: {totals['found']} of {totals['probes']} found ({retention.share:.0%}): "
        f"{totals['in_memory_md']} in MEMORY.md, {totals['in_search']} in the top {limit} "
        f"search hits"
    )
    if totals["missing"]:
        lost = totals["missing"] - totals["missing_on_file"]
        line += (
            f"; {totals['missing']} missing ({totals['missing_on_file']} on file but not "
            f"found by the search, {lost} in no memory file)"
        )
    click.echo(line + ".")


def _check_share(retention: ProbeReport, fail_under: float) -> None:
    if retention.share * 100 < fail_under:
        totals = retention.totals()
        raise CommandError(
            f"{totals['found']} of {totals['probes']} probes found ({retention.share:.0%}), "
            f"under --fail-under {fail_under:g}",
            code=EXIT_FAILED,
        )


def _on_terminal() -> bool:
    import sys

    return sys.stderr.isatty()


@contextmanager
def _progress_bar(show: bool, total: int, name: str) -> Iterator[Callable[[int], None] | None]:
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("replaying {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("messages"),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(name, total=total)
        yield lambda done: bar.update(task, completed=done)


# ------------------------------------------------------------------------------ the timeline


def _which_runs(transcript: Transcript) -> str:
    """``runs 3-5 of 200 in the file, each a session of its own (--sample picks others)``."""
    first, last = transcript.parts[0][0], transcript.parts[-1][0]
    chosen = first if len(transcript.parts) == 1 else f"{first} to {last}"
    every = "every run" if len(transcript.parts) == transcript.runs else chosen
    return (
        f"{every} of the {plural(transcript.runs, 'run')} in the file, each a session of its "
        "own (--sample 3 or --sample 3-5 picks runs)"
    )


def _print_timeline(
    report: ReplayReport,
    settings: HarnessSettings,
    path: Path,
    facts: int,
    transcript: Transcript,
) -> None:
    compaction, eviction = settings.compaction, settings.eviction
    days = ""
    if report.first_time is not None and report.last_time is not None:
        count = len({_day(t, settings) for t in (report.first_time, report.last_time)})
        days = ", spanning several days" if count > 1 else ""
    click.echo(
        f"Replaying {path.name}: {plural(report.messages, 'message')}, "
        f"{report.transcript_tokens:,} tokens{days}"
    )
    if transcript.conversation is not None:
        click.echo("  " + _which_conversation(transcript))
    if transcript.parts:
        click.echo("  " + _which_runs(transcript))
    click.echo(f"  into workspace {shown_url(report.workspace)} as session {report.session_id!r}")
    model = settings.model.name or "extractive (offline, no key)"
    triggers = [f"{compaction.trigger_messages} messages"] if compaction.trigger_messages else []
    if compaction.trigger_tokens:
        triggers.append(f"{compaction.trigger_tokens:,} tokens")
    click.echo(
        f"  model {model}; compaction at {' or '.join(triggers) or 'never'}; "
        f"tool results over {eviction.max_result_chars:,} chars go to files"
    )
    if report.shifted_by:
        moved = plural(round(report.shifted_by / 86_400), "day")
        click.echo(
            f"  dates moved {moved} later, so that the conversation ends within the last day "
            "(--keep-dates keeps them as written)"
        )
    if not report.events:
        click.echo("\nNothing happened: the conversation stayed under every threshold.")
        return
    timed = report.first_time is not None
    width = _FACT_CHARS
    day = None
    for event in report.events:
        if timed:
            current = _day(event.time, settings)
            if current != day:
                click.echo("\n" + click.style(current, bold=True))
                day = current
        elif day is None:
            click.echo("")
            day = "untimed"
        when = _clock_time(event.time, settings) + "  " if timed else ""
        where = "end" if event.phase == "end" else f"msg {event.index}"
        head, *details = _describe(event, facts, width)
        click.echo(f"  {when}{where:<7}  {head}")
        for line in details:
            click.echo(" " * (_INDENT - 7 + len(when)) + line)


def _which_conversation(transcript: Transcript) -> str:
    """``conversation conv-26 (1 of 5 in the file; --sample picks another): Caroline and
    Melanie, each a user with a name``."""
    names = transcript.conversations
    where = ""
    if len(names) > 1:
        number = names.index(str(transcript.conversation)) + 1
        where = f" ({number} of {len(names)} in the file; --sample picks another)"
    speakers = list(transcript.speakers)
    who = ""
    if speakers:
        listed = ", ".join(speakers[:-1]) + " and " if len(speakers) > 1 else ""
        who = f": {listed}{speakers[-1]}, each a user with a name"
    return f"conversation {transcript.conversation}{where}{who}"


def _day(moment: float, settings: HarnessSettings) -> str:
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(moment, ZoneInfo(settings.workspace.timezone)).strftime(
        "%A %Y-%m-%d"
    )


def _clock_time(moment: float, settings: HarnessSettings) -> str:
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(moment, ZoneInfo(settings.workspace.timezone)).strftime("%H:%M")


def _label(kind: str, color: str) -> str:
    return click.style(f"{kind:<12}", fg=color, bold=True) + " "


def _describe(event: ReplayEvent, facts: int, width: int) -> list[str]:
    """The lines of one timeline event: a headline, then details."""
    data = event.data
    if event.kind == "compaction":
        return _describe_compaction(data)
    if event.kind == "flush":
        entries = data["entries"]
        when = " (before compaction)" if event.phase == "before_reasoning" else ""
        line = f"{_label('flushed', 'green')}{plural(len(entries), 'fact')} -> {data['path']}{when}"
        if data.get("duplicates"):
            line += f"; {data['duplicates']} already on file"
        lines = [line]
        lines.extend(f"- {_clip(entry, width)}" for entry in entries[:facts])
        if facts and len(entries) > facts:
            lines.append(f"  ... and {len(entries) - facts} more")
        return lines
    if event.kind == "eviction":
        return [
            f"{_label('evicted', 'magenta')}{data['tool_name']} output of "
            f"{data['original_chars']:,} chars -> {data['path']}",
            f"the context keeps {data['kept_chars']:,} chars of it: head, tail and the path",
        ]
    if event.kind == "consolidation":
        return [_describe_consolidation(data, event.phase)]
    return [
        f"{_label('over budget', 'red')}MEMORY.md has {data['tokens']:,} tokens, over "
        f"context.max_tokens {data['max_tokens']:,}; consolidation requested"
    ]


def _describe_compaction(data: dict[str, Any]) -> list[str]:
    if not data["compacted"]:
        return [f"{_label('postponed', 'yellow')}compaction postponed: {data['reason']}"]
    trigger = {
        "messages": "message count",
        "tokens": "token count",
        "overflow": "overflow",
        "manual": "asked for",
    }
    line = (
        f"{_label('compacted', 'cyan')}{data['messages_before']} -> {data['messages_after']} "
        f"messages, {data['tokens_before']:,} -> {data['tokens_after']:,} tokens "
        f"(trigger: {trigger.get(data['trigger'], data['trigger'])})"
    )
    lines = [line]
    if data.get("offloaded") and data.get("offload_path"):
        lines.append(
            f"{plural(data['offloaded'], 'message')} summarised; raw copies in "
            f"{data['offload_path']}"
        )
    elif data.get("dropped"):
        lines.append(f"{plural(data['dropped'], 'message')} summarised")
    if data.get("degraded"):
        lines.append(f"degraded: {data['reason']}")
    return lines


def _describe_consolidation(data: dict[str, Any], phase: str) -> str:
    when = "overnight" if phase == "day end" else "at the end"
    files = len(data["files"])
    source = f"{files} daily log{'s' if files != 1 else ''}"
    if data["status"] == "consolidated":
        return (
            f"{_label('consolidated', 'blue')}MEMORY.md {data['tokens_before']:,} -> "
            f"{data['tokens_after']:,} tokens from {source} ({when})"
        )
    if data["status"] == "unchanged":
        return f"{_label('consolidated', 'blue')}nothing to add to MEMORY.md from {source}"
    reason = f": {data['reason']}" if data.get("reason") else ""
    return f"{_label('consolidation', 'yellow')}{data['status']}{reason}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_summary(report: ReplayReport, seconds: float) -> None:
    totals = report.totals()
    logs = totals["daily_logs"]
    parts = [
        plural(totals["compactions"], "compaction"),
        f"{plural(totals['facts'], 'fact')} in {plural(len(logs), 'daily log')}",
        f"{plural(totals['evictions'], 'tool result')} evicted",
    ]
    if report.memory_tokens:
        parts.append(f"MEMORY.md {report.memory_tokens:,} of {report.memory_budget:,} tokens")
    click.echo(f"\nDone in {seconds:.1f} s: " + ", ".join(parts) + ".")
    if report.peak_context_tokens and report.transcript_tokens > report.peak_context_tokens:
        click.echo(
            f"The model never saw more than {report.peak_context_tokens:,} tokens at once of "
            f"this {report.transcript_tokens:,}-token conversation."
        )
    share = report.upkeep_share
    if share is not None:
        jobs = ", ".join(
            f"{purpose} {tokens:,}" for purpose, tokens in sorted(report.upkeep_tokens.items())
        )
        click.echo(
            f"Memory upkeep sent {sum(report.upkeep_tokens.values()):,} tokens to its models "
            f"({jobs}): {share:.2f}x the {report.sent_tokens:,} tokens the agent's model was sent."
        )
    if not totals["facts"] and report.agent_calls:
        click.echo(
            "No new facts: they were already on file (a transcript replayed twice is "
            "flushed once), or the conversation held none the flush model kept."
        )
    for failure in report.flush_failures[:3]:
        click.echo(f"warning: a flush failed: {failure}", err=True)


def _print_next(workspace: str | None, example: bool) -> None:
    target = f" -w {shlex.quote(workspace)}" if workspace else ""
    query = EXAMPLE_QUERY if example else "<words to look for>"
    command = shlex.quote(invoked_as())
    click.echo("Next:")
    click.echo(f'  {command} search "{query}"{target}    find it again in memory')
    click.echo(f"  {command} status{target}    what the workspace holds now")
