"""Which model serves each purpose: routing by the settings, metering, the budget fallback.

:meth:`MemoryHarness.model_for <harnessmem.harness.MemoryHarness.model_for>` is the way
in. ``model.<purpose>`` overrides pick a backend, a model name and options per purpose;
each distinct route is built once. Every route is wrapped in a
:class:`~harnessmem.usage.MeteredModel` that records its calls in the harness's
:class:`~harnessmem.usage.UsageLedger` and, past ``model.budget``, sends flush and
consolidation calls to the offline extractive backend.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from harnessmem.plugins import model_registry

if TYPE_CHECKING:
    from harnessmem.backends.base import ModelBackend
    from harnessmem.harness import MemoryHarness
    from harnessmem.settings import HarnessSettings
    from harnessmem.usage import BudgetStatus, MeteredModel, UsageLedger

__all__ = ["PURPOSES", "ModelRoute", "ModelRoutes", "model_route"]

PURPOSES = ("summary", "flush", "consolidation")


class ModelRoute(NamedTuple):
    """What the settings give one purpose: backend, model name, options, answer cap.

    ``where`` is the settings section the name and options come from (``model`` or
    ``model.<purpose>``) and ``backend_setting`` the dotted setting that picked the
    backend, for error messages.
    """

    backend: str
    name: str | None
    options: dict[str, Any]
    limit: int
    where: str
    backend_setting: str


def model_route(settings: HarnessSettings, purpose: str) -> ModelRoute:
    """The route of ``purpose`` (one of :data:`PURPOSES`) under ``settings``."""
    base = settings.model
    route = getattr(base, purpose)
    name = route.name or base.name
    backend = route.backend or base.backend or ("litellm" if name else "extractive")
    options = {**base.options, **route.options}
    if backend != base.resolved_backend:
        # Another backend than model.backend: model.name and model.options are not its.
        name, options = route.name, dict(route.options)
    where = f"model.{purpose}" if (route.name or route.backend or route.options) else "model"
    limit = route.max_tokens or base.max_tokens
    if purpose == "consolidation" and route.max_tokens is None:
        # The answer is the whole MEMORY.md: room for its budget plus a margin.
        limit = max(limit, settings.consolidation.max_memory_tokens * 5 // 4)
    chosen = f"model.{purpose}.backend" if route.backend else "model.backend"
    return ModelRoute(backend, name, options, limit, where, chosen)


class ModelRoutes:
    """The model backends of one harness, one per distinct route, and their usage ledger.

    ``override`` is the ``model=`` instance given to the harness: it then serves every
    purpose. Shares the harness's lock.
    """

    def __init__(self, harness: MemoryHarness, override: ModelBackend | None) -> None:
        self.harness = harness
        self.override = override
        self._models: dict[str, ModelBackend] = {}
        self._metered: dict[str, MeteredModel] = {}
        self._ledger: UsageLedger | None = None

    def model_for(self, purpose: str) -> MeteredModel:
        """The metered model serving ``purpose``; the same route gives the same object."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown model purpose {purpose!r}; expected one of {PURPOSES}")
        with self.harness._lock:
            self.harness._check_open()
            if self.override is not None:
                backend, key, limit = self.override, "override", None
            else:
                backend, key, limit = self._routed_backend(purpose)
            wrapper_key = f"{key}|{limit}"
            if wrapper_key not in self._metered:
                from harnessmem.usage import MeteredModel

                self._metered[wrapper_key] = MeteredModel(
                    backend,
                    ledger=self.ledger(),
                    max_tokens=limit,
                    fallback=self._budget_fallback,
                    clock=self.harness.clock,
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
        route = model_route(self.harness.settings, purpose)
        key = json.dumps([route.backend, route.name, route.options], sort_keys=True, default=str)
        if key not in self._models:
            cls = model_registry().load(route.backend, setting=route.backend_setting)
            self._models[key] = cls.create(
                route.options, model_name=route.name, max_tokens=route.limit, where=route.where
            )
        return self._models[key], key, route.limit

    def _budget_fallback(self) -> ModelBackend:
        """The extractive backend that serves flush and consolidation past the budget."""
        with self.harness._lock:
            key = json.dumps(["extractive", None, {}])
            if key not in self._models:
                cls = model_registry().load("extractive")
                self._models[key] = cls.create({}, model_name=None, where="model")
            return self._models[key]

    def ledger(self) -> UsageLedger:
        """The harness's usage ledger, made on first use; drained when the harness closes."""
        harness = self.harness
        with harness._lock:
            if self._ledger is None:
                from harnessmem.usage import UsageLedger

                model = harness.settings.model
                ledger = UsageLedger(
                    harness.workspace if model.record_usage else None,
                    clock=harness.clock,
                    timezone=harness.settings.workspace.timezone,
                    budget=model.budget,
                    on_exceeded=self._announce_budget,
                )
                # On close: write what is pending, and every later call at once.
                harness._drainers.append(lambda _seconds: ledger.drain())
                self._ledger = ledger
            return self._ledger

    def _announce_budget(self, status: BudgetStatus) -> None:
        from harnessmem.events import BudgetExceededEvent
        from harnessmem.usage import BUDGETED_PURPOSES

        self.harness.hooks.budget_exceeded(
            BudgetExceededEvent(
                day=status.day,
                tokens=status.tokens,
                cost=status.cost,
                daily_tokens=status.daily_tokens,
                daily_cost=status.daily_cost,
                diverted=tuple(sorted(BUDGETED_PURPOSES)),
            )
        )
