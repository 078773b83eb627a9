"""``harnessmem status``: what a workspace holds, at a glance.

Workspace size, daily logs, MEMORY.md against its token budget, session logs and evicted
results, the index, the consolidation watermark, the last maintenance tick and the model
usage. Reads only: it neither syncs the index nor runs maintenance.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from harnessmem import layout
from harnessmem.cli._common import (
    command_harness,
    common_options,
    echo_json,
    human_size,
    plural,
    print_fields,
    shown_url,
)

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _files(harness: MemoryHarness) -> dict[str, tuple[int, float | None]]:
    """Workspace-relative path -> (size, modified), locks left out; one listing."""
    workspace = harness.workspace
    fs: Any = workspace.fs
    found: dict[str, tuple[int, float | None]] = {}
    try:
        listing = fs.find(workspace.root, detail=True)
    except FileNotFoundError:
        return found
    prefix = workspace.root.rstrip("/") + "/"
    for full, info in listing.items():
        path = str(full)
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        # Folder marker objects ("memory/", as init makes on S3) are no files.
        if rel.startswith(".locks/") or rel.endswith("/") or info.get("type") == "directory":
            continue
        modified = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
        if isinstance(modified, datetime):
            modified = modified.timestamp()
        found[rel] = (int(info.get("size") or 0), float(modified) if modified else None)
    return found


def _read(harness: MemoryHarness, path: str) -> str | None:
    try:
        return harness.workspace.read_text(path)
    except FileNotFoundError:
        return None


def collect_status(harness: MemoryHarness) -> dict[str, Any]:
    """Everything ``harnessmem status`` shows, as a JSON-ready dict."""
    from harnessmem.tokens import memory_tokens as count_memory

    settings = harness.settings
    files = _files(harness)
    daily = sorted(day for p in files if (day := layout.daily_log_date(p)))
    archived = [p for p in files if layout.daily_log_date(p, archived=True)]
    memory_text = _read(harness, layout.MEMORY_FILE)
    memory_tokens = count_memory(memory_text) if memory_text else 0
    sessions = [p for p in files if layout.source_of(p) == "sessions"]
    evicted_prefix = settings.eviction.path.strip("/") + "/"
    evicted = [p for p in files if p.startswith(evicted_prefix)]
    stats = harness.kernel.index.stats()
    return {
        "workspace": {
            "url": harness.workspace.url,
            "files": len(files),
            "bytes": sum(size for size, _ in files.values()),
        },
        "daily_logs": {
            "count": len(daily),
            "first": daily[0] if daily else None,
            "last": daily[-1] if daily else None,
            "bytes": sum(files[layout.daily_log_path(day)][0] for day in daily),
            "archived": len(archived),
        },
        "memory_md": {
            "exists": memory_text is not None,
            "tokens": memory_tokens,
            "budget": settings.consolidation.max_memory_tokens,
            "context_max_tokens": settings.context.max_tokens,
            "entries": sum(1 for line in (memory_text or "").splitlines() if line.startswith("- ")),
            "modified": _iso(files.get(layout.MEMORY_FILE, (0, None))[1]),
        },
        "sessions": {
            "logs": len(sessions),
            "evicted_results": len(evicted),
            "evicted_bytes": sum(files[p][0] for p in evicted),
        },
        "index": {
            "backend": settings.index.backend,
            "path": str(harness.kernel.index_path),
            "files": stats.files,
            "entries": stats.entries,
        },
        "watermark": _watermark(harness, files, daily),
        "maintenance": _maintenance(harness),
        "model": _model(harness),
        "usage": _usage(harness),
        "upkeep": _upkeep(harness),
    }


def _watermark(
    harness: MemoryHarness, files: dict[str, tuple[int, float | None]], daily: list[str]
) -> dict[str, Any]:
    raw = _read(harness, layout.CONSOLIDATION_STATE)
    done: dict[str, Any] = {}
    at: str | None = None
    if raw and raw.strip():
        try:
            data = json.loads(raw)
        except ValueError:
            at = raw.strip()[:40]  # the seed's bare ISO timestamp
            data = {}
        if isinstance(data, dict):
            at = data.get("consolidated_at") or at
            recorded = data.get("files")
            done = recorded if isinstance(recorded, dict) else {}
    waiting = {}
    for day in daily:
        name = f"{day}.md"
        size = files[layout.daily_log_path(day)][0]
        record = done.get(name)
        consolidated = int(record.get("bytes", 0)) if isinstance(record, dict) else 0
        if size > consolidated:
            waiting[name] = size - consolidated
    return {
        "consolidated_at": at,
        "waiting_logs": len(waiting),
        "waiting_bytes": sum(waiting.values()),
    }


def _maintenance(harness: MemoryHarness) -> dict[str, Any]:
    raw = _read(harness, layout.MAINTENANCE_STATE)
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict) or not isinstance(data.get("last_tick"), dict):
        return {"last_tick": None, "trigger": None, "steps": {}}
    tick, steps = data["last_tick"], data.get("steps")
    started = tick.get("started")
    outcomes = {
        name: str(step.get("outcome", ""))
        for name, step in (steps.items() if isinstance(steps, dict) else ())
        if isinstance(step, dict)
    }
    return {
        "last_tick": _iso(float(started)) if isinstance(started, int | float) else None,
        "trigger": tick.get("trigger"),
        "steps": outcomes,
    }


def _model(harness: MemoryHarness) -> dict[str, Any]:
    model = harness.settings.model
    backend = model.resolved_backend
    return {"backend": backend, "name": model.name, "offline": backend == "extractive"}


def _usage(harness: MemoryHarness) -> dict[str, Any]:
    report = harness.usage()
    total = report.total
    return {
        "days": len(report.days),
        "calls": total.calls,
        "failures": total.failures,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "cost": round(total.cost, 6),
        "budget": report.budget.describe() if report.budget is not None else None,
    }


#: The model jobs of memory upkeep, whose failures status shows.
_UPKEEP = ("summary", "flush", "consolidation")


def _upkeep(harness: MemoryHarness) -> dict[str, Any]:
    """Today's calls and failures of each upkeep job, and its latest error if it is failing.

    Failures are calls that raised and answers the harness rejected; a job that keeps
    failing is backed off (compaction uses automatic summaries meanwhile)."""
    report = harness.usage(days=1)
    totals = report.by_purpose()
    found = {}
    for purpose in _UPKEEP:
        done = totals.get(purpose)
        if done is None:
            continue
        found[purpose] = {
            "calls": done.calls,
            "failures": done.failures,
            "rejected": done.rejected,
            "failing": report.last_errors.get(purpose),
        }
    return found


def _lines(data: dict[str, Any]) -> list[tuple[str, str]]:
    ws, daily, memory = data["workspace"], data["daily_logs"], data["memory_md"]
    sessions, index, mark = data["sessions"], data["index"], data["watermark"]
    maint, model, usage = data["maintenance"], data["model"], data["usage"]
    size = f"{plural(ws['files'], 'file')}, {human_size(ws['bytes'])}"
    rows = [("workspace", f"{shown_url(ws['url'])}  ({size})")]
    if daily["count"]:
        span = daily["first"] if daily["count"] == 1 else f"{daily['first']} to {daily['last']}"
        logs = f"{daily['count']} ({span}, {human_size(daily['bytes'])})"
    else:
        logs = "none yet (the flush writes memory/YYYY-MM-DD.md after each agent call)"
    rows.append(("daily logs", f"{logs}, {daily['archived']} archived"))
    if memory["exists"]:
        share = memory["tokens"] * 100 // max(1, memory["budget"])
        over = (
            "  OVER BUDGET: consolidation trims it" if memory["tokens"] > memory["budget"] else ""
        )
        rows.append(
            (
                "MEMORY.md",
                f"{memory['tokens']:,} of {memory['budget']:,} tokens ({share}%), "
                f"{plural(memory['entries'], 'entry', 'entries')}, updated {memory['modified']}"
                + over,
            )
        )
    else:
        rows.append(("MEMORY.md", "not written yet (consolidation or memory_save creates it)"))
    rows.append(
        (
            "sessions",
            f"{plural(sessions['logs'], 'session log')}, "
            f"{plural(sessions['evicted_results'], 'evicted tool result')} "
            f"({human_size(sessions['evicted_bytes'])})",
        )
    )
    rows.append(
        (
            "index",
            f"{index['backend']} at {index['path']}: {plural(index['files'], 'file')}, "
            f"{plural(index['entries'], 'entry', 'entries')}",
        )
    )
    if mark["consolidated_at"]:
        state = (
            f"{plural(mark['waiting_logs'], 'daily log')} with {human_size(mark['waiting_bytes'])}"
            " not consolidated yet"
            if mark["waiting_logs"]
            else "every daily log consolidated"
        )
        rows.append(("watermark", f"consolidated at {mark['consolidated_at']}; {state}"))
    else:
        rows.append(("watermark", "never consolidated (harnessmem consolidate runs it)"))
    if maint["last_tick"]:
        steps = ", ".join(
            f"{name} {outcome.split(':', 1)[0]}" for name, outcome in maint["steps"].items()
        )
        rows.append(
            ("maintenance", f"last tick {maint['last_tick']} ({maint['trigger']}): {steps}")
        )
    else:
        rows.append(("maintenance", "never run here (harnessmem maintain runs one tick)"))
    if model["offline"]:
        rows.append(("model", "extractive (offline, no key; set model.name for an LLM)"))
    else:
        rows.append(("model", f"{model['backend']} {model['name'] or ''}".strip()))
    if usage["calls"]:
        cost = f", ${usage['cost']:.4f}" if usage["cost"] else ""
        text = (
            f"{plural(usage['calls'], 'call')} over {plural(usage['days'], 'day')}: "
            f"{usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion "
            f"tokens{cost}"
        )
        if usage["failures"]:
            text += f", {usage['failures']} failed"
        rows.append(("model usage", text))
    else:
        rows.append(("model usage", "no model calls recorded"))
    if usage["budget"]:
        rows.append(("budget", usage["budget"]))
    failing = [
        f"{purpose} {job['failures']} of {job['calls']} failed today"
        + (f" ({job['rejected']} answers rejected)" if job["rejected"] else "")
        + (f", failing now: {job['failing']}" if job["failing"] else "")
        for purpose, job in data["upkeep"].items()
        if job["failures"]
    ]
    if failing:
        rows.append(("upkeep", "; ".join(failing)))
    return rows


@click.command("status")
@common_options()
def status_command(config: str | None, workspace: str | None, as_json: bool) -> None:
    """Show what the workspace holds: size, daily logs, MEMORY.md against its budget,
    the index, the consolidation watermark, the last maintenance and the model usage."""
    with command_harness(config, workspace, existing=True) as harness:
        data = collect_status(harness)
    if as_json:
        echo_json(data)
        return
    print_fields(_lines(data))
