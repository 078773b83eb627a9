"""Maintenance: the background ticks that archive, consolidate, prune and reindex.

See :mod:`harnessmem.maintenance.scheduler`.
"""

from harnessmem.maintenance._runner import MaintenanceRunner
from harnessmem.maintenance._steps import (
    ARCHIVE_DIR,
    DEFAULT_STEPS,
    MaintenanceStep,
    StepDone,
    StepSkipped,
)
from harnessmem.maintenance.scheduler import (
    OPPORTUNISTIC_STEPS,
    STATE_PATH,
    MaintenanceReport,
    MaintenanceScheduler,
    StepOutcome,
)

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
