"""The kernel: what the components of one harness share, the components included.

``MemoryHarness`` is the face users hold; behind it one :class:`Kernel` holds the settings,
the workspace, the hook facade, the clock, the models
(:class:`~harnessmem.models.routes.ModelRoutes`), the index and its sync, the lifetime
(``check_open``, ``on_close``, ``close``) and the components themselves as typed
attributes: ``kernel.searcher``, ``kernel.flusher``, ``kernel.consolidator``,
``kernel.eraser``, ``kernel.tracer``, ``kernel.context`` and ``kernel.maintenance``. A
component's constructor takes the kernel; it reaches a peer through these attributes
(``self.kernel.consolidator.consolidate()``), never by importing it inside a function, so
the import contract (pyproject's ``[tool.importlinter]``) sees the real graph::

    faces (cli, inspector, mcp, pool, harness, session)
      > components (tools, maintenance, compaction, memory, eviction)
        > kernel > models, index, workspace, plugins, backends > vocabulary

The kernel names the component types for the type checker only. Which class serves each
attribute is the face's choice: the face subclasses :class:`Kernel` and builds each component
on first use (``harnessmem.harness`` does), so ``import harnessmem`` loads no component
module and a harness that never flushes never imports the flush. Each component is built
once per kernel, under the kernel's lock, so its peers share its state (locks, back-off,
caches). Plugins see the kernel as ``TurnContext.kernel``.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harnessmem import layout
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem.lifetime import Closer, Deadline
from harnessmem.models.routes import ModelRoutes
from harnessmem.plugins import index_registry
from harnessmem.telemetry import Span, Telemetry, names, telemetry_from_settings

if TYPE_CHECKING:
    from harnessmem.audit import AuditChange
    from harnessmem.backends.base import IndexBackend, ModelBackend
    from harnessmem.index import IndexSync, ReindexResult
    from harnessmem.maintenance import MaintenanceScheduler
    from harnessmem.memory.consolidation import MemoryConsolidator
    from harnessmem.memory.context import MemoryContext
    from harnessmem.memory.erasure import MemoryEraser
    from harnessmem.memory.flush import MemoryFlusher
    from harnessmem.memory.provenance import FactTracer
    from harnessmem.memory.search import MemorySearcher
    from harnessmem.models.usage import MeteredModel, UsageReport
    from harnessmem.plugins import HookFacade
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

__all__ = ["Kernel", "Operation"]

logger = logging.getLogger("harnessmem.kernel")

T = TypeVar("T")


@dataclass(frozen=True)
class Operation:
    """A change under way (:meth:`Kernel.change`): its audit record and its span."""

    audit: AuditChange
    span: Span

    def count(self, name: str, value: int) -> None:
        """Set the audit record's figure ``name``."""
        self.audit.count(name, value)


