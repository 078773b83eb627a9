"""Model usage and cost: a ledger of every call, per purpose and model, and the daily budget.

:class:`MeteredModel` is what ``MemoryHarness.model_for`` hands out: it forwards each call to
the configured backend, records it in the harness's :class:`UsageLedger`, and enforces
``model.budget``: once today's metered spend reaches a limit, ``flush`` and
``consolidation`` calls go to the offline ``extractive`` backend instead (a warning is
logged once per day, and the fallback calls are counted); ``summary`` calls are never
diverted, because compaction must keep the conversation within its window.

With ``model.record_usage`` (the default) every call becomes one JSON line of
``usage/<YYYY-MM-DD>.jsonl`` in the workspace (day in ``workspace.timezone``), so reports
and the budget include other processes and replicas. Lines are appended in batches (every
30 s or 64 calls, before a report, and when the harness closes); a process that dies loses
at most its last batch. A failed append is logged once and the call still succeeds: usage is
telemetry, never a reason to lose work. Other processes' spending reaches the budget check
within ``UsageLedger.refresh`` seconds (60) plus their batch delay. Maintenance deletes
the files dated more than ``maintenance.session_retention_days`` before today (never
today's or yesterday's; see :func:`ledger_files`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

from harnessmem import layout
from harnessmem.backends.base import Completion, ModelBackend
from harnessmem.errors import ModelError
from harnessmem.telemetry import Span, Telemetry, names, provider_of, usage_attributes

if TYPE_CHECKING:
    from harnessmem.settings import ModelBudgetSettings
    from harnessmem.workspace import Workspace

__all__ = [
    "BudgetStatus",
    "MeteredModel",
    "UsageLedger",
    "UsageRecord",
    "UsageReport",
    "UsageTotals",
    "ledger_files",
]

logger = logging.getLogger("harnessmem.models")

#: Purposes the daily budget may divert to the extractive backend.
BUDGETED_PURPOSES = frozenset({"flush", "consolidation"})


def ledger_files(workspace: Workspace) -> list[tuple[date, str]]:
    """The ledger's day files as ``(day, path)``, oldest first, from one listing.

    A file holds only the calls of the day in its name (in the writer's
    ``workspace.timezone``), so the name dates every line in it; names that are not
    dates are left out.
    """
    found = []
    for path in workspace.list(layout.USAGE_DIR, recursive=False):
        day = layout.usage_day(path)
        if day is None:
            continue
        try:
            found.append((date.fromisoformat(day), path))
        except ValueError:  # 2026-13-45.jsonl is a name, not a date
            continue
    return sorted(found)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model call: when, for what, by which model and backend, and what it cost.

    A record with ``rejected`` set is not a call: it marks that the harness rejected the
    answer of the call recorded before it (``error`` says why), so that failures of an
    upkeep model that answers junk are counted like its errors.
    """

    at: float
    purpose: str
    model: str
    backend: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    ok: bool = True
    metered: bool = True
    fallback: bool = False
    error: str | None = None
    rejected: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> UsageRecord | None:
        """The record of one ledger line; None for a torn or foreign line."""
        try:
            data = json.loads(line)
            return cls(
                at=float(data["at"]),
                purpose=str(data["purpose"]),
                model=str(data["model"]),
                backend=str(data["backend"]),
                prompt_tokens=int(data.get("prompt_tokens") or 0),
                completion_tokens=int(data.get("completion_tokens") or 0),
                cost=None if data.get("cost") is None else float(data["cost"]),
                ok=bool(data.get("ok", True)),
                metered=bool(data.get("metered", True)),
                fallback=bool(data.get("fallback", False)),
                error=data.get("error"),
                rejected=bool(data.get("rejected", False)),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Sums over calls. ``cost`` adds the known prices; ``unpriced`` counts calls without one.
    ``failures`` counts calls that raised and answers the harness rejected (``rejected``)."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    rejected: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, record: UsageRecord) -> UsageTotals:
        if record.rejected:
            return replace(self, failures=self.failures + 1, rejected=self.rejected + 1)
        return UsageTotals(
            calls=self.calls + 1,
            failures=self.failures + (not record.ok),
            prompt_tokens=self.prompt_tokens + record.prompt_tokens,
            completion_tokens=self.completion_tokens + record.completion_tokens,
            cost=self.cost + (record.cost or 0.0),
            unpriced=self.unpriced + (record.ok and record.cost is None),
            rejected=self.rejected,
        )

    def __add__(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(
            *(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__)
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """Today's metered spend against ``model.budget`` (a limit is None when unset)."""

    day: str
    tokens: int
    cost: float
    daily_tokens: int | None
    daily_cost: float | None

    @property
    def exceeded(self) -> bool:
        """Whether a limit is reached: flush and consolidation then run offline."""
        return (self.daily_tokens is not None and self.tokens >= self.daily_tokens) or (
            self.daily_cost is not None and self.cost >= self.daily_cost
        )

    def describe(self) -> str:
        parts = []
        if self.daily_tokens is not None:
            parts.append(f"{self.tokens:,} of {self.daily_tokens:,} tokens")
        if self.daily_cost is not None:
            parts.append(f"${self.cost:.4f} of ${self.daily_cost:.4f}")
        return f"{self.day}: " + ", ".join(parts)


@dataclass(frozen=True)
class UsageReport:
    """Totals per purpose and model over ``days`` (oldest first), and the budget state.

    ``purposes[purpose][model]`` holds the totals of one purpose served by one model;
    ``fallbacks`` counts the calls the budget sent to the extractive backend;
    ``last_errors[purpose]`` is the latest failure (an error or a rejected answer) of a
    purpose whose latest outcome was a failure.
    """

    days: tuple[str, ...]
    purposes: Mapping[str, Mapping[str, UsageTotals]]
    fallbacks: int = 0
    budget: BudgetStatus | None = None
    last_errors: Mapping[str, str] = field(default_factory=dict)
    #: The totals of each day that has calls (``YYYY-MM-DD``, in the ledger's time zone).
    per_day: Mapping[str, UsageTotals] = field(default_factory=dict)

    @property
    def total(self) -> UsageTotals:
        return sum(self.by_purpose().values(), UsageTotals())

    def by_purpose(self) -> dict[str, UsageTotals]:
        return {p: sum(m.values(), UsageTotals()) for p, m in self.purposes.items()}

    def by_model(self) -> dict[str, UsageTotals]:
        found: dict[str, UsageTotals] = {}
        for models in self.purposes.values():
            for model, totals in models.items():
                found[model] = found.get(model, UsageTotals()) + totals
        return found

    def as_dict(self) -> dict[str, Any]:
        budget = None
        if self.budget is not None:
            budget = {**asdict(self.budget), "exceeded": self.budget.exceeded}
        return {
            "days": list(self.days),
            "total": self.total.as_dict(),
            "purposes": {
                p: {m: t.as_dict() for m, t in models.items()}
                for p, models in self.purposes.items()
            },
            "fallbacks": self.fallbacks,
            "budget": budget,
            "last_errors": dict(self.last_errors),
        }


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


@dataclass
class _Route:
    """What a metered model needs from the harness."""

    ledger: UsageLedger
    max_tokens: int | None
    fallback: Callable[[], ModelBackend] | None
    clock: Callable[[], float]
    telemetry: Telemetry


class MeteredModel(ModelBackend):
    """A backend as the harness hands it out: usage recorded, budget applied.

    ``backend`` is the configured backend; ``options`` and ``context`` are its own, so
    code that inspects a model sees the real settings. ``max_tokens`` is the answer cap of
    the purpose this route serves, used when a call passes none. ``close`` does nothing:
    the harness closes the backends it created.
    """

    name: ClassVar[str] = "metered"

    def __init__(
        self,
        backend: ModelBackend,
        *,
        ledger: UsageLedger,
        max_tokens: int | None = None,
        fallback: Callable[[], ModelBackend] | None = None,
        clock: Callable[[], float] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        super().__init__(backend.options, **backend.context)
        self.backend = backend
        self._route = _Route(
            ledger, max_tokens, fallback, clock or ledger.clock, telemetry or Telemetry()
        )
        # The model that last answered, to name it in the records of failed calls.
        self._answered: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"<MeteredModel {type(self.backend).__name__} {self.backend.model_name or ''}>"

    @property
    def ledger(self) -> UsageLedger:
        return self._route.ledger

    def _target(self, purpose: str) -> tuple[ModelBackend, bool]:
        route = self._route
        if purpose in BUDGETED_PURPOSES and route.fallback is not None and self.backend.metered:
            status = route.ledger.status()
            if status is not None and status.exceeded:
                route.ledger.warn_once(status)
                return route.fallback(), True
        return self.backend, False

    def _record(
        self,
        target: ModelBackend,
        purpose: str,
        fallback: bool,
        completion: Completion | None = None,
        error: BaseException | None = None,
    ) -> None:
        model = (
            self._answered.get(id(target))
            or target.model_name
            or target.name
            or type(target).__name__
        )
        record = UsageRecord(
            at=self._route.clock(),
            purpose=purpose,
            model=model,
            backend=target.name or type(target).__name__,
            metered=target.metered,
            fallback=fallback,
            ok=error is None,
            error=None if error is None else f"{type(error).__name__}: {error}"[:300],
        )
        if completion is not None:
            self._answered[id(target)] = completion.model or model
            record = replace(
                record,
                model=completion.model or model,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cost=completion.cost,
            )
        self._route.ledger.record(record)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Forward to the backend (or the budget fallback) and record the call (in the
        usage ledger, and as a ``chat`` span when telemetry is on)."""
        target, fallback = self._target(purpose)
        limit = max_tokens if max_tokens is not None else self._route.max_tokens
        with self._span(target, purpose, fallback, limit) as span:
            try:
                completion = target.complete(messages, purpose=purpose, max_tokens=limit)
            except ModelError as exc:
                self._record(target, purpose, fallback, error=exc)
                raise
            self._record(target, purpose, fallback, completion)
            _usage(span, completion)
        return completion

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Async twin of :meth:`complete`."""
        target, fallback = self._target(purpose)
        limit = max_tokens if max_tokens is not None else self._route.max_tokens
        with self._span(target, purpose, fallback, limit) as span:
            try:
                completion = await target.acomplete(messages, purpose=purpose, max_tokens=limit)
            except ModelError as exc:
                self._record(target, purpose, fallback, error=exc)
                raise
            self._record(target, purpose, fallback, completion)
            _usage(span, completion)
        return completion

    def _span(
        self, target: ModelBackend, purpose: str, fallback: bool, limit: int | None
    ) -> AbstractContextManager[Span]:
        telemetry = self._route.telemetry
        if not telemetry.enabled:
            return telemetry.model_call(purpose, None, "", None)  # the shared no-op
        model = target.model_name or None
        provider = provider_of(model, target.name or type(target).__name__)
        span = telemetry.model_call(purpose, model, provider, limit)
        if fallback:
            return _flagged(span)
        return span

    def rejected(self, purpose: str, reason: str) -> None:
        """Record that the harness rejected the last answer for ``purpose`` (junk, a
        refusal, over its bound): it counts as a failure in the usage report."""
        backend = self.backend
        self._route.ledger.record(
            UsageRecord(
                at=self._route.clock(),
                purpose=purpose,
                model=self._answered.get(id(backend)) or backend.model_name or backend.name,
                backend=backend.name or type(backend).__name__,
                metered=backend.metered,
                ok=False,
                error=reason[:300],
                rejected=True,
            )
        )

    def close(self) -> None:
        """Nothing: the harness closes the backend."""


def _usage(span: Span, completion: Completion) -> None:
    if span.recording:
        span.set_attributes(
            usage_attributes(
                model=completion.model,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cache_read_tokens=completion.cache_read_tokens,
                finish_reason=completion.finish_reason,
            )
        )


@contextmanager
def _flagged(span: AbstractContextManager[Span]) -> Iterator[Span]:
    """A model call the budget sent to the offline backend: ``harnessmem.fallback``."""
    with span as opened:
        opened.set(names.FALLBACK, True)
        yield opened
