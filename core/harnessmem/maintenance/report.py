"""What a maintenance tick did: :class:`MaintenanceReport` and one :class:`StepOutcome`
per step (``harness.maintain()`` returns the report; ``on_maintenance`` carries it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["MaintenanceReport", "StepOutcome", "iso_utc"]


def iso_utc(ts: float) -> str:
    """``ts`` (seconds since the epoch) as an ISO time in UTC, to the second."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class StepOutcome:
    """What one step of a tick did.

    ``status`` is ``"done"``, ``"skipped"`` (not run: within the window, disabled, the
    lease was lost, or the step raised :class:`StepSkipped`) or ``"failed"`` (it raised
    anything else; logged). ``counts`` holds the step's figures (files archived,
    deleted, ...); ``result`` whatever the component returned (e.g. a consolidation result).
    """

    name: str
    status: str
    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    started: float | None = None
    seconds: float = 0.0
    result: Any = None

    @property
    def outcome(self) -> str:
        """``"<status>: <detail>"``, as events and the CLI show it."""
        return f"{self.status}: {self.detail}" if self.detail else self.status

    @property
    def ran(self) -> bool:
        """Whether the step was attempted in this tick (anything but skipped)."""
        return self.status != "skipped"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "counts": dict(self.counts),
            "started": self.started,
            "seconds": round(self.seconds, 6),
        }


@dataclass(frozen=True)
class MaintenanceReport:
    """The outcome of one tick: every requested step, in order, with its outcome.

    ``skipped_reason`` is set when the tick did not run at all (another process held the
    lease); each step then reads ``skipped``. ``trigger`` is ``"manual"``, ``"interval"``
    or ``"request"``.
    """

    trigger: str
    started: float
    finished: float
    steps: tuple[StepOutcome, ...]
    skipped_reason: str | None = None

    def step(self, name: str) -> StepOutcome:
        """The outcome of step ``name``; KeyError naming the steps of this tick."""
        for outcome in self.steps:
            if outcome.name == name:
                return outcome
        raise KeyError(f"no step {name!r} in this tick; steps: {[s.name for s in self.steps]}")

    @property
    def outcomes(self) -> dict[str, str]:
        """Step name to ``"<status>: <detail>"``."""
        return {s.name: s.outcome for s in self.steps}

    @property
    def ran(self) -> bool:
        """Whether any step was attempted."""
        return any(s.ran for s in self.steps)

    @property
    def failed(self) -> tuple[str, ...]:
        """Names of the steps that raised."""
        return tuple(s.name for s in self.steps if s.status == "failed")

    @property
    def ok(self) -> bool:
        """True when no step failed (skipped steps are not failures)."""
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``harnessmem maintain --json`` prints it)."""
        return {
            "trigger": self.trigger,
            "started": self.started,
            "finished": self.finished,
            "ran": self.ran,
            "ok": self.ok,
            "skipped_reason": self.skipped_reason,
            "steps": [s.as_dict() for s in self.steps],
        }

    def __str__(self) -> str:
        head = f"maintenance tick ({self.trigger}) at {iso_utc(self.started)}"
        if self.skipped_reason:
            head += f": skipped, {self.skipped_reason}"
        width = max((len(s.name) for s in self.steps), default=0)
        return "\n".join([head, *(f"  {s.name.ljust(width)}  {s.outcome}" for s in self.steps)])
