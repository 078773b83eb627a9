"""Maintenance: the background ticks that archive, consolidate, prune and reindex.

See :mod:`harnessmem.maintenance.scheduler`.
"""

from harnessmem.maintenance.scheduler import (
    ARCHIVE_DIR,
    DEFAULT_STEPS,
    OPPORTUNISTIC_STEPS,
    STATE_PATH,
    MaintenanceReport,
    MaintenanceRunner,
    MaintenanceScheduler,
    MaintenanceStep,
    StepDone,
    StepOutcome,
    StepSkipped,
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