class Kernel(ABC):
    """The shared state and the components of one harness (see the module docstring)."""

    def __init__(
        self,
        settings: HarnessSettings,
        *,
        workspace: Workspace,
        hooks: HookFacade,
        clock: Callable[[], float],
        model: ModelBackend | None = None,
        index: IndexBackend | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        #: The validated settings of this harness.
        self.settings = settings
        #: The workspace (local folder, S3 prefix, any fsspec URL).
        self.workspace = workspace
        #: The typed facade over the plugin hooks: lifecycle calls and observer events.
        self.hooks = hooks
        #: Seconds since the epoch; tests inject a fake.
        self.clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self._closing = False
        self._given_index = index
        self._index: IndexBackend | None = None
        self._sync: IndexSync | None = None
        self._built: dict[str, Any] = {}
        # The seam where queued work drains on close(): each callback gets the seconds left
        # of maintenance.close_timeout (the background flush queue registers one here).
        self._drainers: list[Callable[[float], object]] = []
        # Telemetry this kernel made from its settings (and shuts down); a given instance
        # stays its owner's (a pool shares one between its tenants).
        self._own_telemetry = (
            telemetry_from_settings(settings.telemetry) if telemetry is None else None
        )
        #: Spans and metrics (:mod:`harnessmem.telemetry`): a no-op unless telemetry is on.
        self.telemetry = (telemetry or self._own_telemetry or Telemetry()).bind(
            self._store_id, self._redacted
        )
        #: The models of each purpose, metered, and the usage ledger.
        self.models = ModelRoutes(self, model)
        from harnessmem.audit import AuditLog  # loaded on open, not by importing harnessmem

        #: The audit log: one record per change to the workspace (:mod:`harnessmem.audit`).
        self.audit = AuditLog(
            workspace,
            clock=clock,
            timezone=settings.workspace.timezone,
            enabled=settings.audit.enabled,
            trace_ids=self.telemetry.trace_ids if self.telemetry.enabled else None,
        )

    @property
    def tenant(self) -> str | None:
        """The tenant this workspace serves in a ``HarnessPool`` (None outside one)."""
        return self.audit.tenant

    @tenant.setter
    def tenant(self, tenant: str | None) -> None:
        self.audit.tenant = tenant

    def _store_id(self) -> str:
        """``gen_ai.memory.store.id``: the tenant in a pool, else the workspace URL without
        its user, password or query (never a secret)."""
        return self.tenant or layout.public_url(self.workspace.url)

    def _redacted(self, text: str) -> str:
        return self.hooks.transform_memory_text(text, "telemetry")

    @contextmanager
    def change(
        self,
        audit: str,
        operation: str,
        *,
        session_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Iterator[Operation]:
        """A memory operation that changes the workspace: its span (``operation``, one of
        the GenAI memory operations) around its audit record (``audit``, one of
        :data:`harnessmem.audit.OPERATIONS`); the span names the record it wrote."""
        with self.telemetry.memory(
            operation,
            session_id=session_id,
            attributes={names.OPERATION: audit, **(attributes or {})},
        ) as span:
            with self.audit.change(audit, session_id=session_id) as change:
                yield Operation(change, span)
            if change.record is not None:
                span.set(names.AUDIT_RECORD_ID, change.record.id)

    # components, each built once on first use by the face's subclass -------------------------

    def _component(self, name: str, build: Callable[[], T]) -> T:
        self.check_open()
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            return self._built[name]  # type: ignore[no-any-return]

    def _built_component(self, name: str) -> Any:
        """The component ``name`` if it was built (closing needs only those)."""
        with self._lock:
            return self._built.get(name)

    @property
    @abstractmethod
    def searcher(self) -> MemorySearcher:
        """Search and reads of the workspace's memory (``harness.search``, ``harness.get``)."""

    @property
    @abstractmethod
    def flusher(self) -> MemoryFlusher:
        """The flush of a conversation's new facts into the daily log."""

    @property
    @abstractmethod
    def consolidator(self) -> MemoryConsolidator:
        """The rewrite of MEMORY.md from the daily logs, and ``memory_save``."""

    @property
    @abstractmethod
    def eraser(self) -> MemoryEraser:
        """``forget`` and ``edit``: facts removed from every file and the index."""

    @property
    @abstractmethod
    def tracer(self) -> FactTracer:
        """Where a fact of memory came from (``harness.trace``)."""

    @property
    @abstractmethod
    def context(self) -> MemoryContext:
        """The memory block of the system prompt."""

    @property
    @abstractmethod
    def maintenance(self) -> MaintenanceScheduler:
        """The maintenance scheduler (ticks on demand, on a timer and when asked)."""

    # models ---------------------------------------------------------------------------------

    def model_for(self, purpose: str) -> MeteredModel:
        """The model serving ``purpose`` (``summary``, ``flush`` or ``consolidation``).

        A :class:`~harnessmem.models.usage.MeteredModel` around the backend the settings route
        the purpose to (or around the ``model=`` instance): every call is recorded for
        :meth:`usage`, and past ``model.budget`` flush and consolidation calls go to the
        offline extractive backend. The same route gives the same object.
        """
        return self.models.model_for(purpose)

    def usage(self, *, days: int | None = None) -> UsageReport:
        """Model calls, tokens and cost per purpose and model, and the daily budget's state."""
        return self.models.ledger().report(days=days)

    # index ----------------------------------------------------------------------------------

    @property
    def index_path(self) -> Path:
        """Local file of a file-based index (the SQLite default)."""
        configured = self.settings.workspace.index_path
        if configured:
            return Path(configured).expanduser()
        return layout.default_index_path(self.workspace.local_root, self.workspace.url)

    @property
    def index(self) -> IndexBackend:
        """The index backend, created on first use from ``index.backend``.

        It serves this workspace only (``index.workspace_id`` is the workspace URL, unless
        the backend's options name another id). An ``index=`` instance built without a
        workspace is used through ``index.scoped(...)``, which the harness closes (the
        instance given stays open for its owner); one built for another workspace is
        refused.
        """
        with self._lock:
            self.check_open()
            given = self._given_index
            if self._index is None and given is not None:
                self._index = self._scope(given)
            if self._index is None:
                cls = index_registry().load(self.settings.index.backend)
                self._index = cls.create(
                    self.settings.index.options,
                    workspace=self.workspace,
                    index_path=self.index_path,
                    settings=self.settings,
                )
            return self._index

    def _scope(self, given: IndexBackend) -> IndexBackend:
        key = self.workspace.url
        if not given.workspace_id:
            return given.scoped(key, workspace=self.workspace)
        built_for = getattr(given.context.get("workspace"), "url", None)
        if built_for is not None and built_for != key:
            raise ConfigError(
                f"the index instance given to the harness of {key} serves workspace "
                f"{given.workspace_id!r}",
                hint="give each harness its own instance: index.scoped(workspace_id), or "
                "share one store through HarnessPool",
            )
        return given

    @property
    def sync(self) -> IndexSync:
        """The one ``IndexSync`` of this harness: the index kept in step with the files."""
        with self._lock:
            self.check_open()
            if self._sync is None:
                # Loaded here, not at import: a harness that never searches never needs it.
                from harnessmem.index import IndexSync

                self._sync = IndexSync(
                    self.workspace,
                    self.index,
                    include_archive=self.settings.index.include_archive,
                    interval=self.refresh_interval,
                    clock=self.clock,
                    timezone=self.settings.workspace.timezone,
                )
            return self._sync

    def reindex(self, full: bool = False, *, paths: Sequence[str] | None = None) -> ReindexResult:
        """Bring the index up to date with the files (see ``MemoryHarness.reindex``)."""
        self.check_open()
        with self.audit.change("reindex") as change:
            result = self.sync.sync(full=full, paths=paths)
            change.note(result.changes)
            if change.op == "reindex":  # not a part of another operation's record
                change.count("indexed", result.indexed)
                change.count("removed", result.removed)
        return result

    def scrub_index(self) -> bool:
        """Have the index backend overwrite the bytes of the entries it removed (``forget``
        calls it); False when the backend cannot (see ``IndexBackend.scrub``)."""
        self.check_open()
        with self._lock:
            index = self.index
        return index.scrub()

    @property
    def refresh_interval(self) -> float:
        """Seconds between looks at files other processes may have changed (by the clock).

        ``index.refresh_interval``; by default 0 on ``memory://`` and 30 elsewhere (a local
        workspace also stats its hot files before each search; on S3 each look costs
        requests).
        """
        interval = self.settings.index.refresh_interval
        if interval is None:
            # memory:// lists in-process, so it can afford a sweep per search.
            interval = 0.0 if self.workspace.protocol == "memory" else 30.0
        return interval

    # maintenance ----------------------------------------------------------------------------

    def request_maintenance(self) -> bool:
        """Ask for an opportunistic tick (consolidate, then reindex) soon; never blocks.

        For flushes: at most one per ``maintenance.min_gap``. False when throttled, when
        the scheduler thread is not running (``maintenance.enabled`` off: run
        ``harness.maintain()`` from cron instead) or when the harness is closing.
        """
        scheduler = self._built_component("maintenance")
        return scheduler.request() if scheduler is not None else False

    # lifetime -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the harness was closed (every operation then raises)."""
        return self._closed

    def check_open(self) -> None:
        """Raise ``HarnessMemError`` once the harness is closed."""
        if self._closed:
            raise HarnessMemError(
                f"the harness for {self.workspace.url} is closed",
                hint="open a new one with MemoryHarness.open(...)",
            )

    def on_close(self, drain: Callable[[float], object]) -> None:
        """Call ``drain(seconds_left)`` at :meth:`close`, before the backends close (a
        queue of background flushes drains here)."""
        with self._lock:
            self._drainers.append(drain)

    def _stop_maintenance(self, scheduler: MaintenanceScheduler | None, deadline: Deadline) -> None:
        if scheduler is not None and not scheduler.join(deadline.left()):
            logger.warning(
                "a maintenance tick of %s was still running after %gs; abandoning it",
                self.workspace.url,
                deadline.seconds,
            )

    def _mark_closed(self) -> list[Any]:
        """Mark the kernel closed; the backends it built (or was given) to close."""
        with self._lock:
            self._closed = True
            backends: list[Any] = self.models.backends()
            if self._index is not None:
                backends.append(self._index)
            if self.models.override is not None:
                backends.append(self.models.override)
        return backends

    def close(self, timeout: float | None = None) -> bool:
        """Drain queued work, stop maintenance, release the backends; False when it was
        closed (or closing) already. See ``MemoryHarness.close``."""
        with self._lock:
            if self._closed or self._closing:
                return False
            self._closing = True
        budget = self.settings.maintenance.close_timeout if timeout is None else timeout
        deadline = Deadline(budget)
        scheduler: MaintenanceScheduler | None = self._built_component("maintenance")
        if scheduler is not None:
            scheduler.signal_stop()  # no new tick; one already running goes on meanwhile
        closer = Closer("the harness")
        for drain in list(self._drainers):
            closer.run(partial(_drain_within, drain, deadline))
        closer.run(lambda: self._stop_maintenance(scheduler, deadline))
        closer.run(self.audit.close)
        if self._own_telemetry is not None:
            closer.run(self._own_telemetry.shutdown)
        for backend in self._mark_closed():
            closer.run(backend.close)
        closer.finish()
        return True


def _drain_within(drain: Callable[[float], object], deadline: Deadline) -> None:
    drain(deadline.left())
