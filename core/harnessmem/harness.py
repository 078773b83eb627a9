"""``MemoryHarness`` (one per workspace) and ``Session`` (one per conversation).

The harness wires settings, the plugin manager, the workspace and the
backends together; a session calls the lifecycle hooks through the harness's
:class:`~harnessmem.plugins.HookFacade`. The behaviours themselves (eviction,
compaction, flush, ...) are plugins.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from harnessmem.errors import HarnessMemError, PathNotAllowed
from harnessmem.events import TurnContext
from harnessmem.plugins import HookFacade, index_registry, make_plugin_manager, model_registry
from harnessmem.settings import HarnessSettings

if TYPE_CHECKING:
    import pluggy

    from harnessmem.backends.base import IndexBackend, ModelBackend, SearchHit
    from harnessmem.workspace import Workspace

__all__ = ["MemoryHarness", "Session"]

Message = dict[str, Any]
PURPOSES = ("summary", "flush", "consolidation")
#: Workspace files the agent may read through ``get`` / ``memory_get``.
READABLE_PREFIXES = ("memory/", "sessions/")
READABLE_FILES = ("MEMORY.md",)


def _not_landed(what: str, issue: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} is not available yet: it arrives with the {issue} work "
        "(see the project's open issues)"
    )


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
    ) -> None:
        self.settings = settings if settings is not None else HarnessSettings.load()
        self.clock: Callable[[], float] = clock or time.time
        self._model_override = model
        self._index = index
        self._models: dict[str, ModelBackend] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._sessions: dict[str, Session] = {}

        from harnessmem.workspace import Workspace

        self.workspace: Workspace = Workspace.open(
            self.settings.workspace.url,
            self.settings.workspace.storage_options,
            clock=self.clock,
        )
        self.pm: pluggy.PluginManager = make_plugin_manager(self.settings.plugins, plugins)
        self.hooks = HookFacade(self.pm)
        self.hooks.configure(self.settings)

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
        **sections: Any,
    ) -> Self:
        """Open the workspace at ``url`` (a folder or any fsspec URL).

        ``sections`` override settings sections as dicts, e.g.
        ``compaction={"trigger_messages": 30}``; ``model=`` and ``index=`` take
        a backend instance or a settings section, ``plugins=`` a list of plugin
        objects to register or the ``plugins`` settings section. Other settings
        come from the environment and the config file as
        :meth:`HarnessSettings.load` reads them.
        """
        workspace = dict(sections.pop("workspace", None) or {})
        workspace["url"] = os.fspath(url)
        return cls.from_config(
            config,
            model=model,
            index=index,
            plugins=plugins,
            clock=clock,
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
        return cls(settings, model=model, index=index, plugins=plugins, clock=clock)

    # backends -------------------------------------------------------------------------------

    @property
    def index_path(self) -> Path:
        """Local file of a file-based index (the SQLite default)."""
        configured = self.settings.workspace.index_path
        if configured:
            return Path(configured).expanduser()
        local = self.workspace.local_root
        if local is not None:
            return local.parent / "memory_index.db"
        digest = hashlib.sha256(self.workspace.url.encode()).hexdigest()[:16]
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "harnessmem" / digest / "memory_index.db"

    @property
    def index(self) -> IndexBackend:
        """The index backend, created on first use from ``index.backend``."""
        with self._lock:
            self._check_open()
            if self._index is None:
                cls = index_registry().load(self.settings.index.backend)
                self._index = cls.create(
                    self.settings.index.options,
                    workspace=self.workspace,
                    index_path=self.index_path,
                    settings=self.settings,
                )
            return self._index

    def model_for(self, purpose: str) -> ModelBackend:
        """The model backend serving ``purpose`` (``summary``, ``flush`` or ``consolidation``)."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown model purpose {purpose!r}; expected one of {PURPOSES}")
        if self._model_override is not None:
            return self._model_override
        base = self.settings.model
        route = getattr(base, purpose)
        name = route.name or base.name
        backend = route.backend or base.backend or ("litellm" if name else "extractive")
        options = {**base.options, **route.options}
        key = json.dumps([backend, name, options], sort_keys=True, default=str)
        with self._lock:
            self._check_open()
            if key not in self._models:
                cls = model_registry().load(backend)
                self._models[key] = cls.create(
                    options,
                    model_name=name,
                    max_tokens=route.max_tokens or base.max_tokens,
                )
            return self._models[key]

    # sessions and memory operations ---------------------------------------------------------

    def session(self, session_id: str) -> Session:
        """The session for one conversation (the same object for the same id)."""
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError(f"session id must be a non-empty string, got {session_id!r}")
        with self._lock:
            self._check_open()
            if session_id not in self._sessions:
                self._sessions[session_id] = Session(self, session_id)
            return self._sessions[session_id]

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Full-text search over the workspace's memory files."""
        if limit <= 0:
            raise ValueError(f"search limit must be positive, got {limit}")
        return self.index.search(query, limit)

    def get(self, path: str, start_line: int = 1, lines: int | None = None) -> str:
        """Lines of a memory file, session log or evicted result (1-based ``start_line``)."""
        if start_line < 1:
            raise ValueError(f"start_line must be >= 1, got {start_line}")
        if lines is not None and lines < 1:
            raise ValueError(f"lines must be >= 1, got {lines}")
        self.workspace.resolve(path)  # confinement first, so the error names the real problem
        normal = posixpath.normpath(path)
        readable = (*READABLE_PREFIXES, self.settings.eviction.path.strip("/") + "/")
        if normal not in READABLE_FILES and not normal.startswith(readable):
            raise PathNotAllowed(
                f"{path!r} is not a memory file, session log or evicted tool result",
                hint=f"readable: {', '.join(READABLE_FILES)}, {', '.join(readable)}",
            )
        text = self.workspace.read_text(normal)
        all_lines = text.splitlines(keepends=True)
        end = None if lines is None else start_line - 1 + lines
        return "".join(all_lines[start_line - 1 : end])

    def save(self, text: str) -> None:
        """Append a fact to MEMORY.md (the agent's ``memory_save``)."""
        raise _not_landed("harness.save", "two-layer memory")

    def flush(self, messages: Sequence[Message], *, session_id: str) -> None:
        """Extract facts from ``messages`` into today's daily log."""
        raise _not_landed("harness.flush", "two-layer memory")

    def consolidate(self) -> None:
        """Rewrite MEMORY.md from the daily logs past the watermark."""
        raise _not_landed("harness.consolidate", "two-layer memory")

    def maintain(self) -> None:
        """Run one maintenance tick now."""
        raise _not_landed("harness.maintain", "background maintenance")

    def reindex(self, full: bool = False) -> None:
        """Bring the index up to date with the workspace files."""
        raise _not_landed("harness.reindex", "memory index")

    # lifetime -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessMemError(
                f"the harness for {self.workspace.url} is closed",
                hint="open a new one with MemoryHarness.open(...)",
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release backends; later calls are no-ops."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            backends: list[Any] = list(self._models.values())
            if self._index is not None:
                backends.append(self._index)
            if self._model_override is not None:
                backends.append(self._model_override)
        errors = []
        for backend in backends:
            try:
                backend.close()
            except Exception as exc:  # close the others, then report
                errors.append(exc)
        if errors:
            raise HarnessMemError(f"closing backends failed: {errors[0]}") from errors[0]

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


