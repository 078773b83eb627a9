"""``MemoryHarness``: the face users hold, one per workspace.

Its methods are what an agent builder calls: sessions, search, the memory operations,
maintenance and close. Everything they do happens in the components behind it, reached
through :attr:`MemoryHarness.kernel` (see :mod:`harnessmem.kernel`); this module builds the
kernel and its components. ``Session`` (one per conversation) is defined in
:mod:`harnessmem.session` and importable from here.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, Self

from harnessmem.kernel import Kernel
from harnessmem.lifetime import ClosesOnExit
from harnessmem.plugins import HookFacade, check_settings, make_plugin_manager
from harnessmem.session import Session
from harnessmem.settings import HarnessSettings

if TYPE_CHECKING:
    from harnessmem.backends.base import (
        Completion,
        IndexBackend,
        ModelBackend,
        SearchHit,
        SearchMode,
    )
    from harnessmem.index import ReindexResult
    from harnessmem.maintenance import MaintenanceReport, MaintenanceRunner, MaintenanceScheduler
    from harnessmem.memory.consolidation import (
        ConsolidationResult,
        MemoryConsolidator,
        SaveResult,
    )
    from harnessmem.memory.context import MemoryContext
    from harnessmem.memory.erasure import ForgetResult, MemoryEraser
    from harnessmem.memory.flush import FlushResult, MemoryFlusher
    from harnessmem.memory.provenance import FactTrace, FactTracer
    from harnessmem.memory.search import MemorySearcher
    from harnessmem.models.usage import UsageReport
    from harnessmem.telemetry import Telemetry
    from harnessmem.workspace import Workspace

__all__ = ["MemoryHarness", "Session"]

Message = dict[str, Any]

logger = logging.getLogger("harnessmem.harness")

# Harnesses not closed yet, held weakly so that tracking them keeps none alive; the atexit
# hook closes them so queued work drains and maintenance stops before the interpreter ends.
_OPEN_HARNESSES: weakref.WeakSet[MemoryHarness] = weakref.WeakSet()


def _close_open_harnesses() -> None:
    for harness in list(_OPEN_HARNESSES):
        try:
            harness.close()
        except Exception as exc:  # exiting anyway: report and close the others
            logger.warning("closing %r at exit failed: %s", harness, exc)


atexit.register(_close_open_harnesses)


class MemoryHarness(ClosesOnExit):
    """Memory for one workspace: sessions, search, flush, consolidation and maintenance.

    Build one with :meth:`open`, :meth:`from_config` or ``MemoryHarness(settings=...)``;
    use it as a context manager (or call :meth:`close`) so queued work drains. What the
    components share (the hooks, the models, the index, the components themselves) is
    :attr:`kernel`.
    """

    def __init__(
        self,
        settings: HarnessSettings | None = None,
        *,
        model: ModelBackend | None = None,
        index: IndexBackend | None = None,
        plugins: Sequence[object] = (),
        clock: Callable[[], float] | None = None,
        maintenance_runner: MaintenanceRunner | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        #: The validated settings of this harness.
        self.settings = settings if settings is not None else HarnessSettings.load()
        # What the settings name (backends, their options, plugins) is checked before the
        # workspace is opened, so that a misspelt one fails without creating anything.
        check_settings(self.settings, plugins, index=index is None, model=model is None)
        hooks = HookFacade(make_plugin_manager(self.settings.plugins, plugins))
        hooks.configure(self.settings)
        clock = clock or time.time
        # Loaded here, not at import: ``from harnessmem import MemoryHarness`` stays cheap.
        from harnessmem.workspace import Workspace

        #: The workspace (local folder, S3 prefix, any fsspec URL).
        self.workspace: Workspace = Workspace.open(
            self.settings.workspace.url, self.settings.workspace.storage_options, clock=clock
        )
        #: What the components share, the components included (see :mod:`harnessmem.kernel`).
        self.kernel: Kernel = _HarnessKernel(
            self.settings,
            workspace=self.workspace,
            hooks=hooks,
            clock=clock,
            model=model,
            index=index,
            maintenance_runner=maintenance_runner,
            telemetry=telemetry,
        )
        self._lock = threading.RLock()
        self._sessions: dict[str, Session] = {}
        self.kernel.models.start()
        _OPEN_HARNESSES.add(self)
        if self.settings.maintenance.enabled:
            # Cheap: a daemon thread that waits on a condition; its first tick is an
            # interval away (sooner only when the workspace's last tick is overdue).
            self.kernel.maintenance.start()

    # construction ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str],
        *,
        model: ModelBackend | Mapping[str, Any] | None = None,
        index: IndexBackend | Mapping[str, Any] | None = None,
        plugins: Sequence[object] | Mapping[str, Any] = (),
        clock: Callable[[], float] | None = None,
        config: str | os.PathLike[str] | None = None,
        maintenance_runner: MaintenanceRunner | None = None,
        telemetry: Telemetry | Mapping[str, Any] | None = None,
        **sections: Any,
    ) -> Self:
        """Open the workspace at ``url`` (a folder or any fsspec URL).

        ``sections`` override settings sections as dicts, e.g.
        ``compaction={"trigger_messages": 30}``; ``model=`` and ``index=`` take
        a backend instance or a settings section, ``plugins=`` a list of plugin
        objects to register or the ``plugins`` settings section. Other settings
        come from the environment and the config file as
        :meth:`HarnessSettings.load` reads them. An ``index=`` instance of another
        workspace (or of none) is used through ``index.scoped(...)`` for this one; a
        ``maintenance_runner`` runs background maintenance on its thread instead of one
        of the harness's own (what ``HarnessPool`` shares between its tenants).
        ``telemetry=`` takes a :class:`~harnessmem.telemetry.Telemetry` (an
        ``OpenTelemetry(tracer_provider=..., meter_provider=...)``) or the ``telemetry``
        settings section.
        """
        workspace = dict(sections.pop("workspace", None) or {})
        workspace["url"] = os.fspath(url)
        return cls.from_config(
            config,
            model=model,
            index=index,
            plugins=plugins,
            clock=clock,
            maintenance_runner=maintenance_runner,
            telemetry=telemetry,
            workspace=workspace,
            **sections,
        )

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        model: ModelBackend | Mapping[str, Any] | None = None,
        index: IndexBackend | Mapping[str, Any] | None = None,
        plugins: Sequence[object] | Mapping[str, Any] = (),
        clock: Callable[[], float] | None = None,
        maintenance_runner: MaintenanceRunner | None = None,
        telemetry: Telemetry | Mapping[str, Any] | None = None,
        **sections: Any,
    ) -> Self:
        """Build a harness from a TOML or YAML config file (plus environment and ``sections``).

        ``model=`` and ``index=`` take a backend instance or a settings section;
        ``plugins=`` plugin objects or the ``plugins`` section; ``telemetry=`` a
        ``Telemetry`` or the ``telemetry`` section.
        """
        if isinstance(model, Mapping):
            sections["model"], model = model, None
        if isinstance(index, Mapping):
            sections["index"], index = index, None
        if isinstance(plugins, Mapping):
            sections["plugins"], plugins = plugins, ()
        if isinstance(telemetry, Mapping):
            sections["telemetry"], telemetry = telemetry, None
        settings = HarnessSettings.load(path, **sections)
        return cls(
            settings,
            model=model,
            index=index,
            plugins=plugins,
            clock=clock,
            maintenance_runner=maintenance_runner,
            telemetry=telemetry,
        )

    # models and maintenance ---

    def usage(self, *, days: int | None = None) -> UsageReport:
        """Model calls, tokens and cost per purpose and model, and the daily budget's state.

        Over the last ``days`` days (today included) or every recorded day; includes other
        processes' calls when ``model.record_usage`` is on (the default).
        """
        return self.kernel.usage(days=days)

    # sessions and memory operations ---

    def session(self, session_id: str) -> Session:
        """The session for one conversation (the same object for the same id)."""
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session id must be a non-empty string, got {session_id!r}")
        with self._lock:
            self.kernel.check_open()
            if session_id not in self._sessions:
                self._sessions[session_id] = Session(self.kernel, session_id)
            return self._sessions[session_id]

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        mode: SearchMode = "any",
        source: str = "memory",
        session_id: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
    ) -> list[SearchHit]:
        """Ranked full-text search over MEMORY.md and memory/*.md, best first.

        ``mode``: ``"any"`` ranks entries with any of the query's words (bm25; stop words
        dropped), ``"all"`` keeps entries with every word, ``"phrase"`` the words in
        order. ``source="sessions"`` searches the raw session logs instead, and
        ``session_id`` one session's log. ``since`` / ``until`` (a ``date`` or
        ``"YYYY-MM-DD"``, in the workspace's time zone, both inclusive) keep entries dated
        within them: a daily log's lines by its day, other entries by the date of their
        heading or message; undated ones are left out. ``limit`` is capped at ``index.max_results``.
        Files changed since the last search are indexed first (see
        ``index.refresh_interval``). Any query text is safe; a search running past
        ``index.search_timeout`` raises ``SearchTimeout``.
        """
        return self.kernel.searcher.search(
            query, limit, mode=mode, source=source, session_id=session_id, since=since, until=until
        )

    def get(self, path: str, start_line: int = 1, lines: int | None = None) -> str:
        """Lines of a memory file, session log or evicted result (1-based ``start_line``)."""
        return self.kernel.searcher.get(path, start_line, lines)

    def save(self, text: str) -> SaveResult:
        """Append facts to MEMORY.md as a dated entry (the agent's ``memory_save``).

        Every bullet and line of prose is kept, one entry each; headings are left out and
        named in ``SaveResult.left_out``. Redacted like a flush; facts already in MEMORY.md
        are skipped. The append is a compare-and-swap, as consolidation's rewrite is, so
        neither loses the other's write.
        """
        return self.kernel.consolidator.save(text)

    def flush(
        self,
        messages: Sequence[Message],
        *,
        session_id: str,
        backoff: bool = False,
        ask: Callable[[str], Completion | None] | None = None,
    ) -> FlushResult:
        """Extract the new facts of ``messages`` into today's daily log.

        Only messages past the session's high-water mark are sent to the ``flush`` model.
        Returns after the entry was written and read back (see :mod:`harnessmem.memory.flush`);
        raises the model's or the workspace's error, leaving the mark where it was. With
        ``backoff``, while the model is backed off after failures the result is
        ``deferred`` (nothing asked, the mark unmoved): the automatic flushes pass it.
        ``ask(reference)`` lets a caller that asks a model anyway supply the answer with
        the facts (compaction's one call); see :meth:`harnessmem.memory.flush.MemoryFlusher.flush`.
        """
        return self.kernel.flusher.flush(messages, session_id=session_id, backoff=backoff, ask=ask)

    def consolidate(self, *, backoff: bool = False) -> ConsolidationResult:
        """Rewrite MEMORY.md from the daily-log text past the watermark, within budget.

        The result says whether the rewrite was accepted and why not (see
        :mod:`harnessmem.memory.consolidation`); a model failure raises. With ``backoff``
        (maintenance passes it), a model that failed lately is not asked: ``deferred``.
        """
        return self.kernel.consolidator.consolidate(backoff=backoff)

    def forget(
        self,
        query: str,
        *,
        replace_with: str | None = None,
        dry_run: bool = False,
        sessions: bool = False,
        limit: int = 20,
    ) -> ForgetResult:
        """Remove every fact matching ``query`` from the workspace and the index, for good.

        A fact (a list item, or a line of prose) matches when it holds every word of
        ``query`` (case-insensitive) or its exact text. It is removed from MEMORY.md,
        the daily logs and their archive, the previous MEMORY.md versions, evicted tool
        results and, with ``sessions``, the session logs (a marker stands in for the
        message); the index drops it and scrubs its bytes; a tombstone keeps flush and
        consolidation from writing it again. ``dry_run`` only lists what would go.
        With ``replace_with``, the matching facts of MEMORY.md and the daily logs are
        replaced by that text where they stand (a correction); it must drop at least one
        of the words of ``query``, which are tombstoned as for a removal.
        Raises ``ForgetError`` when nothing matches or more than ``limit`` facts do
        (nothing is changed then). See :mod:`harnessmem.memory.erasure`.
        """
        if replace_with is not None:
            if sessions:
                raise ValueError("forget: replace_with edits memory files, not session logs")
            return self.kernel.eraser.edit(query, replace_with, dry_run=dry_run, limit=limit)
        return self.kernel.eraser.forget(query, dry_run=dry_run, sessions=sessions, limit=limit)

    def trace(self, fact: str, *, limit: int = 3) -> list[FactTrace]:
        """Where a fact of memory came from: ``fact`` is a MEMORY.md line (``"MEMORY.md:12"``)
        or the words of a fact. Each trace holds a MEMORY.md bullet that has those words (at
        most ``limit``, best first; one trace of ``fact`` itself when none has them), the
        daily-log entries that say it (when and from which session they were flushed), and
        the session-log messages, said before that flush, with the words as said.

        Raises ``TraceError`` (a ``ValueError``) when ``fact`` has no word to look for or
        names a MEMORY.md line that is not a fact. See :mod:`harnessmem.memory.provenance`.
        """
        return self.kernel.tracer.trace(fact, limit=limit)

    def maintain(self, *, force: bool = False) -> MaintenanceReport:
        """Run one maintenance tick now and return its report; fires ``on_maintenance``.

        Archive old daily logs, consolidate, prune old session logs and evicted results,
        reindex (see :mod:`harnessmem.maintenance`). A step that ran less than
        ``maintenance.min_gap`` ago in any process is skipped unless ``force``; the whole
        tick is skipped while another process holds the maintenance lease. Made for cron
        or a Kubernetes CronJob (``harnessmem maintain``) with ``maintenance.enabled`` off.
        """
        self.kernel.check_open()
        return self.kernel.maintenance.tick("manual", force=force)

    def reindex(self, full: bool = False, *, paths: Sequence[str] | None = None) -> ReindexResult:
        """Bring the index up to date with the workspace files and say what changed.

        Incremental: files whose change token (mtime/size/inode, or ETag) moved are
        re-read, and only those whose content hash changed are re-indexed. ``full``
        empties the index and reads every file (``harnessmem index rebuild``); ``paths``
        limits the work to those workspace paths (a writer's follow-up: missing paths
        are dropped from the index, paths that are not indexed are ignored).
        """
        return self.kernel.reindex(full, paths=paths)

    # lifetime ---

    def close(self, timeout: float | None = None) -> None:
        """Drain queued work, stop maintenance, release backends; later calls are no-ops.

        ``timeout`` (default ``maintenance.close_timeout``) bounds the wait for queued
        flushes and a running maintenance tick together. A tick still running then is
        logged and abandoned: its thread is a daemon and its lease expires.
        """
        try:
            self.kernel.close(timeout)
        finally:
            if self.kernel.closed:
                _OPEN_HARNESSES.discard(self)

    def __repr__(self) -> str:
        state = "closed" if self.kernel.closed else "open"
        return f"<MemoryHarness {self.workspace.url} ({state})>"


class _HarnessKernel(Kernel):
    """The kernel with the built-in components, each loaded and built on first use (so
    that importing harnessmem loads none of their modules)."""

    def __init__(
        self,
        settings: HarnessSettings,
        *,
        maintenance_runner: MaintenanceRunner | None,
        **parts: Any,
    ) -> None:
        super().__init__(settings, **parts)
        self._maintenance_runner = maintenance_runner

    @property
    def searcher(self) -> MemorySearcher:
        from harnessmem.memory.search import MemorySearcher

        return self._component("searcher", lambda: MemorySearcher(self))

    @property
    def flusher(self) -> MemoryFlusher:
        from harnessmem.memory.flush import MemoryFlusher

        return self._component("flusher", lambda: MemoryFlusher(self))

    @property
    def consolidator(self) -> MemoryConsolidator:
        from harnessmem.memory.consolidation import MemoryConsolidator

        return self._component("consolidator", lambda: MemoryConsolidator(self))

    @property
    def eraser(self) -> MemoryEraser:
        from harnessmem.memory.erasure import MemoryEraser

        return self._component("eraser", lambda: MemoryEraser(self))

    @property
    def tracer(self) -> FactTracer:
        from harnessmem.memory.provenance import FactTracer

        return self._component("tracer", lambda: FactTracer(self))

    @property
    def context(self) -> MemoryContext:
        from harnessmem.memory.context import MemoryContext

        return self._component("context", lambda: MemoryContext(self))

    @property
    def maintenance(self) -> MaintenanceScheduler:
        from harnessmem.maintenance import MaintenanceScheduler

        return self._component(
            "maintenance", lambda: MaintenanceScheduler(self, runner=self._maintenance_runner)
        )
