"""Model usage and cost: a ledger of every call, per purpose and model, and the daily budget.

:class:`MeteredModel` is what ``MemoryHarness.model_for`` hands out: it forwards each call to
the configured backend, records it in the harness's :class:`UsageLedger`, and enforces
``model.budget``: once today's metered spend reaches a limit, ``flush`` and
``consolidation`` calls go to the offline ``extractive`` backend instead (a warning is
logged once per day, and the fallback calls are counted); ``summary`` calls are never
diverted, because compaction must keep the conversation within its window.

With ``model.record_usage`` (the default) every call becomes one JSON line of
``usage/<YYYY-MM-DD>.jsonl`` in the workspace (day in ``workspace.timezone``), so reports
and the budget include other processes and replicas. Lines are appended in batches (every
30 s or 64 calls, before a report, and when the harness closes); a process that dies loses
at most its last batch. A failed append is logged once and the call still succeeds: usage is
telemetry, never a reason to lose work. Other processes' spending reaches the budget check
within ``UsageLedger.refresh`` seconds (60) plus their batch delay. Maintenance deletes
the files dated more than ``maintenance.session_retention_days`` before today (never
today's or yesterday's; see :func:`ledger_files`).

The ledger is in :mod:`harnessmem.models.ledger`, what it records and reports in
:mod:`harnessmem.models.report`; this module holds :class:`MeteredModel` and re-exports
them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import ClassVar

from harnessmem.backends.base import Completion, ModelBackend, ModelRequest
from harnessmem.errors import ModelError
from harnessmem.models.ledger import UsageLedger, ledger_files
from harnessmem.models.report import BudgetStatus, UsageRecord, UsageReport, UsageTotals
from harnessmem.telemetry import Span, Telemetry, names, provider_of, usage_attributes

__all__ = [
    "BUDGETED_PURPOSES",
    "BudgetStatus",
    "MeteredModel",
    "UsageLedger",
    "UsageRecord",
    "UsageReport",
    "UsageTotals",
    "ledger_files",
]

#: Purposes the daily budget may divert to the extractive backend.
BUDGETED_PURPOSES = frozenset({"flush", "consolidation"})


@dataclass
class _Call:
    """One metered call: the backend that answers it, its answer cap, then its answer."""

    target: ModelBackend
    limit: int | None
    answer: Completion | None = None


@dataclass
class _Route:
    """What a metered model needs from the harness."""

    ledger: UsageLedger
    max_tokens: int | None
    fallback: Callable[[], ModelBackend] | None
    clock: Callable[[], float]
    telemetry: Telemetry


class MeteredModel(ModelBackend):
    """A backend as the harness hands it out: usage recorded, budget applied.

    ``backend`` is the configured backend; ``options`` and ``context`` are its own, so
    code that inspects a model sees the real settings. ``max_tokens`` is the answer cap of
    the purpose this route serves, used when a call passes none. ``close`` does nothing:
    the harness closes the backends it created.
    """

    name: ClassVar[str] = "metered"

    def __init__(
        self,
        backend: ModelBackend,
        *,
        ledger: UsageLedger,
        max_tokens: int | None = None,
        fallback: Callable[[], ModelBackend] | None = None,
        clock: Callable[[], float] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        super().__init__(backend.options, **backend.context)
        self.backend = backend
        self._route = _Route(
            ledger, max_tokens, fallback, clock or ledger.clock, telemetry or Telemetry()
        )
        # The model that last answered, to name it in the records of failed calls.
        self._answered: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"<MeteredModel {type(self.backend).__name__} {self.backend.model_name or ''}>"

    @property
    def ledger(self) -> UsageLedger:
        return self._route.ledger

    def _target(self, purpose: str) -> tuple[ModelBackend, bool]:
        route = self._route
        if purpose in BUDGETED_PURPOSES and route.fallback is not None and self.backend.metered:
            status = route.ledger.status()
            if status is not None and status.exceeded:
                route.ledger.warn_once(status)
                return route.fallback(), True
        return self.backend, False

    def _record(
        self,
        target: ModelBackend,
        purpose: str,
        fallback: bool,
        completion: Completion | None = None,
        error: BaseException | None = None,
    ) -> None:
        model = (
            self._answered.get(id(target))
            or target.model_name
            or target.name
            or type(target).__name__
        )
        record = UsageRecord(
            at=self._route.clock(),
            purpose=purpose,
            model=model,
            backend=target.name or type(target).__name__,
            metered=target.metered,
            fallback=fallback,
            ok=error is None,
            error=None if error is None else f"{type(error).__name__}: {error}"[:300],
        )
        if completion is not None:
            self._answered[id(target)] = completion.model or model
            record = replace(
                record,
                model=completion.model or model,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cost=completion.cost,
            )
        self._route.ledger.record(record)

    def _complete(self, request: ModelRequest) -> Completion:
        """Forward to the backend (or the budget fallback) and record the call (in the
        usage ledger, and as a ``chat`` span when telemetry is on)."""
        with self._metered(request) as call:
            call.answer = answer = call.target.complete(
                request.messages, purpose=request.purpose, max_tokens=call.limit
            )
        return answer

    async def _acomplete(self, request: ModelRequest) -> Completion:
        """Async twin of :meth:`_complete`."""
        with self._metered(request) as call:
            call.answer = answer = await call.target.acomplete(
                request.messages, purpose=request.purpose, max_tokens=call.limit
            )
        return answer

    @contextmanager
    def _metered(self, request: ModelRequest) -> Iterator[_Call]:
        """The backend to call for ``request`` and the answer cap; the ``with`` body sets
        the answer, which is recorded, as is a ``ModelError`` it raises."""
        purpose = request.purpose
        target, fallback = self._target(purpose)
        limit = request.max_tokens if request.max_tokens is not None else self._route.max_tokens
        call = _Call(target, limit)
        with self._span(target, purpose, fallback, limit) as span:
            try:
                yield call
            except ModelError as exc:
                self._record(target, purpose, fallback, error=exc)
                raise
            assert call.answer is not None, "the with block sets the answer"
            self._record(target, purpose, fallback, call.answer)
            _usage(span, call.answer)

    def _span(
        self, target: ModelBackend, purpose: str, fallback: bool, limit: int | None
    ) -> AbstractContextManager[Span]:
        telemetry = self._route.telemetry
        if not telemetry.enabled:
            return telemetry.model_call(purpose, None, "", None)  # the shared no-op
        model = target.model_name or None
        provider = provider_of(model, target.name or type(target).__name__)
        span = telemetry.model_call(purpose, model, provider, limit)
        if fallback:
            return _flagged(span)
        return span

    def rejected(self, purpose: str, reason: str) -> None:
        """Record that the harness rejected the last answer for ``purpose`` (junk, a
        refusal, over its bound): it counts as a failure in the usage report."""
        backend = self.backend
        self._route.ledger.record(
            UsageRecord(
                at=self._route.clock(),
                purpose=purpose,
                model=self._answered.get(id(backend)) or backend.model_name or backend.name,
                backend=backend.name or type(backend).__name__,
                metered=backend.metered,
                ok=False,
                error=reason[:300],
                rejected=True,
            )
        )

    def close(self) -> None:
        """Nothing: the harness closes the backend."""


def _usage(span: Span, completion: Completion) -> None:
    if span.recording:
        span.set_attributes(
            usage_attributes(
                model=completion.model,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cache_read_tokens=completion.cache_read_tokens,
                finish_reason=completion.finish_reason,
            )
        )


@contextmanager
def _flagged(span: AbstractContextManager[Span]) -> Iterator[Span]:
    """A model call the budget sent to the offline backend: ``harnessmem.fallback``."""
    with span as opened:
        opened.set(names.FALLBACK, True)
        yield opened
