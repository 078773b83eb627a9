"""Maintenance: the background ticks that archive, consolidate, prune and reindex.

See :mod:`harnessmem.maintenance.scheduler`.
"""

from harnessmem.maintenance._runner import MaintenanceRunner
from harnessmem.maintenance._state import STATE_PATH
from harnessmem.maintenance._steps import (
    ARCHIVE_DIR,
    DEFAULT_STEPS,
    MaintenanceStep,
    StepDone,
    StepSkipped,
)
from harnessmem.maintenance.report import MaintenanceReport, StepOutcome
from harnessmem.maintenance.scheduler import OPPORTUNISTIC_STEPS, MaintenanceScheduler

__all__ = [
    "ARCHIVE_DIR",
    "DEFAULT_STEPS",
    "OPPORTUNISTIC_STEPS",
    "STATE_PATH",
    "MaintenanceReport",
    "MaintenanceRunner",
    "MaintenanceScheduler",
    "MaintenanceStep",
    "StepDone",
    "StepOutcome",
    "StepSkipped",
]
