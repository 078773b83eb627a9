"""Telemetry: OpenTelemetry traces and metrics of the memory layer (docs/observability.md).

:mod:`~harnessmem.telemetry.base` is the seam the components call (``kernel.telemetry``),
a no-op while ``telemetry.enabled`` is off; :mod:`~harnessmem.telemetry.otel` the
OpenTelemetry implementation, imported only when telemetry is on (the ``otel`` extra);
:mod:`~harnessmem.telemetry.names` the span, attribute and metric names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessmem.telemetry import names
from harnessmem.telemetry.base import (
    AttributeValue,
    Span,
    Telemetry,
    provider_of,
    usage_attributes,
)

if TYPE_CHECKING:
    from harnessmem.settings import TelemetrySettings
    from harnessmem.telemetry.otel import OpenTelemetry

__all__ = [
    "AttributeValue",
    "OpenTelemetry",
    "Span",
    "Telemetry",
    "names",
    "provider_of",
    "telemetry_from_settings",
    "usage_attributes",
]


def telemetry_from_settings(settings: TelemetrySettings) -> Telemetry:
    """The no-op :class:`Telemetry` while ``telemetry.enabled`` is off, else an
    :class:`~harnessmem.telemetry.otel.OpenTelemetry` (which imports opentelemetry)."""
    if not settings.enabled:
        return Telemetry()
    from harnessmem.telemetry.otel import OpenTelemetry

    return OpenTelemetry.from_settings(settings)


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetry":  # loaded on first use: it imports opentelemetry
        from harnessmem.telemetry.otel import OpenTelemetry

        return OpenTelemetry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
