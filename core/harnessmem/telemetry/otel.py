"""OpenTelemetry spans and metrics of the memory layer, in the GenAI semantic conventions.

Needs ``opentelemetry-api`` (``pip install 'harnessmem[otel]'``), imported only when
``telemetry.enabled`` is on or :class:`OpenTelemetry` is built. Spans and metrics go to the
tracer and meter providers given, else to the global ones your program set up (an agent
framework's, ``opentelemetry-instrument``'s), which are no-ops until something sets them.
With ``telemetry.exporter = "otlp"`` (or ``"console"``) harnessmem sets up the SDK itself
(``pip install 'harnessmem[otel-export]'``): its own providers, sending over OTLP/HTTP, shut
down (and flushed) when the harness closes.

Every span starts under the current span of the calling context, so the memory layer's
spans nest in the agent's own trace (its ``invoke_agent`` or ``chat`` span); work queued for
a background thread (a background flush, a maintenance tick a flush asked for) runs in the
context captured when it was queued. See docs/observability.md for the names.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ConfigError
from harnessmem.telemetry import names
from harnessmem.telemetry.base import AttributeValue, Span, Telemetry, records_json

try:
    from opentelemetry import metrics, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError(
        f"telemetry needs the OpenTelemetry API, which is not installed ({exc})",
        hint="pip install 'harnessmem[otel]', or turn telemetry.enabled off",
    ) from exc

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from harnessmem.settings import TelemetrySettings

__all__ = ["OpenTelemetry"]

#: The instrumentation scope of every span and metric.
SCOPE = "harnessmem"
#: Longest captured text attribute (characters); the rest is cut.
TEXT_LIMIT = 4_096
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
# The buckets the GenAI conventions advise for these histograms.
_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48]
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]


def _version() -> str:
    try:
        return version("harnessmem")
    except PackageNotFoundError:  # pragma: no cover - a source tree
        return "0"


def _clean(attributes: Mapping[str, AttributeValue | None] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


class _OtelSpan(Span):
    """A recording span; the attributes set through it are kept for the metrics."""

    def __init__(self, span: trace.Span, telemetry: OpenTelemetry) -> None:
        self._span = span
        self._telemetry = telemetry
        self.values: dict[str, Any] = {}

    @property
    def recording(self) -> bool:
        return self._span.is_recording()

    def set(self, key: str, value: AttributeValue | None) -> None:
        if value is not None:
            self.values[key] = value
            self._span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        clean = _clean(attributes)
        self.values.update(clean)
        self._span.set_attributes(clean)

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue | None]) -> None:
        self._span.add_event(name, _clean(attributes))

    def text(self, key: str, text: str) -> None:
        if self._telemetry.capture_text and self.recording:
            self.set(key, self._telemetry.redacted(text))

    def records(self, count: int, texts: Iterable[str] = (), ids: Iterable[str] = ()) -> None:
        self.set(names.MEMORY_RECORD_COUNT, count)
        if self._telemetry.capture_text and self.recording:
            shown = [self._telemetry.redacted(text) for text in texts]
            if shown:
                self.set(names.MEMORY_RECORDS, records_json(shown, list(ids)))


class OpenTelemetry(Telemetry):
    """Spans and metrics through OpenTelemetry (see the module docstring).

    ``tracer_provider`` / ``meter_provider``: where they go (default: the global providers).
    ``capture_text``: add the opt-in text attributes (a search's query, the records an
    operation wrote or found), after redaction; a forget's query never. ``owned``: providers
    this object made and shuts down in :meth:`shutdown`.
    """

    enabled = True

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_text: bool = False,
        owned: Iterable[Any] = (),
    ) -> None:
        release = _version()
        self.capture_text = capture_text
        self.tracer = trace.get_tracer(SCOPE, release, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, release, meter_provider=meter_provider)
        self._durations = meter.create_histogram(
            names.OPERATION_DURATION,
            unit="s",
            description="Duration of memory operations and upkeep model calls.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._tokens = meter.create_histogram(
            names.TOKEN_USAGE,
            unit="{token}",
            description="Tokens of the upkeep model calls, by purpose and model.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._counters = {
            name: meter.create_counter(name, unit=unit, description=description)
            for name, (unit, description) in names.COUNTERS.items()
        }
        self._owned = list(owned)
        self._store_id: Callable[[], str] = lambda: ""
        self._redact: Callable[[str], str] = lambda text: text

    @classmethod
    def from_settings(cls, settings: TelemetrySettings) -> OpenTelemetry:
        """The telemetry ``settings`` describe; with an ``exporter`` its own SDK providers."""
        if settings.exporter == "none":
            return cls(capture_text=settings.capture_text)
        tracer_provider, meter_provider = _sdk_providers(settings)
        return cls(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_text=settings.capture_text,
            owned=(tracer_provider, meter_provider),
        )

    def bind(self, store_id: Callable[[], str], redact: Callable[[str], str]) -> OpenTelemetry:
        bound = copy.copy(self)  # the tracer, meter and instruments are shared
        bound._store_id, bound._redact = store_id, redact
        bound._owned = []  # the unbound one shuts them down
        return bound

    def redacted(self, text: str) -> str:
        cleaned = self._redact(text)
        return cleaned if len(cleaned) <= TEXT_LIMIT else cleaned[: TEXT_LIMIT - 1] + "…"

    # spans ------------------------------------------------------------------------------------

    @contextmanager
    def _started(
        self, name: str, kind: str, attributes: Mapping[str, AttributeValue | None] | None
    ) -> Iterator[_OtelSpan]:
        with self.tracer.start_as_current_span(
            name,
            kind=_KINDS[kind],
            attributes=_clean(attributes),
            record_exception=True,
            set_status_on_exception=False,
        ) as raw:
            span = _OtelSpan(raw, self)
            try:
                yield span
            except BaseException as exc:
                span.set(names.ERROR_TYPE, type(exc).__qualname__)
                raw.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))
                raise

    def span(
        self,
        name: str,
        *,
        kind: str = "internal",
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> AbstractContextManager[Span]:
        return self._started(name, kind, attributes)

    @contextmanager
    def _memory(
        self,
        operation: str,
        session_id: str | None,
        attributes: Mapping[str, AttributeValue | None] | None,
    ) -> Iterator[Span]:
        started = time.perf_counter()
        values = {
            names.OPERATION_NAME: operation,
            names.MEMORY_STORE_ID: self._store_id() or None,
            names.CONVERSATION_ID: session_id,
            **(attributes or {}),
        }
        span: _OtelSpan | None = None
        try:
            with self._started(operation, "internal", values) as span:
                yield span
        finally:
            measured = {names.OPERATION_NAME: operation}
            if span is not None and names.ERROR_TYPE in span.values:
                measured[names.ERROR_TYPE] = span.values[names.ERROR_TYPE]
            self._durations.record(time.perf_counter() - started, measured)

    def memory(
        self,
        operation: str,
        *,
        session_id: str | None = None,
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> AbstractContextManager[Span]:
        return self._memory(operation, session_id, attributes)

    @contextmanager
    def _model_call(
        self, purpose: str, model: str | None, provider: str, max_tokens: int | None
    ) -> Iterator[Span]:
        started = time.perf_counter()
        values: dict[str, AttributeValue | None] = {
            names.OPERATION_NAME: names.CHAT,
            names.PROVIDER_NAME: provider,
            names.REQUEST_MODEL: model,
            names.REQUEST_MAX_TOKENS: max_tokens,
            names.PURPOSE: purpose,
        }
        name = f"{names.CHAT} {model}" if model else names.CHAT
        span: _OtelSpan | None = None
        try:
            with self._started(name, "client", values) as span:
                yield span
        finally:
            measured: dict[str, AttributeValue] = {
                names.OPERATION_NAME: names.CHAT,
                names.PROVIDER_NAME: provider,
                names.PURPOSE: purpose,
            }
            if model:
                measured[names.REQUEST_MODEL] = model
            seen = span.values if span is not None else {}
            if names.RESPONSE_MODEL in seen:
                measured[names.RESPONSE_MODEL] = seen[names.RESPONSE_MODEL]
            if names.ERROR_TYPE in seen:
                measured[names.ERROR_TYPE] = seen[names.ERROR_TYPE]
            self._durations.record(time.perf_counter() - started, measured)
            for kind, key in (
                ("input", names.USAGE_INPUT_TOKENS),
                ("output", names.USAGE_OUTPUT_TOKENS),
            ):
                if key in seen:
                    self._tokens.record(int(seen[key]), {**measured, names.TOKEN_TYPE: kind})

    def model_call(
        self, purpose: str, model: str | None, provider: str, max_tokens: int | None
    ) -> AbstractContextManager[Span]:
        return self._model_call(purpose, model, provider, max_tokens)

    def current(self) -> Span:
        return _OtelSpan(trace.get_current_span(), self)

    # metrics and the rest --------------------------------------------------------------------

    def count(
        self, metric: str, value: int = 1, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        self._counters[metric].add(value, dict(attributes or {}))

    def trace_ids(self) -> tuple[str, str] | None:
        span = trace.get_current_span()
        context = span.get_span_context()
        if not context.is_valid or not span.is_recording():
            return None
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)

    def shutdown(self) -> None:
        for provider in self._owned:
            provider.shutdown()
        self._owned = []


def _sdk_providers(settings: TelemetrySettings) -> tuple[Any, Any]:
    """The SDK tracer and meter providers of ``telemetry.exporter``."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise ConfigError(
            f"telemetry.exporter = {settings.exporter!r} needs the OpenTelemetry SDK, which "
            f"is not installed ({exc})",
            hint="pip install 'harnessmem[otel-export]', or leave telemetry.exporter at "
            "'none' and set the providers up in your program",
        ) from exc
    resource = Resource.create({"service.name": settings.service_name})
    if settings.exporter == "console":
        spans: Any = ConsoleSpanExporter()
        numbers: Any = ConsoleMetricExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigError(
                f"telemetry.exporter = 'otlp' needs the OTLP/HTTP exporter, which is not "
                f"installed ({exc})",
                hint="pip install 'harnessmem[otel-export]'",
            ) from exc
        headers = {k: v.get_secret_value() for k, v in settings.headers.items()} or None
        base = settings.endpoint.rstrip("/") if settings.endpoint else None
        spans = OTLPSpanExporter(endpoint=f"{base}/v1/traces" if base else None, headers=headers)
        numbers = OTLPMetricExporter(
            endpoint=f"{base}/v1/metrics" if base else None, headers=headers
        )
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    reader = PeriodicExportingMetricReader(
        numbers, export_interval_millis=settings.metric_interval * 1000
    )
    return tracer_provider, MeterProvider(resource=resource, metric_readers=[reader])