class Session:
    """One conversation's lifecycle points; built by :meth:`MemoryHarness.session`."""

    def __init__(self, harness: MemoryHarness, session_id: str) -> None:
        self.harness = harness
        self.id = session_id

    def _context(self, messages: Sequence[Message], **fields: Any) -> TurnContext:
        self.harness._check_open()
        return TurnContext(session=self, messages=list(messages), **fields)

    # sync lifecycle -------------------------------------------------------------------------

    def before_reasoning(self, messages: Sequence[Message]) -> list[Message]:
        """The list to send to the model (plugins may evict and compact)."""
        ctx = self._context(messages)
        self.harness.hooks.pre_reasoning(ctx)
        return ctx.messages

    def after_tool(self, call: Mapping[str, Any], result: str) -> str:
        """The text to put in the tool message for ``call`` (plugins may evict it)."""
        if not isinstance(result, str):
            raise TypeError(f"tool result must be str, got {type(result).__name__}")
        ctx = self._context([], tool_result=result)
        self.harness.hooks.post_acting(ctx, copy.deepcopy(dict(call)), result)
        return ctx.tool_result if ctx.tool_result is not None else result

    def after_call(self, messages: Sequence[Message]) -> TurnContext:
        """End of an agent call: plugins flush new facts; returns the turn's context."""
        ctx = self._context(messages)
        self.harness.hooks.post_call(ctx)
        return ctx

    def recover_overflow(self, messages: Sequence[Message], error: BaseException) -> list[Message]:
        """A shorter list to retry with after a context-length error, or re-raise ``error``."""
        ctx = self._context(messages)
        shorter = self.harness.hooks.on_context_overflow(ctx, error)
        if shorter is None:
            raise error
        return shorter

    # async twins ----------------------------------------------------------------------------

    async def abefore_reasoning(self, messages: Sequence[Message]) -> list[Message]:
        ctx = self._context(messages)
        await self.harness.hooks.apre_reasoning(ctx)
        return ctx.messages

    async def aafter_tool(self, call: Mapping[str, Any], result: str) -> str:
        if not isinstance(result, str):
            raise TypeError(f"tool result must be str, got {type(result).__name__}")
        ctx = self._context([], tool_result=result)
        await self.harness.hooks.apost_acting(ctx, copy.deepcopy(dict(call)), result)
        return ctx.tool_result if ctx.tool_result is not None else result

    async def aafter_call(self, messages: Sequence[Message]) -> TurnContext:
        ctx = self._context(messages)
        await self.harness.hooks.apost_call(ctx)
        return ctx

    async def arecover_overflow(
        self, messages: Sequence[Message], error: BaseException
    ) -> list[Message]:
        ctx = self._context(messages)
        shorter = await self.harness.hooks.aon_context_overflow(ctx, error)
        if shorter is None:
            raise error
        return shorter

    # context and tools ----------------------------------------------------------------------

    def system_context(self) -> str:
        """The memory block for the system prompt."""
        raise _not_landed("Session.system_context", "two-layer memory (context injection)")

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of the agent's memory tools."""
        raise _not_landed("Session.tools", "memory index (agent tools)")

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run one of the memory tools and return its text result."""
        raise _not_landed("Session.call_tool", "memory index (agent tools)")

    def __repr__(self) -> str:
        return f"<Session {self.id!r} of {self.harness.workspace.url}>"
