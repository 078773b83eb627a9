"""``memory/.maintenance_state``: when each step last ran, and the last tick (the one
file every process's scheduler reads to run each step once per window)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harnessmem import layout

if TYPE_CHECKING:
    from harnessmem.workspace import Workspace

__all__ = ["STATE_PATH", "TickState"]

logger = logging.getLogger("harnessmem.maintenance")

STATE_PATH = layout.MAINTENANCE_STATE


class TickState:
    """``memory/.maintenance_state``: when each step last ran, and the last tick."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        data = data or {}
        steps = data.get("steps")
        self.steps: dict[str, dict[str, Any]] = dict(steps) if isinstance(steps, dict) else {}
        last = data.get("last_tick")
        self.last_tick: dict[str, Any] | None = dict(last) if isinstance(last, dict) else None

    @classmethod
    def read(cls, workspace: Workspace) -> TickState:
        try:
            # Read under the maintenance lease, which every writer of the state holds: in
            # a tick, its listing (made after the lease was taken) says whether the state
            # is there and at which version, and this process may hold that version.
            raw = workspace.decode_text(STATE_PATH, workspace.read_listed(STATE_PATH))
        except FileNotFoundError:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError:
            # Writes are atomic, so this is a hand edit: losing it means steps may run
            # once more, which every step tolerates.
            logger.warning("%s is not JSON; starting it afresh", STATE_PATH)
            return cls()
        return cls(data if isinstance(data, dict) else None)

    def last_run(self, name: str) -> float | None:
        at = self.steps.get(name, {}).get("at")
        return float(at) if isinstance(at, int | float) else None

    def last_full_tick(self) -> float | None:
        tick = self.last_tick or {}
        started = tick.get("started")
        if tick.get("trigger") == "request" or not isinstance(started, int | float):
            return None
        return float(started)

    def write(self, workspace: Workspace) -> None:
        data = {"version": 1, "steps": self.steps, "last_tick": self.last_tick}
        workspace.write_text(STATE_PATH, json.dumps(data, indent=2, sort_keys=True))
