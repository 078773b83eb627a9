"""What the usage ledger records and reports: one call's :class:`UsageRecord`, the
:class:`UsageTotals` summed over calls, today's :class:`BudgetStatus`, and the
:class:`UsageReport` of ``harness.usage()`` and ``harnessmem usage``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["BudgetStatus", "UsageRecord", "UsageReport", "UsageTotals"]


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
