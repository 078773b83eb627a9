"""The telemetry seam: what the components call, and the no-op it is when telemetry is off.

Components open spans and count things through the kernel's :class:`Telemetry`
(``kernel.telemetry``). The base class does nothing: its :meth:`Telemetry.span` hands back
one shared no-op context manager, so that with telemetry off (the default) an instrumented
operation costs an attribute lookup and a method call, and nothing is imported.
:class:`~harnessmem.telemetry.otel.OpenTelemetry` (the ``otel`` extra) overrides every
method. The names of spans, attributes and metrics are in :mod:`harnessmem.telemetry.names`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import ClassVar

from harnessmem.telemetry import names

__all__ = ["AttributeValue", "Span", "Telemetry", "provider_of", "records_json", "usage_attributes"]

#: What an attribute may hold (OpenTelemetry's primitive values and their sequences).
AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]


class Span:
    """An operation's span as the components see it; this one records nothing.

    ``recording`` says whether attributes set now go anywhere (build costly values only
    then). Text goes through :meth:`text` and :meth:`records`, which add it only when the
    telemetry captures text, and redacted.
    """

    @property
    def recording(self) -> bool:
        """Whether attributes set now go anywhere."""
        return False

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set attribute ``key`` (a None value is left out)."""

    def set_attributes(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Set each attribute (None values are left out)."""

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Add the event ``name`` at this moment."""

    def text(self, key: str, text: str) -> None:
        """Set an opt-in text attribute (``gen_ai.memory.query.text``): only when the
        telemetry captures text, after redaction."""

    def records(self, count: int, texts: Iterable[str] = (), ids: Iterable[str] = ()) -> None:
        """``gen_ai.memory.record.count``, and when text is captured ``gen_ai.memory.records``
        (each record's redacted ``content`` and its ``id``)."""
        self.set(names.MEMORY_RECORD_COUNT, count)


class _NoSpan(Span, AbstractContextManager["_NoSpan"]):
    """The one no-op span, its own context manager."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


NO_SPAN = _NoSpan()


class Telemetry:
    """Spans and metrics of one harness; the base class is the no-op of telemetry off.

    ``bind`` gives the telemetry of one workspace (the store id its memory spans name, the
    redaction of captured text); an instance may serve several harnesses (a pool's tenants).
    """

    #: Whether spans and metrics go anywhere.
    enabled: ClassVar[bool] = False

    def bind(self, store_id: Callable[[], str], redact: Callable[[str], str]) -> Telemetry:
        """This telemetry for one workspace: ``store_id()`` names it in memory spans
        (``gen_ai.memory.store.id``), ``redact`` cleans captured text."""
        return self

    def span(
        self,
        name: str,
        *,
        kind: str = "internal",
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> AbstractContextManager[Span]:
        """A span named ``name`` under the current one, current while the block runs; an
        exception ends it with an error status (and is raised on)."""
        return NO_SPAN

    def memory(
        self,
        operation: str,
        *,
        session_id: str | None = None,
        attributes: Mapping[str, AttributeValue | None] | None = None,
    ) -> AbstractContextManager[Span]:
        """A memory operation's span (``search_memory``, ``create_memory``,
        ``update_memory``, ``delete_memory``): the GenAI memory attributes, the store id,
        and its duration in ``gen_ai.client.operation.duration``."""
        return NO_SPAN

    def model_call(
        self, purpose: str, model: str | None, provider: str, max_tokens: int | None
    ) -> AbstractContextManager[Span]:
        """An upkeep model call's span (``chat <model>``); the caller sets the usage with
        :func:`usage_attributes` and the metrics follow from them."""
        return NO_SPAN

    def current(self) -> Span:
        """The caller's current span (where an event about its work belongs)."""
        return NO_SPAN

    def count(
        self, metric: str, value: int = 1, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        """Add ``value`` to the counter ``metric`` (see :mod:`~harnessmem.telemetry.names`)."""

    def trace_ids(self) -> tuple[str, str] | None:
        """The current span's (trace id, span id) in hex, None when none is recording."""
        return None

    def shutdown(self) -> None:
        """Send what is buffered and stop (the providers this telemetry made itself)."""


def provider_of(model: str | None, default: str) -> str:
    """``gen_ai.provider.name`` of a model: the provider prefix of a litellm model name
    (``openai/gpt-4o-mini``: ``openai``), else ``default`` (the backend's name)."""
    if model and "/" in model:
        return model.split("/", 1)[0]
    return default


def usage_attributes(
    *,
    model: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    cache_read_tokens: int = 0,
    finish_reason: str | None = None,
) -> dict[str, AttributeValue | None]:
    """The attributes of a model call's answer (response model, tokens, cache reads)."""
    return {
        names.RESPONSE_MODEL: model or None,
        names.USAGE_INPUT_TOKENS: prompt_tokens,
        names.USAGE_OUTPUT_TOKENS: completion_tokens,
        names.USAGE_CACHE_READ_TOKENS: cache_read_tokens,
        names.RESPONSE_FINISH_REASONS: [finish_reason] if finish_reason else None,
    }


def records_json(texts: Sequence[str], ids: Sequence[str]) -> str:
    """``gen_ai.memory.records`` as a JSON string (the convention's ``any`` value, as the
    span attributes of OpenTelemetry Python take it): ``[{"content": ..., "id": ...}]``."""
    return json.dumps(
        [
            {"content": text, **({"id": ids[n]} if n < len(ids) else {})}
            for n, text in enumerate(texts)
        ],
        ensure_ascii=False,
    )
