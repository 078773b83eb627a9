"""The base of the index suite's parts: the ``index`` fixture a backend overrides and the
check that skips a test by a capability the backend does not declare."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest

from harnessmem.backends.base import IndexBackend
from harnessmem.testing._suite import ConformanceSuite

__all__ = ["IndexSuiteBase"]


class IndexSuiteBase(ConformanceSuite):
    """What every part of :class:`~harnessmem.testing.IndexBackendSuite` relies on."""

    __harnessmem_suite__: ClassVar[bool] = True

    @pytest.fixture
    def index(self) -> Iterator[IndexBackend]:
        """Override: yield an empty backend, close it after the test."""
        raise NotImplementedError("override the index fixture of IndexBackendSuite")

    @staticmethod
    def require(index: IndexBackend, capability: str) -> None:
        if capability not in index.capabilities:
            pytest.skip(f"{type(index).__name__} does not declare the {capability!r} capability")
