"""Which model serves each purpose: routing by the settings, metering, the budget fallback.

:meth:`MemoryHarness.model_for <harnessmem.harness.MemoryHarness.model_for>` is the way
in. ``model.<purpose>`` overrides pick a backend, a model name and options per purpose;
each distinct route is built once. Every route is wrapped in a
:class:`~harnessmem.models.usage.MeteredModel` that records its calls in the harness's
:class:`~harnessmem.models.usage.UsageLedger` and, past ``model.budget``, sends flush and
consolidation calls to the offline extractive backend.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from harnessmem.plugins import model_registry
from harnessmem.settings.routes import PURPOSES, ModelRoute, model_route

if TYPE_CHECKING:
    from harnessmem.backends.base import ModelBackend
    from harnessmem.kernel import Kernel
    from harnessmem.models.usage import BudgetStatus, MeteredModel, UsageLedger

# PURPOSES, ModelRoute and model_route come from harnessmem.settings.routes.
__all__ = ["PURPOSES", "ModelRoute", "ModelRoutes", "model_route"]


class ModelRoutes:
    """The model backends of one harness, one per distinct route, and their usage ledger.

    ``override`` is the ``model=`` instance given to the harness: it then serves every
    purpose.
    """

    def __init__(self, kernel: Kernel, override: ModelBackend | None) -> None:
        self.kernel = kernel
        self.override = override
        self._lock = threading.RLock()
        self._models: dict[str, ModelBackend] = {}
        self._metered: dict[str, MeteredModel] = {}
        self._ledger: UsageLedger | None = None

    def model_for(self, purpose: str) -> MeteredModel:
        """The metered model serving ``purpose``; the same route gives the same object."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown model purpose {purpose!r}; expected one of {PURPOSES}")
        with self._lock:
            self.kernel.check_open()
            if self.override is not None:
                backend, key, limit = self.override, "override", None
            else:
                backend, key, limit = self._routed_backend(purpose)
            wrapper_key = f"{key}|{limit}"
            if wrapper_key not in self._metered:
                from harnessmem.models.usage import MeteredModel

                self._metered[wrapper_key] = MeteredModel(
                    backend,
                    ledger=self.ledger(),
                    max_tokens=limit,
                    fallback=self._budget_fallback,
                    clock=self.kernel.clock,
                    telemetry=self.kernel.telemetry,
                )
            return self._metered[wrapper_key]

    def start(self) -> None:
        """Build every purpose's model now, so that a missing API key or an unknown
        provider is a ``ConfigError`` before any work starts."""
        for purpose in PURPOSES:
            self.model_for(purpose)

    def backends(self) -> list[ModelBackend]:
        """The backends built from the settings so far (not ``override``), to close."""
        return list(self._models.values())

    def _routed_backend(self, purpose: str) -> tuple[ModelBackend, str, int]:
        """The backend the settings route ``purpose`` to (built once per distinct route)."""
        route = model_route(self.kernel.settings, purpose)
        key = json.dumps([route.backend, route.name, route.options], sort_keys=True, default=str)
        if key not in self._models:
            cls = model_registry().load(route.backend, setting=route.backend_setting)
            self._models[key] = cls.create(
                route.options, model_name=route.name, max_tokens=route.limit, where=route.where
            )
        return self._models[key], key, route.limit

    def _budget_fallback(self) -> ModelBackend:
        """The extractive backend that serves flush and consolidation past the budget."""
        with self._lock:
            key = json.dumps(["extractive", None, {}])
            if key not in self._models:
                cls = model_registry().load("extractive")
                self._models[key] = cls.create({}, model_name=None, where="model")
            return self._models[key]

    def ledger(self) -> UsageLedger:
        """The harness's usage ledger, made on first use; drained when the harness closes."""
        kernel = self.kernel
        with self._lock:
            if self._ledger is None:
                from harnessmem.models.usage import UsageLedger

                model = kernel.settings.model
                ledger = UsageLedger(
                    kernel.workspace if model.record_usage else None,
                    clock=kernel.clock,
                    timezone=kernel.settings.workspace.timezone,
                    budget=model.budget,
                    on_exceeded=self._announce_budget,
                )
                # On close: write what is pending, and every later call at once.
                kernel.on_close(lambda _seconds: ledger.drain())
                self._ledger = ledger
            return self._ledger

    def _announce_budget(self, status: BudgetStatus) -> None:
        from harnessmem.events import BudgetExceededEvent
        from harnessmem.models.usage import BUDGETED_PURPOSES

        self.kernel.hooks.budget_exceeded(
            BudgetExceededEvent(
                day=status.day,
                tokens=status.tokens,
                cost=status.cost,
                daily_tokens=status.daily_tokens,
                daily_cost=status.daily_cost,
                diverted=tuple(sorted(BUDGETED_PURPOSES)),
            )
        )
