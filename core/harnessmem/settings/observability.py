"""The ``[audit]`` and ``[telemetry]`` sections: the audit log of changes, and OpenTelemetry
traces and metrics (docs/observability.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from harnessmem.settings._section import Seconds, Section

__all__ = ["AuditSettings", "TelemetrySettings"]


class AuditSettings(Section):
    """The audit log: one record per change to the workspace (``audit/YYYY-MM-DD.jsonl``)."""

    enabled: bool = Field(
        True,
        description=(
            "Append a record to audit/<day>.jsonl for every change to the workspace: who "
            "(session, cli, mcp client, maintenance), when, which files, content hashes "
            "before and after; never the text."
        ),
    )
    retention_days: int = Field(
        365,
        gt=0,
        description=(
            "Audit files dated more than this many days before today are deleted by "
            "maintenance (today's and yesterday's never)."
        ),
    )


class TelemetrySettings(Section):
    """OpenTelemetry traces and metrics of the memory layer (docs/observability.md)."""

    enabled: bool = Field(
        False,
        description=(
            "Emit OpenTelemetry spans and metrics in the GenAI conventions (pip install "
            "'harnessmem[otel]'), through the providers your program set up, or those of "
            "telemetry.exporter. Off: no span, no cost, nothing imported."
        ),
    )
    capture_text: bool = Field(
        False,
        description=(
            "Add the opt-in text attributes: a search's query (gen_ai.memory.query.text) and "
            "the records written or found (gen_ai.memory.records), after redaction. A "
            "forget's query never."
        ),
    )
    exporter: Literal["none", "otlp", "console"] = Field(
        "none",
        description=(
            "'none': use the tracer and meter providers your program set up (no-ops until it "
            "does). 'otlp': harnessmem sets up the OpenTelemetry SDK and sends over OTLP/HTTP "
            "to telemetry.endpoint (pip install 'harnessmem[otel-export]'). 'console': the "
            "SDK, printing to stdout."
        ),
    )
    endpoint: str | None = Field(
        None,
        description=(
            "Base URL of the OTLP/HTTP receiver (a collector), e.g. http://127.0.0.1:4318; "
            "/v1/traces and /v1/metrics are added. Unset: OTEL_EXPORTER_OTLP_ENDPOINT, else "
            "http://localhost:4318."
        ),
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="HTTP headers of every OTLP request (an API key of a hosted backend).",
    )
    service_name: str = Field(
        "harnessmem",
        description="service.name of the resource, when harnessmem sets up the SDK.",
    )
    metric_interval: Seconds = Field(
        60.0,
        gt=0,
        description="Seconds between metric exports, when harnessmem sets up the SDK.",
    )
