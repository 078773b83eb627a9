"""``MemoryHarness`` (one per workspace) and ``Session`` (one per conversation).

The harness wires settings, the plugin manager, the workspace and the
backends together; a session calls the lifecycle hooks through the harness's
:class:`~harnessmem.plugins.HookFacade`. The behaviours themselves (eviction,
compaction, flush, ...) are plugins. ``Session`` is defined in
:mod:`harnessmem.session` and the routing of models to purposes in
:mod:`harnessmem.models.routes`; both are imported here.
"""

from __future__ import annotations

import atexit
import logging
import os
import posixpath
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from harnessmem import layout
from harnessmem.errors import ConfigError, HarnessMemError, PathNotAllowed, WorkspaceFileNotFound
from harnessmem.models.routes import PURPOSES as PURPOSES
from harnessmem.models.routes import ModelRoutes
from harnessmem.plugins import HookFacade, index_registry, make_plugin_manager
from harnessmem.session import Session
from harnessmem.settings import HarnessSettings

if TYPE_CHECKING:
    import pluggy

    from harnessmem.backends.base import (
        Completion,
        IndexBackend,
        ModelBackend,
        SearchHit,
        SearchMode,
    )
    from harnessmem.index import IndexSync, ReindexResult
    from harnessmem.maintenance import MaintenanceReport, MaintenanceRunner, MaintenanceScheduler
    from harnessmem.memory.consolidation import ConsolidationResult, SaveResult
    from harnessmem.memory.erasure import ForgetResult
    from harnessmem.memory.flush import FlushResult
    from harnessmem.memory.provenance import FactTrace
    from harnessmem.memory.timequery import QueryTime
    from harnessmem.models.usage import MeteredModel, UsageReport
    from harnessmem.services import Services
    from harnessmem.workspace import Workspace

__all__ = ["MemoryHarness", "Session"]

Message = dict[str, Any]
C = TypeVar("C")
#: Workspace files the agent may read through ``get`` / ``memory_get``.


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


