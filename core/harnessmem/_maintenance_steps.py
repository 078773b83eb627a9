"""The steps of a maintenance tick (private; the public names are in ``harnessmem.maintenance``).

Each step is a function ``(harness, now) -> StepDone`` that may raise :class:`StepSkipped`
(not applicable now), ``NotImplementedError`` (its component is unavailable) or anything
else (it failed); the scheduler turns each into a reported outcome, so one step's failure
never stops the others. Steps work through the workspace only, so they behave the same on
a local folder, ``memory://`` and S3.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness

__all__ = [
    "ARCHIVE_DIR",
    "DEFAULT_STEPS",
    "MaintenanceStep",
    "StepDone",
    "StepSkipped",
    "archive_daily_logs",
    "consolidate_memory",
    "prune_evicted_results",
    "prune_session_logs",
    "reindex_workspace",
]

logger = logging.getLogger("harnessmem.maintenance")

ARCHIVE_DIR = "memory/archive"
_DAILY = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_DAY = 86400.0
_DETAIL_CHARS = 300


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class StepSkipped(Exception):
    """Raised by a step that decides not to run; its message says why."""


@dataclass(frozen=True)
class StepDone:
    """What a step function returns: a line for the report, figures, the component's result.

    ``errors`` lists per-item failures of a step that carried on past them (one daily log
    that could not move does not keep the others in place); any makes the step ``failed``.
    """

    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    result: Any = None
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class MaintenanceStep:
    """A named step: ``run(harness, now)`` does the work and returns a :class:`StepDone`.

    It may raise :class:`StepSkipped` (not applicable), ``NotImplementedError`` (component
    unavailable) or anything else (failed).
    """

    name: str
    run: Callable[[MemoryHarness, float], StepDone]


def archive_daily_logs(harness: MemoryHarness, now: float) -> StepDone:
    """Move daily logs dated before today - retention (workspace time zone) to the archive."""
    workspace = harness.workspace
    days = harness.settings.maintenance.daily_file_retention_days
    today = datetime.fromtimestamp(now, ZoneInfo(harness.settings.workspace.timezone)).date()
    cutoff = today - timedelta(days=days)
    moved = merged = 0
    errors: list[str] = []
    # Not recursive: memory/archive/ and memory/.history/ are below, never candidates.
    for path in workspace.list("memory", recursive=False):
        name = path.rsplit("/", 1)[-1]
        match = _DAILY.fullmatch(name)
        if match is None:
            continue
        try:
            day = date.fromisoformat(match.group(1))
        except ValueError:  # 2026-13-45.md is a name, not a date
            continue
        if day >= cutoff:
            continue
        target = f"{ARCHIVE_DIR}/{name}"
        try:
            if workspace.exists(target):
                # A log for that day was archived before and written again since (a late
                # flush): merge, never overwrite. Append first, delete second, so a crash
                # in between leaves a duplicate, not a loss.
                text = workspace.read_text(path)
                workspace.append_text(target, "\n" + text if text else text)
                workspace.delete(path)
                merged += 1
            else:
                workspace.move(path, target)
                moved += 1
        except Exception as exc:
            logger.warning("archiving %s failed: %s", path, exc)
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    total = moved + merged
    detail = (
        f"archived {_plural(total, 'daily log')} dated before {cutoff.isoformat()}"
        + (f" ({merged} merged into an existing archive file)" if merged else "")
        if total
        else f"no daily log dated before {cutoff.isoformat()}"
    )
    return StepDone(detail, {"archived": moved, "merged": merged}, errors=tuple(errors))


def consolidate_memory(harness: MemoryHarness, now: float) -> StepDone:
    """Run ``harness.consolidate()`` (skipped when ``consolidation.enabled`` is false)."""
    if not harness.settings.consolidation.enabled:
        raise StepSkipped("consolidation.enabled is false")
    # Typed loosely: the consolidation work (issue 5) decides what its result object is.
    consolidate: Callable[[], Any] = harness.consolidate
    result = consolidate()
    return StepDone(_describe(result), result=result)


def _prune(
    harness: MemoryHarness, now: float, folder: str, suffix: str, days: int, what: str
) -> StepDone:
    """Delete files under ``folder`` ending in ``suffix`` not modified for ``days`` days.

    Age is the store's modification time (object stores: LastModified), judged by the
    harness clock: session logs are appended to, so their mtime is their last activity.
    Files whose store reports no time are kept and counted.
    """
    workspace = harness.workspace
    cutoff = now - days * _DAY
    deleted = kept = unknown = 0
    errors: list[str] = []
    # One listing with each file's time (one request per 1,000 files on S3).
    for info in workspace.scan(folder):
        path, modified = info.path, info.modified
        if not path.endswith(suffix):
            continue
        try:
            if modified is None:
                unknown += 1
            elif modified < cutoff:
                workspace.delete(path)
                deleted += 1
                _remove_empty_local_dir(harness, path, folder)
            else:
                kept += 1
        except FileNotFoundError:
            continue  # deleted meanwhile by someone else: that is the goal anyway
        except Exception as exc:
            logger.warning("pruning %s failed: %s", path, exc)
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    detail = f"deleted {_plural(deleted, what)} older than {days} days, kept {kept}"
    if unknown:
        detail += f" ({unknown} of unknown age kept)"
    counts = {"deleted": deleted, "kept": kept, "unknown_age": unknown}
    return StepDone(detail, counts, errors=tuple(errors))


def _remove_empty_local_dir(harness: MemoryHarness, path: str, folder: str) -> None:
    """Drop a local folder left empty (object stores have no folders to leave behind)."""
    local = harness.workspace.local_path(path)
    if local is None or path.count("/") <= folder.count("/") + 1:
        return
    with contextlib.suppress(OSError):  # not empty, or already gone: both fine
        os.rmdir(local.parent)


def prune_session_logs(harness: MemoryHarness, now: float) -> StepDone:
    """Delete ``sessions/*.log.jsonl`` older than ``maintenance.session_retention_days``."""
    days = harness.settings.maintenance.session_retention_days
    return _prune(harness, now, "sessions", ".log.jsonl", days, "session log")


def prune_evicted_results(harness: MemoryHarness, now: float) -> StepDone:
    """Delete evicted tool results older than ``eviction.retention_days``."""
    settings = harness.settings.eviction
    folder = settings.path.strip("/")
    return _prune(harness, now, folder, ".txt", settings.retention_days, "evicted result")


def reindex_workspace(harness: MemoryHarness, now: float) -> StepDone:
    """Run ``harness.reindex()`` (incremental)."""
    reindex = getattr(harness, "reindex", None)
    if reindex is None:
        raise NotImplementedError("this harness has no reindex()")
    result = reindex()
    return StepDone(_describe(result), result=result)


def _describe(result: Any) -> str:
    if result is None:
        return ""
    text = result if isinstance(result, str) else str(result)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


DEFAULT_STEPS: tuple[MaintenanceStep, ...] = (
    MaintenanceStep("archive", archive_daily_logs),
    MaintenanceStep("consolidate", consolidate_memory),
    MaintenanceStep("prune_sessions", prune_session_logs),
    MaintenanceStep("prune_evictions", prune_evicted_results),
    MaintenanceStep("reindex", reindex_workspace),
)
