"""The base of the workspace suite's parts: the ``clock`` and ``workspace`` fixtures, a
second instance on the same storage, and the hypothesis settings the properties share."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings

from harnessmem.testing._suite import ConformanceSuite
from harnessmem.testing.clock import FakeClock
from harnessmem.workspace import Workspace

__all__ = ["FUZZ", "SHARED_PROPERTY", "WorkspaceSuiteBase"]

# Each subclass runs these on its own store (hence differing executors), and the fixtures
# are only read, never changed, by the examples (hence function-scoped fixtures are fine).
SHARED_PROPERTY = [HealthCheck.differing_executors, HealthCheck.function_scoped_fixture]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=SHARED_PROPERTY)


class WorkspaceSuiteBase(ConformanceSuite):
    """What every part of :class:`~harnessmem.testing.WorkspaceSuite` relies on."""

    __harnessmem_suite__: ClassVar[bool] = True

    @pytest.fixture
    def clock(self) -> FakeClock:
        """The clock the ``workspace`` fixture must pass to ``Workspace.open``."""
        return FakeClock()

    @pytest.fixture
    def workspace(self, clock: FakeClock) -> Workspace:
        """Override: an empty Workspace opened with ``clock=clock``."""
        raise NotImplementedError("override the workspace fixture of WorkspaceSuite")

    def _reopen(self, workspace: Workspace, clock: Any) -> Workspace:
        """A second instance on the same storage, as another replica would open it."""
        return Workspace.open(workspace.url, workspace.storage_options, clock=clock)
