"""The usage ledger: every model call recorded in batches to ``usage/<YYYY-MM-DD>.jsonl``
(or kept in memory), reported per purpose and model, and today's metered spend checked
against ``model.budget``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo

from harnessmem import layout
from harnessmem.models.report import BudgetStatus, UsageRecord, UsageReport, UsageTotals

if TYPE_CHECKING:
    from harnessmem.settings import ModelBudgetSettings
    from harnessmem.workspace import Workspace

__all__ = ["UsageLedger", "ledger_files"]

logger = logging.getLogger("harnessmem.models")


def ledger_files(workspace: Workspace) -> list[tuple[date, str]]:
    """The ledger's day files as ``(day, path)``, oldest first, from one listing.

    A file holds only the calls of the day in its name (in the writer's
    ``workspace.timezone``), so the name dates every line in it; names that are not
    dates are left out.
    """
    return layout.day_files(layout.USAGE_DIR, workspace.list(layout.USAGE_DIR, recursive=False))


class UsageLedger:
    """Records calls, reports totals and answers "is today's budget spent?"; thread-safe.

    Persisting, records are written in batches (every ``flush_interval`` seconds or
    ``flush_size`` records, before a report, and when the harness closes), so that an object
    store sees one conditional append per batch instead of one per call. Not persisting (or
    when a write fails) they are kept in memory as totals.
    """

    #: Seconds between re-reads of today's file for the budget (other processes' calls).
    refresh: ClassVar[float] = 60.0
    #: Longest time a record waits in memory before it is written.
    flush_interval: ClassVar[float] = 30.0
    #: Records that make a batch worth writing at once.
    flush_size: ClassVar[int] = 64

    def __init__(
        self,
        workspace: Workspace | None,
        *,
        clock: Callable[[], float],
        timezone: str = "UTC",
        budget: ModelBudgetSettings | None = None,
        on_exceeded: Callable[[BudgetStatus], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.on_exceeded = on_exceeded
        self.clock = clock
        self.zone = ZoneInfo(timezone)
        self.budget = budget
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()  # a batch write and a budget re-read never interleave
        self._pending: list[UsageRecord] = []  # recorded, not written yet
        self._first_pending = 0.0
        # Calls kept in memory (not persisting, or their write failed), as totals.
        self._kept: dict[tuple[str, str, str], UsageTotals] = {}
        self._kept_fallbacks: dict[str, int] = {}
        self._kept_metered: dict[str, UsageTotals] = {}
        self._today = ""
        self._read_at = float("-inf")
        self._base = UsageTotals()  # today's metered calls in the file at the last read
        self._written = UsageTotals()  # this process's metered calls written since then
        self._warned_day = ""
        self._write_failed = False
        self._write_through = False

    def day_of(self, timestamp: float) -> str:
        return datetime.fromtimestamp(timestamp, self.zone).date().isoformat()

    def _path(self, day: str) -> str:
        return layout.usage_path(day)

    # -- writing ---------------------------------------------------------------------------------

    def _keep(self, records: Iterable[UsageRecord]) -> None:
        """Add ``records`` to the in-memory totals; the caller holds the lock."""
        for record in records:
            day = self.day_of(record.at)
            key = (day, record.purpose, record.model)
            self._kept[key] = self._kept.get(key, UsageTotals()).add(record)
            self._kept_fallbacks[day] = self._kept_fallbacks.get(day, 0) + record.fallback
            if record.metered:
                self._kept_metered[day] = self._kept_metered.get(day, UsageTotals()).add(record)

    def record(self, record: UsageRecord) -> None:
        """Add one call; persisting, it is written with the next batch."""
        with self._lock:
            if self.workspace is None:
                self._keep([record])
                return
            if not self._pending:
                self._first_pending = self.clock()
            self._pending.append(record)
            due = (
                self._write_through
                or len(self._pending) >= self.flush_size
                or self.clock() - self._first_pending >= self.flush_interval
            )
        if due:
            self.flush()

    def drain(self) -> None:
        """Write what is pending, and write every later record at once (the harness closes)."""
        with self._lock:
            self._write_through = True
        self.flush()

    def flush(self) -> None:
        """Write the pending records now (a failed write keeps them in memory, logged once)."""
        if self.workspace is None:
            return
        with self._io_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            by_day: dict[str, list[UsageRecord]] = {}
            for record in batch:
                by_day.setdefault(self.day_of(record.at), []).append(record)
            for day, records in by_day.items():
                text = "".join(record.to_json() + "\n" for record in records)
                try:
                    self.workspace.append_text(self._path(day), text)
                except Exception as exc:  # telemetry must not fail the calls it describes
                    with self._lock:
                        self._keep(records)
                        first = not self._write_failed
                        self._write_failed = True
                    if first:
                        logger.warning(
                            "recording model usage in %s failed (%s: %s); keeping it in memory",
                            self._path(day),
                            type(exc).__name__,
                            exc,
                        )
                    continue
                with self._lock:
                    if day == self._today:
                        for record in records:
                            if record.metered:
                                self._written = self._written.add(record)

    # -- reading ---------------------------------------------------------------------------------

    def _file_records(self, days: Iterable[str]) -> list[UsageRecord]:
        found: list[UsageRecord] = []
        if self.workspace is None:
            return found
        for day in sorted(set(days)):
            try:
                text = self.workspace.read_text(self._path(day))
            except FileNotFoundError:
                continue
            found.extend(
                record
                for line in text.splitlines()
                if (record := UsageRecord.from_json(line)) is not None
            )
        return found

    def _recorded_days(self) -> list[str]:
        days = set()
        if self.workspace is not None:
            for path in self.workspace.list(layout.USAGE_DIR, recursive=False):
                if path.endswith(".jsonl"):
                    days.add(path.rsplit("/", 1)[-1].removesuffix(".jsonl"))
        with self._lock:
            days.update(day for day, _, _ in self._kept)
        return sorted(days)

    def report(self, *, days: int | None = None) -> UsageReport:
        """Totals over the last ``days`` days (today included), or over every recorded day."""
        if days is not None and days < 1:
            raise ValueError(f"days must be >= 1, got {days}")
        self.flush()
        if days is None:
            wanted = self._recorded_days()
        else:
            now = self.clock()
            wanted = sorted({self.day_of(now - 86_400 * back) for back in range(days)})
        purposes: dict[str, dict[str, UsageTotals]] = {}
        fallbacks = 0
        latest: dict[str, UsageRecord] = {}
        per_day: dict[str, UsageTotals] = {}
        for record in self._file_records(wanted):
            models = purposes.setdefault(record.purpose, {})
            models[record.model] = models.get(record.model, UsageTotals()).add(record)
            day = self.day_of(record.at)
            per_day[day] = per_day.get(day, UsageTotals()).add(record)
            fallbacks += record.fallback
            known = latest.get(record.purpose)
            # A rejection marks the call just before it: at the same moment, it wins.
            if known is None or record.at > known.at or (record.at == known.at and record.rejected):
                latest[record.purpose] = record
        with self._lock:
            for (day, purpose, model), totals in self._kept.items():
                if day in wanted:
                    models = purposes.setdefault(purpose, {})
                    models[model] = models.get(model, UsageTotals()) + totals
                    per_day[day] = per_day.get(day, UsageTotals()) + totals
            fallbacks += sum(n for day, n in self._kept_fallbacks.items() if day in wanted)
        covered = tuple(wanted) if days is not None else tuple(self._recorded_days())
        errors = {
            purpose: record.error or "failed" for purpose, record in latest.items() if not record.ok
        }
        return UsageReport(
            days=covered,
            purposes=purposes,
            fallbacks=fallbacks,
            budget=self.status(),
            last_errors=errors,
            per_day=dict(sorted(per_day.items())),
        )

    def status(self) -> BudgetStatus | None:
        """Today's metered spend against the budget; None when no limit is set."""
        budget = self.budget
        if budget is None or (budget.daily_tokens is None and budget.daily_cost is None):
            return None
        now = self.clock()
        day = self.day_of(now)
        with self._lock:
            stale = day != self._today or now - self._read_at >= self.refresh
        if stale:
            with self._io_lock:
                base = UsageTotals()
                for record in self._file_records([day]):
                    if record.metered:
                        base = base.add(record)
                with self._lock:
                    self._today, self._read_at = day, now
                    self._base, self._written = base, UsageTotals()
        with self._lock:
            spent = self._base + self._written + self._kept_metered.get(day, UsageTotals())
            for record in self._pending:
                if record.metered and self.day_of(record.at) == day:
                    spent = spent.add(record)
        return BudgetStatus(
            day, spent.total_tokens, spent.cost, budget.daily_tokens, budget.daily_cost
        )

    def warn_once(self, status: BudgetStatus) -> None:
        """Log and announce, once per day, that upkeep jobs now go to the extractive backend."""
        with self._lock:
            if self._warned_day == status.day:
                return
            self._warned_day = status.day
        logger.warning(
            "daily model budget reached (%s): flush and consolidation use the offline "
            "extractive backend until the day ends; compaction summaries still use the model",
            status.describe(),
        )
        if self.on_exceeded is not None:
            self.on_exceeded(status)
