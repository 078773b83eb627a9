"""Which backend, model name, options and answer cap the settings give each purpose.

Pure settings logic (no backend is loaded): :class:`~harnessmem.models.routes.ModelRoutes`
builds the backends from these routes, and the settings check validates them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from harnessmem.settings import HarnessSettings

__all__ = ["PURPOSES", "ModelRoute", "model_route"]

#: What a model is asked to do; each may be routed to its own backend (``model.<purpose>``).
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