class MemoryHarness:
    """Memory for one workspace: sessions, search, flush, consolidation and maintenance.

    Build one with :meth:`open`, :meth:`from_config` or ``MemoryHarness(settings=...)``;
    use it as a context manager (or call :meth:`close`) so queued work drains.
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
    ) -> None:
        self.settings = settings if settings is not None else HarnessSettings.load()
        self.clock: Callable[[], float] = clock or time.time
        self._index: IndexBackend | None = None
        self._given_index = index
        self._maintenance_runner = maintenance_runner
        self._lock = threading.RLock()
        self._closed = False
        self._sessions: dict[str, Session] = {}

        from harnessmem.plugins import check_settings
        from harnessmem.workspace import Workspace

        # What the settings name (backends, their options, plugins) is checked before the
        # workspace is opened, so that a misspelt one fails without creating anything.
        check_settings(self.settings, plugins, index=index is None, model=model is None)
        self.pm: pluggy.PluginManager = make_plugin_manager(self.settings.plugins, plugins)
        self.hooks = HookFacade(self.pm)
        self.hooks.configure(self.settings)
        self.workspace: Workspace = Workspace.open(
            self.settings.workspace.url,
            self.settings.workspace.storage_options,
            clock=self.clock,
        )
        self._closing = False
        self._scheduler: MaintenanceScheduler | None = None
        # The seam where queued work drains on close(): each callback gets the seconds left
        # of maintenance.close_timeout (the background flush queue registers one here).
        self._drainers: list[Callable[[float], object]] = []
        self._components: dict[Callable[[Services], Any], Any] = {}
        self._routes = ModelRoutes(self, model)
        self._routes.start()
        _OPEN_HARNESSES.add(self)
        if self.settings.maintenance.enabled:
            # Cheap: a daemon thread that waits on a condition; its first tick is an
            # interval away (sooner only when the workspace's last tick is overdue).
            self._maintenance_scheduler().start()

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
        **sections: Any,
    ) -> Self:
        """Build a harness from a TOML or YAML config file (plus environment and ``sections``).

        ``model=`` and ``index=`` take a backend instance or a settings section;
        ``plugins=`` plugin objects or the ``plugins`` section.
        """
        if isinstance(model, Mapping):
            sections["model"], model = model, None
        if isinstance(index, Mapping):
            sections["index"], index = index, None
        if isinstance(plugins, Mapping):
            sections["plugins"], plugins = plugins, ()
        settings = HarnessSettings.load(path, **sections)
        return cls(
            settings,
            model=model,
            index=index,
            plugins=plugins,
            clock=clock,
            maintenance_runner=maintenance_runner,
        )

    # backends -------------------------------------------------------------------------------

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

    def model_for(self, purpose: str) -> MeteredModel:
        """The model serving ``purpose`` (``summary``, ``flush`` or ``consolidation``).

        A :class:`~harnessmem.models.usage.MeteredModel` around the backend the settings route
        the purpose to (or around the ``model=`` instance): every call is recorded for
        :meth:`usage`, and past ``model.budget`` flush and consolidation calls go to the
        offline extractive backend. The same route gives the same object.
        """
        return self._routes.model_for(purpose)

    def usage(self, *, days: int | None = None) -> UsageReport:
        """Model calls, tokens and cost per purpose and model, and the daily budget's state.

        Over the last ``days`` days (today included) or every recorded day; includes other
        processes' calls when ``model.record_usage`` is on (the default).
        """
        return self._routes.ledger().report(days=days)

    # sessions and memory operations ---------------------------------------------------------

    def session(self, session_id: str) -> Session:
        """The session for one conversation (the same object for the same id)."""
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session id must be a non-empty string, got {session_id!r}")
        with self._lock:
            self.check_open()
            if session_id not in self._sessions:
                self._sessions[session_id] = Session(self, session_id)
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
        if limit <= 0:
            raise ValueError(f"search limit must be positive, got {limit}")
        limit = min(limit, self.settings.index.max_results)
        index = self._index_sync()

        def run(text: str, start: date | str | None, end: date | str | None) -> list[SearchHit]:
            return index.search(
                text,
                limit,
                mode=mode,
                source="sessions" if session_id is not None else source,
                session_id=session_id,
                timeout=self.settings.index.search_timeout or None,
                since=start,
                until=end,
            )

        named = None
        if since is None and until is None and self.settings.index.time_in_query:
            named = self._query_time(query)
        if named is None:
            return run(query, since, until)
        # The days the query names first, then the rest of the ranking: an answer whose
        # entry has no date (or another one) is still found.
        hits = run(named.query, named.since, named.until)
        # The rest keep the time words: a fact that names those days in its text ("in
        # September 2023", written before then) still ranks by them.
        if named.since is None or named.until is None or (named.until - named.since).days > 6:
            # A month or an open range is a loose hint ("during September 2023" of a plan
            # told in May): its hits take turns with the whole ranking's.
            return _interleave(hits, run(query, None, None), limit)
        if len(hits) < limit and source == "memory" and session_id is None:
            # A query about those days whose other words match little ("what did we talk
            # about on May 2nd?"): the days' own facts come next, in the order written.
            hits += self._days_facts(named.since, named.until, limit - len(hits), hits)
        if len(hits) >= limit:
            return hits[:limit]
        return _interleave(hits, run(query, None, None), limit, turns=False)

    def _days_facts(
        self, since: date | None, until: date | None, limit: int, shown: list[SearchHit]
    ) -> list[SearchHit]:
        """The entries of the daily logs of ``since``..``until`` (at most a week of them),
        in file order, as hits, leaving out those in ``shown``."""
        from datetime import timedelta

        from harnessmem.backends.base import SearchHit
        from harnessmem.index.chunking import chunk_markdown

        if since is None or until is None or (until - since).days > 6:
            return []
        seen = {(h.path, h.start_line) for h in shown}
        found: list[SearchHit] = []
        day = since
        while day <= until and len(found) < limit:
            path = f"{layout.MEMORY_DIR}/{day.isoformat()}.md"
            day += timedelta(days=1)
            try:
                text = self.workspace.read_text(path)
            except FileNotFoundError:
                continue
            for entry in chunk_markdown(path, text):
                if (path, entry.start_line) not in seen and len(found) < limit:
                    found.append(
                        SearchHit(
                            path,
                            entry.start_line,
                            entry.end_line,
                            entry.content,
                            0.0,
                            entry.context,
                            entry.date,
                        )
                    )
        return found

    def _query_time(self, query: str) -> QueryTime | None:
        """The days ``query`` names, relative to the harness clock (see ``time_in_query``);
        a query without a month's name or a time word costs two regular expressions."""
        from zoneinfo import ZoneInfo

        from harnessmem.memory.timequery import query_time

        zone = ZoneInfo(self.settings.workspace.timezone)
        return query_time(query, datetime.fromtimestamp(self.clock(), zone))

    def get(self, path: str, start_line: int = 1, lines: int | None = None) -> str:
        """Lines of a memory file, session log or evicted result (1-based ``start_line``)."""
        if start_line < 1:
            raise ValueError(f"start_line must be >= 1, got {start_line}")
        if lines is not None and lines < 1:
            raise ValueError(f"lines must be >= 1, got {lines}")
        full = self.workspace.resolve(path)  # confinement first: the error names the problem
        normal = posixpath.normpath(path)
        readable = (*layout.READABLE_PREFIXES, self.settings.eviction.path.strip("/") + "/")
        hint = f"readable: {', '.join(layout.READABLE_FILES)}, {', '.join(readable)}"
        if normal not in layout.READABLE_FILES and not normal.startswith(readable):
            raise PathNotAllowed(
                f"{path!r} is not a memory file, session log or evicted tool result", hint=hint
            )
        root = self.workspace.local_root
        if root is not None:
            # A symlink inside the workspace must not lead to a file the agent may not read.
            real = Path(os.path.realpath(full)).relative_to(root).as_posix()
            if real not in layout.READABLE_FILES and not real.startswith(readable):
                raise PathNotAllowed(
                    f"{path!r} is a symlink to {real!r}, which is not a memory file, "
                    "session log or evicted tool result",
                    hint=hint,
                )
        try:
            text = self.workspace.read_text(normal)
        except FileNotFoundError as exc:
            raise WorkspaceFileNotFound(
                f"harness.get: {path!r} does not exist in {self.workspace.url}",
                hint="pass a path exactly as search printed it (memory_search, session_search)",
                path=normal,
            ) from exc
        all_lines = text.splitlines(keepends=True)
        end = None if lines is None else start_line - 1 + lines
        return "".join(all_lines[start_line - 1 : end])

    def save(self, text: str) -> SaveResult:
        """Append facts to MEMORY.md as a dated entry (the agent's ``memory_save``).

        Every bullet and line of prose is kept, one entry each; headings are left out and
        named in ``SaveResult.left_out``. Redacted like a flush; facts already in MEMORY.md
        are skipped. The append is a compare-and-swap, as consolidation's rewrite is, so
        neither loses the other's write.
        """
        from harnessmem.memory.consolidation import MemoryConsolidator

        return self.component(MemoryConsolidator).save(text)

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
        from harnessmem.memory.flush import MemoryFlusher

        return self.component(MemoryFlusher).flush(
            messages, session_id=session_id, backoff=backoff, ask=ask
        )

    def consolidate(self, *, backoff: bool = False) -> ConsolidationResult:
        """Rewrite MEMORY.md from the daily-log text past the watermark, within budget.

        The result says whether the rewrite was accepted and why not (see
        :mod:`harnessmem.memory.consolidation`); a model failure raises. With ``backoff``
        (maintenance passes it), a model that failed lately is not asked: ``deferred``.
        """
        from harnessmem.memory.consolidation import MemoryConsolidator

        return self.component(MemoryConsolidator).consolidate(backoff=backoff)

    def forget(
        self,
        query: str,
        *,
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
        Raises ``ForgetError`` when nothing matches or more than ``limit`` facts do
        (nothing is changed then). See :mod:`harnessmem.memory.erasure`.
        """
        from harnessmem.memory.erasure import MemoryEraser

        return self.component(MemoryEraser).forget(
            query, dry_run=dry_run, sessions=sessions, limit=limit
        )

    def trace(self, fact: str, *, limit: int = 3) -> list[FactTrace]:
        """Where a fact of memory came from: ``fact`` is a MEMORY.md line (``"MEMORY.md:12"``)
        or the words of a fact. Each trace holds a MEMORY.md bullet that has those words (at
        most ``limit``, best first; one trace of ``fact`` itself when none has them), the
        daily-log entries that say it (when and from which session they were flushed), and
        the session-log messages, said before that flush, with the words as said.

        Raises ``TraceError`` (a ``ValueError``) when ``fact`` has no word to look for or
        names a MEMORY.md line that is not a fact. See :mod:`harnessmem.memory.provenance`.
        """
        from harnessmem.memory.provenance import FactTracer

        return self.component(FactTracer).trace(fact, limit=limit)

    def edit(self, old: str, new: str, *, dry_run: bool = False, limit: int = 20) -> ForgetResult:
        """Replace the facts matching ``old`` in MEMORY.md and the daily logs with ``new``.

        Same matching and safety as :meth:`forget`; the old words are tombstoned, so
        ``new`` must drop at least one of them (``ForgetError`` otherwise).
        """
        from harnessmem.memory.erasure import MemoryEraser

        return self.component(MemoryEraser).edit(old, new, dry_run=dry_run, limit=limit)

    def component(self, kind: Callable[[Services], C]) -> C:
        """This harness's one instance of the component ``kind`` (a class taking the
        services, e.g. ``MemoryFlusher``), built on first use; see :mod:`harnessmem.services`."""
        with self._lock:
            self.check_open()
            if kind not in self._components:
                self._components[kind] = kind(self)
            return cast("C", self._components[kind])

    def on_close(self, drain: Callable[[float], object]) -> None:
        """Call ``drain(seconds_left)`` at :meth:`close`, before the backends close (a
        queue of background flushes drains here)."""
        with self._lock:
            self._drainers.append(drain)

    def maintain(self, *, force: bool = False) -> MaintenanceReport:
        """Run one maintenance tick now and return its report; fires ``on_maintenance``.

        Archive old daily logs, consolidate, prune old session logs and evicted results,
        reindex (see :mod:`harnessmem.maintenance`). A step that ran less than
        ``maintenance.min_gap`` ago in any process is skipped unless ``force``; the whole
        tick is skipped while another process holds the maintenance lease. Made for cron
        or a Kubernetes CronJob (``harnessmem maintain``) with ``maintenance.enabled`` off.
        """
        self.check_open()
        return self._maintenance_scheduler().tick("manual", force=force)

    def request_maintenance(self) -> bool:
        """Ask for an opportunistic tick (consolidate, then reindex) soon; never blocks.

        For flushes: at most one per ``maintenance.min_gap``. False when throttled, when
        the scheduler thread is not running (``maintenance.enabled`` off: run
        :meth:`maintain` from cron instead) or when the harness is closing.
        """
        scheduler = self._scheduler
        return scheduler.request() if scheduler is not None else False

    def _maintenance_scheduler(self) -> MaintenanceScheduler:
        with self._lock:
            if self._scheduler is None:
                from harnessmem.maintenance import MaintenanceScheduler

                self._scheduler = MaintenanceScheduler(self, runner=self._maintenance_runner)
            return self._scheduler

    def reindex(self, full: bool = False, *, paths: Sequence[str] | None = None) -> ReindexResult:
        """Bring the index up to date with the workspace files and say what changed.

        Incremental: files whose change token (mtime/size/inode, or ETag) moved are
        re-read, and only those whose content hash changed are re-indexed. ``full``
        empties the index and reads every file (``harnessmem index rebuild``); ``paths``
        limits the work to those workspace paths (a writer's follow-up: missing paths
        are dropped from the index, paths that are not indexed are ignored).
        """
        self.check_open()
        return self._index_sync().sync(full=full, paths=paths)

    def scrub_index(self) -> bool:
        """Have the index backend overwrite the bytes of the entries it removed (``forget``
        calls it); False when the backend cannot (see ``IndexBackend.scrub``)."""
        self.check_open()
        with self._lock:
            index = self.index
        return index.scrub()

    _index_syncer: IndexSync | None = None

    def _index_sync(self) -> IndexSync:
        """The one ``IndexSync`` of this harness, built with the index on first use."""
        with self._lock:
            self.check_open()
            if self._index_syncer is None:
                from harnessmem.index import IndexSync

                self._index_syncer = IndexSync(
                    self.workspace,
                    self.index,
                    include_archive=self.settings.index.include_archive,
                    interval=self.refresh_interval,
                    clock=self.clock,
                    timezone=self.settings.workspace.timezone,
                )
            return self._index_syncer

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

    # lifetime -------------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise ``HarnessMemError`` once the harness is closed."""
        if self._closed:
            raise HarnessMemError(
                f"the harness for {self.workspace.url} is closed",
                hint="open a new one with MemoryHarness.open(...)",
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, timeout: float | None = None) -> None:
        """Drain queued work, stop maintenance, release backends; later calls are no-ops.

        ``timeout`` (default ``maintenance.close_timeout``) bounds the wait for queued
        flushes and a running maintenance tick together. A tick still running then is
        logged and abandoned: its thread is a daemon and its lease expires.
        """
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        budget = self.settings.maintenance.close_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        errors: list[Exception] = []
        scheduler = self._scheduler
        if scheduler is not None:
            scheduler.signal_stop()  # no new tick; one already running goes on meanwhile
        for drain in list(self._drainers):
            try:
                drain(max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # drain the others, close, then report
                errors.append(exc)
        if scheduler is not None and not scheduler.join(max(0.0, deadline - time.monotonic())):
            logger.warning(
                "a maintenance tick of %s was still running after %gs; abandoning it",
                self.workspace.url,
                budget,
            )
        with self._lock:
            self._closed = True
            backends: list[Any] = self._routes.backends()
            if self._index is not None:
                backends.append(self._index)
            if self._routes.override is not None:
                backends.append(self._routes.override)
        _OPEN_HARNESSES.discard(self)
        for backend in backends:
            try:
                backend.close()
            except Exception as exc:  # close the others, then report
                errors.append(exc)
        if errors:
            raise HarnessMemError(f"closing the harness failed: {errors[0]}") from errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemoryHarness {self.workspace.url} ({state})>"


def _interleave(
    first: list[SearchHit], second: list[SearchHit], limit: int, *, turns: bool = True
) -> list[SearchHit]:
    """``first`` and ``second`` as one list without repeats: taking turns, or (``turns``
    false) all of ``first`` then the rest of ``second``."""
    merged: list[SearchHit] = []
    seen: set[tuple[str, int]] = set()
    if turns:
        order = [h for pair in zip(first, second, strict=False) for h in pair]
        longer = first if len(first) > len(second) else second
        order += longer[min(len(first), len(second)) :]
    else:
        order = [*first, *second]
    for hit in order:
        if (hit.path, hit.start_line) not in seen and len(merged) < limit:
            seen.add((hit.path, hit.start_line))
            merged.append(hit)
    return merged
