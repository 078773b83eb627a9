"""The steps of a maintenance tick (private; the public names are in ``harnessmem.maintenance``).

Each step is a function ``(harness, now) -> StepDone`` that may raise :class:`StepSkipped`
(not applicable now, e.g. what it needs is not there) or anything else (it failed); the
scheduler turns each into a reported outcome, so one step's failure never stops the others.
Steps work through the workspace only, so they behave the same on a local folder,
``memory://`` and S3.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from harnessmem import layout
from harnessmem.audit import audit_files
from harnessmem.models.usage import ledger_files

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.workspace import FileInfo, Lease, Workspace

__all__ = [
    "ARCHIVE_DIR",
    "DEFAULT_STEPS",
    "MaintenanceStep",
    "StepDone",
    "StepSkipped",
    "archive_daily_logs",
    "consolidate_memory",
    "prune_audit_log",
    "prune_evicted_results",
    "prune_session_logs",
    "prune_session_records",
    "prune_usage_ledger",
    "reindex_workspace",
]

logger = logging.getLogger("harnessmem.maintenance")

ARCHIVE_DIR = layout.ARCHIVE_DIR
_DAY = 86400.0
_DETAIL_CHARS = 300
# Long enough for two deletes; a pruner that dies lets offload go on after this.
_SESSION_LEASE_TTL = 60.0


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


class StepSkipped(Exception):
    """Raised by a step that decides not to run; its message says why."""


@dataclass(frozen=True)
class StepDone:
    """What a step function returns: a line for the report, figures, the component's result.

    ``errors`` lists per-item failures of a step that carried on past them (one daily log
    that could not move does not keep the others in place); any makes the step ``failed``.
    ``idle`` says the step found nothing to do and changed nothing: the scheduler may then
    record it with the tick's next state write instead of one of its own (after a crash
    in between it runs once more, which repeats only its look).
    """

    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    result: Any = None
    errors: tuple[str, ...] = ()
    idle: bool = False


@dataclass(frozen=True)
class MaintenanceStep:
    """A named step: ``run(harness, now)`` does the work and returns a :class:`StepDone`.

    It may raise :class:`StepSkipped` (not applicable, with the reason) or anything else
    (failed). ``audit`` names the operation its changes are recorded as in the audit log
    (``archive``, ``prune``); None for a step whose component records its own
    (consolidation, reindex).
    """

    name: str
    run: Callable[[Kernel, float], StepDone]
    audit: str | None = None


def archive_daily_logs(kernel: Kernel, now: float) -> StepDone:
    """Move daily logs dated before today - retention (workspace time zone) to the archive."""
    workspace = kernel.workspace
    days = kernel.settings.maintenance.daily_file_retention_days
    today = datetime.fromtimestamp(now, ZoneInfo(kernel.settings.workspace.timezone)).date()
    cutoff = today - timedelta(days=days)
    moved = merged = 0
    errors: list[str] = []
    # Not recursive: memory/archive/ and memory/.history/ are below, never candidates.
    for path in workspace.list(layout.MEMORY_DIR, recursive=False):
        name = path.rsplit("/", 1)[-1]
        logged = layout.daily_log_date(path)
        if logged is None:
            continue
        try:
            day = date.fromisoformat(logged)
        except ValueError:  # 2026-13-45.md is a name, not a date
            continue
        if day >= cutoff:
            continue
        target = layout.archive_path(name)
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
    return StepDone(
        detail,
        {"archived": moved, "merged": merged},
        errors=tuple(errors),
        idle=not (total or errors),
    )


def consolidate_memory(kernel: Kernel, now: float) -> StepDone:
    """Run ``harness.consolidate()`` (skipped when ``consolidation.enabled`` is false)."""
    if not kernel.settings.consolidation.enabled:
        raise StepSkipped("consolidation.enabled is false")
    result = kernel.consolidator.consolidate(backoff=True)
    idle = getattr(result, "status", None) in ("nothing_new", "busy", "disabled", "deferred")
    return StepDone(_describe(result), result=result, idle=idle)


@dataclass
class _Tally:
    """What a pruning pass did; ``extra`` holds step-specific figures (marks, busy, ...)."""

    deleted: int = 0
    kept: int = 0
    unknown: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def bump(self, key: str) -> None:
        self.extra[key] = self.extra.get(key, 0) + 1

    def counts(self) -> dict[str, int]:
        # The extra figures only when not zero: a report names what happened.
        extra = {key: value for key, value in self.extra.items() if value}
        return {"deleted": self.deleted, "kept": self.kept, "unknown_age": self.unknown, **extra}

    def failed(self, path: str, exc: Exception) -> None:
        logger.warning("pruning %s failed: %s", path, exc)
        self.errors.append(f"{path}: {type(exc).__name__}: {exc}")


def _prune(
    files: list[FileInfo], cutoff: float, remove: Callable[[FileInfo], bool], tally: _Tally
) -> None:
    """Pass each file modified before ``cutoff`` to ``remove`` (True: it is gone).

    Age is the store's modification time (object stores: LastModified, which the listing
    carries), judged by the harness clock. Files whose store reports no time are kept and
    counted.
    """
    for info in files:
        try:
            if info.modified is None:
                tally.unknown += 1
            elif info.modified >= cutoff:
                tally.kept += 1
            elif remove(info):
                tally.deleted += 1
            else:
                tally.kept += 1
        except FileNotFoundError:
            continue  # deleted meanwhile by someone else: that is the goal anyway
        except Exception as exc:
            tally.failed(info.path, exc)


def _pruned_detail(tally: _Tally, what: str, days: int) -> str:
    detail = f"deleted {_plural(tally.deleted, what)} older than {days} days, kept {tally.kept}"
    if tally.unknown:
        detail += f" ({tally.unknown} of unknown age kept)"
    return detail


def _remove_empty_local_dir(kernel: Kernel, path: str, folder: str) -> None:
    """Drop a local folder left empty (object stores have no folders to leave behind)."""
    local = kernel.workspace.local_path(path)
    if local is None or path.count("/") <= folder.count("/") + 1:
        return
    with contextlib.suppress(OSError):  # not empty, or already gone: both fine
        os.rmdir(local.parent)


@contextlib.contextmanager
def _session_lease(workspace: Workspace, stem: str) -> Iterator[Lease | None]:
    """The lease offload holds while it writes a session's log and mark; None when held.

    Offload names it after ``safe_id`` of the session id: the stem of the log's file name.
    """
    lease = workspace.try_lock(layout.offload_lease(stem), ttl=_SESSION_LEASE_TTL)
    try:
        yield lease
    finally:
        if lease is not None:
            try:
                lease.release()
            except Exception as exc:  # it expires by itself; the pruning stands
                logger.warning("releasing the lease of session log %s failed: %s", stem, exc)


def _stem(path: str) -> str:
    """The safe session id of a listed session log or offload mark."""
    stem = layout.session_stem(path)
    assert stem is not None, path
    return stem


def _drop_mark(workspace: Workspace, stem: str, tally: _Tally) -> None:
    """Delete the offload mark of ``stem`` if there is one; the caller holds the lease."""
    mark = layout.offload_mark_path(stem)
    if workspace.exists(mark):
        workspace.delete(mark)
        tally.bump("marks_deleted")


def prune_session_logs(kernel: Kernel, now: float) -> StepDone:
    """Delete ``sessions/*.log.jsonl`` older than ``maintenance.session_retention_days``,
    each with its offload mark, and offload marks whose log is gone.

    Each session is handled under the lease offload takes for it, and the log is checked
    again under it: a log appended to since the listing stays, and a mark goes only once
    its log has gone (compaction relies on the mark while the log exists). A session
    whose lease is held (an offload is running) is kept for the next tick.
    """
    workspace = kernel.workspace
    days = kernel.settings.maintenance.session_retention_days
    cutoff = now - days * _DAY
    tally = _Tally(extra={"marks_deleted": 0, "busy": 0})
    listing = workspace.scan(layout.SESSIONS_DIR, recursive=False)
    logs = [info for info in listing if info.path.endswith(layout.SESSION_LOG_SUFFIX)]
    stems = {_stem(info.path) for info in logs}

    def remove(info: FileInfo) -> bool:
        stem = _stem(info.path)
        with _session_lease(workspace, stem) as lease:
            if lease is None:
                tally.bump("busy")
                return False
            try:
                current = workspace.info(info.path)
            except FileNotFoundError:
                _drop_mark(workspace, stem, tally)  # deleted by someone else: its mark too
                raise
            if current.modified is None or current.modified >= cutoff or current.size != info.size:
                return False  # written since the listing: in use again
            workspace.delete(info.path)
            _drop_mark(workspace, stem, tally)
            return True

    _prune(logs, cutoff, remove, tally)
    marks = [info.path for info in listing if info.path.endswith(layout.OFFLOAD_MARK_SUFFIX)]
    for path in marks:
        stem = _stem(path)
        if stem in stems:
            continue  # its log was listed: it went with it, or stays with it
        try:
            with _session_lease(workspace, stem) as lease:
                if lease is None:
                    tally.bump("busy")
                elif not workspace.exists(layout.session_log_path(stem)):
                    _drop_mark(workspace, stem, tally)
        except Exception as exc:
            tally.failed(path, exc)
    detail = _pruned_detail(tally, "session log", days)
    if tally.extra["marks_deleted"]:
        detail += f"; deleted {_plural(tally.extra['marks_deleted'], 'offload mark')}"
    if tally.extra["busy"]:
        detail += f"; {tally.extra['busy']} in use by an offload, left for the next tick"
    idle = not (tally.deleted or tally.extra["marks_deleted"] or tally.errors)
    return StepDone(detail, tally.counts(), errors=tuple(tally.errors), idle=idle)


def prune_usage_ledger(kernel: Kernel, now: float) -> StepDone:
    """Delete ``usage/<day>.jsonl`` dated more than ``maintenance.session_retention_days``
    before today (``workspace.timezone``); never today's or yesterday's.

    Aged by the date in the name, not the file's time: a file holds exactly the calls of
    its day, so ``harness.usage(days=n)`` reports the same for every retained day, and one
    listing dates every file.
    """
    days = kernel.settings.maintenance.session_retention_days
    return _prune_days(kernel, now, ledger_files(kernel.workspace), days, "usage ledger file")


def _prune_days(
    kernel: Kernel, now: float, files: Iterable[tuple[date, str]], days: int, what: str
) -> StepDone:
    """Delete the ``(day, path)`` files dated more than ``days`` before today (in
    ``workspace.timezone``); never today's or yesterday's."""
    today = datetime.fromtimestamp(now, ZoneInfo(kernel.settings.workspace.timezone)).date()
    # Yesterday's file stays whatever the setting: a writer whose clock or time zone lags
    # may still append to it.
    cutoff = today - timedelta(days=max(days, 1))
    tally = _Tally()
    for day, path in files:
        if day >= cutoff:
            tally.kept += 1
            continue
        try:
            kernel.workspace.delete(path)
            tally.deleted += 1
        except Exception as exc:
            tally.failed(path, exc)
    deleted = _plural(tally.deleted, what)
    detail = f"deleted {deleted} dated before {cutoff.isoformat()}, kept {tally.kept}"
    return StepDone(
        detail,
        {"deleted": tally.deleted, "kept": tally.kept},
        errors=tuple(tally.errors),
        idle=not (tally.deleted or tally.errors),
    )


def prune_session_records(kernel: Kernel, now: float) -> StepDone:
    """The ``prune_sessions`` step: :func:`prune_session_logs`, then
    :func:`prune_usage_ledger` (same retention); the usage figures are prefixed ``usage_``
    and shown when the workspace has a ledger."""
    logs = prune_session_logs(kernel, now)
    usage = prune_usage_ledger(kernel, now)
    idle = logs.idle and usage.idle
    if not any(usage.counts.values()) and not usage.errors:
        return logs
    counts = {**logs.counts, **{f"usage_{key}": n for key, n in usage.counts.items()}}
    return StepDone(
        f"{logs.detail}; {usage.detail}", counts, errors=logs.errors + usage.errors, idle=idle
    )


def prune_evicted_results(kernel: Kernel, now: float) -> StepDone:
    """Delete evicted tool results older than ``eviction.retention_days``."""
    settings = kernel.settings.eviction
    folder = settings.path.strip("/")
    days = settings.retention_days

    def remove(info: FileInfo) -> bool:
        kernel.workspace.delete(info.path)
        _remove_empty_local_dir(kernel, info.path, folder)
        return True

    tally = _Tally()
    files = [info for info in kernel.workspace.scan(folder) if info.path.endswith(".txt")]
    _prune(files, now - days * _DAY, remove, tally)
    detail = _pruned_detail(tally, "evicted result", days)
    idle = not (tally.deleted or tally.errors)
    return StepDone(detail, tally.counts(), errors=tuple(tally.errors), idle=idle)


def prune_audit_log(kernel: Kernel, now: float) -> StepDone:
    """Delete ``audit/<day>.jsonl`` dated more than ``audit.retention_days`` before today
    (``workspace.timezone``); never today's or yesterday's."""
    days = kernel.settings.audit.retention_days
    return _prune_days(kernel, now, audit_files(kernel.workspace), days, "audit file")


def reindex_workspace(kernel: Kernel, now: float) -> StepDone:
    """Run ``harness.reindex()`` (incremental)."""
    result = kernel.reindex()
    idle = not any(getattr(result, name, 1) for name in ("indexed", "removed"))
    return StepDone(_describe(result), result=result, idle=idle)


def _describe(result: Any) -> str:
    if result is None:
        return ""
    text = result if isinstance(result, str) else str(result)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


DEFAULT_STEPS: tuple[MaintenanceStep, ...] = (
    MaintenanceStep("archive", archive_daily_logs, audit="archive"),
    MaintenanceStep("consolidate", consolidate_memory),
    MaintenanceStep("prune_sessions", prune_session_records, audit="prune"),
    MaintenanceStep("prune_evictions", prune_evicted_results, audit="prune"),
    MaintenanceStep("prune_audit", prune_audit_log, audit="prune"),
    MaintenanceStep("reindex", reindex_workspace),
)
