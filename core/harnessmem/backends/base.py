"""Base classes for index and model backends.

A backend is a class registered under a name in the entry-point group
``harnessmem.index`` or ``harnessmem.model``. It owns a pydantic ``Options``
model that validates the ``options`` table of its config section, so errors
carry the dotted path (``index.options.url``).

The types a search deals in live in :mod:`harnessmem.backends.search`, those an index
stores in :mod:`harnessmem.backends.entries`; this module re-exports them.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, get_args

from pydantic import BaseModel, ConfigDict, Field

from harnessmem.backends.entries import EntryColumns as EntryColumns
from harnessmem.backends.entries import FileUpdate as FileUpdate
from harnessmem.backends.entries import IndexedFile as IndexedFile
from harnessmem.backends.entries import IndexEntry as IndexEntry
from harnessmem.backends.entries import IndexStats as IndexStats
from harnessmem.backends.search import SearchHit as SearchHit
from harnessmem.backends.search import SearchMode as SearchMode
from harnessmem.backends.search import SearchRequest as SearchRequest
from harnessmem.backends.search import SearchTimeout as SearchTimeout
from harnessmem.backends.search import check_dates as check_dates
from harnessmem.backends.search import dated_within as dated_within
from harnessmem.settings.validation import parse_options

if TYPE_CHECKING:
    from harnessmem.backends._fts import QueryTerm

# The types of entries and searches are re-exported too (the ``as`` imports above), from
# the modules that declare them in their own ``__all__``.
__all__ = [
    "INDEX_CAPABILITIES",
    "INDEX_SOURCES",
    "MODEL_CAPABILITIES",
    "PURPOSES",
    "BackendOptions",
    "Completion",
    "IndexBackend",
    "ModelBackend",
    "ModelRequest",
    "RankingOptions",
    "workspace_id_of",
]


def _overrides(backend: object, name: str) -> bool:
    """Whether ``backend``'s class replaces the method ``name`` of the base it extends."""
    base = IndexBackend if isinstance(backend, IndexBackend) else ModelBackend
    return getattr(type(backend), name) is not getattr(base, name)


def _syncs_by_file(backend: IndexBackend) -> bool:
    """Whether ``backend`` syncs through its own ``sync_file``: a backend written before
    ``_sync_files`` (or a subclass that overrides ``sync_file`` of one written after)."""
    for klass in type(backend).__mro__:
        if klass is IndexBackend or "_sync_files" in vars(klass):
            return False
        if "sync_file" in vars(klass):
            return True
    return False


class BackendOptions(BaseModel):
    """Base of a backend's options model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RankingOptions(BackendOptions):
    """Options of the query-and-rank scheme both shipped index backends use
    (rarest-terms cap, bm25 candidates re-ranked with their section neighbours)."""

    max_terms: int = Field(
        24, ge=1, le=256, description="Most query terms searched; the rarest are kept."
    )
    neighbor_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Share of a candidate's score lent to its neighbours in 'any' searches.",
    )
    candidates: int = Field(
        50, ge=1, le=1_000, description="Candidates ranked before neighbour scoring."
    )


class _Backend:
    #: Name the backend is registered under (the entry-point name).
    name: ClassVar[str] = ""
    #: The options model; subclasses replace it with their own.
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    @classmethod
    def parse_options(cls, raw: Mapping[str, Any] | BackendOptions | None, *, where: str) -> Any:
        """Validate ``raw`` with ``cls.Options``; errors name ``where`` (e.g. ``index.options``)."""
        if isinstance(raw, cls.Options):
            return raw
        return parse_options(cls.Options, raw, where=where, owner=cls.__name__)


_SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

#: Where indexed text comes from: memory files (MEMORY.md, memory/*.md) or session logs.
INDEX_SOURCES: tuple[str, ...] = ("memory", "sessions")

#: Capabilities an index backend may declare (``IndexBackend.capabilities``); the
#: conformance suite skips, with the reason, the tests of what a backend lacks:
#: ``stemming`` (``running`` finds ``runs``), ``diacritics`` (``cafe`` finds ``café``),
#: ``cjk`` (Chinese, Japanese and Korean words inside unspaced text), ``phrase`` (the
#: ``phrase`` mode), ``timeout`` (searches stop at ``timeout``), ``persistent`` (a
#: second instance on the same store sees the first one's data), ``concurrent`` (several
#: threads may search and sync one instance at once), ``dates`` (``search`` takes
#: ``since`` and ``until`` and keeps only entries dated within them, however many others
#: match; a backend without it gets the harness's fallback, which filters a larger pool
#: of its hits).
INDEX_CAPABILITIES: frozenset[str] = frozenset(
    {"stemming", "diacritics", "cjk", "phrase", "timeout", "persistent", "concurrent", "dates"}
)


def workspace_id_of(context: Mapping[str, Any]) -> str:
    """The workspace an index instance built with ``context`` serves (see ``IndexBackend``).

    ``context["workspace_id"]`` when given, else the URL of ``context["workspace"]``
    (``Workspace.url``: normalised, so ``./ws``, ``/abs/ws``, ``file:///abs/ws`` and a
    symlink to the folder are one workspace), else ``""`` (an instance built without a
    workspace, as the conformance suite builds them).
    """
    given = context.get("workspace_id")
    if given is not None:
        return _checked_workspace_id(given)
    url = getattr(context.get("workspace"), "url", None)
    return str(url) if url else ""


def _checked_workspace_id(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > 1_000:
        raise ValueError(
            f"a workspace id must be a non-empty string of at most 1,000 characters, got {value!r}"
        )
    return value


class IndexBackend(_Backend, ABC):
    """A full-text index over workspace files.

    The harness (:class:`harnessmem.index.IndexSync`) splits files into ``IndexEntry``
    chunks and hands a backend whole files at a time, each with the hash of its content
    and its change token, so a backend can skip files it already holds at that hash and
    the harness can skip reading files whose token is unchanged. Every entry belongs to
    one ``source`` (see :data:`INDEX_SOURCES`); a search looks in one source.

    Implementations are thread-safe when they declare ``concurrent``. ``search`` never
    raises on what the query text contains; it raises :class:`SearchTimeout` when it
    runs past ``timeout``. A backend that finds its store missing or unusable and starts
    empty increments ``resets``; the harness then hands it every file again.

    Isolation: an instance serves one workspace, :attr:`workspace_id`, and every method
    reads and writes only that workspace's files and entries. Many workspaces share one
    store (one database, one file) through :meth:`scoped`, which gives an instance for
    another workspace on the same store; a search, ``files``, ``stats``, ``remove`` or
    ``clear`` of one never sees or touches another's rows, even at the same path and
    content hash (the conformance suite checks it).
    """

    #: Declared abilities (see :data:`INDEX_CAPABILITIES`).
    capabilities: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def create(
        cls, options: Mapping[str, Any] | BackendOptions | None = None, **context: Any
    ) -> Self:
        """Validate ``options`` and build the backend.

        ``context`` carries the workspace facts: ``workspace`` (the ``Workspace``),
        ``index_path`` (a local file the backend may use), ``settings`` (the
        ``HarnessSettings``). A backend must work with any of them missing that it can
        do without (the conformance suite passes ``index_path`` only).
        """
        return cls(cls.parse_options(options, where="index.options"), **context)

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        if not any(_overrides(self, name) for name in ("_sync_files", "sync_files", "sync_file")):
            # What ABC would say of an abstract method (backends written before
            # _sync_files implement sync_file, which still works).
            raise TypeError(
                f"Can't instantiate index backend {type(self).__name__} without a _sync_files "
                "method; implement _sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]"
            )
        self.options = options
        self.context = context
        #: The workspace whose files this instance indexes (see :func:`workspace_id_of`).
        self.workspace_id: str = workspace_id_of(context)
        #: Times this instance found its store missing, of another version or corrupt
        #: and started empty; the harness re-syncs every file when it changes.
        self.resets = 0

    def scoped(self, workspace_id: str, **context: Any) -> Self:
        """An instance for workspace ``workspace_id`` on the same store as this one.

        ``context`` replaces entries of this instance's context (``workspace=`` the
        other ``Workspace``). Closing the scoped instance releases what it alone holds;
        closing the instance it came from closes the store for every scoped one.

        The default builds a new instance with ``workspace_id`` in its context, which
        is right for a backend that keys its rows by ``self.workspace_id``; a backend
        with connections worth sharing overrides it (the built-ins do).
        """
        return type(self).create(
            self.options,
            **{**self.context, **context, "workspace_id": _checked_workspace_id(workspace_id)},
        )

    @abstractmethod
    def files(self) -> dict[str, IndexedFile]:
        """Every indexed path with its content hash, change token and entry count."""

    def sync_file(
        self,
        path: str,
        content_hash: str,
        entries: Sequence[IndexEntry],
        *,
        source: str = "memory",
        change_token: str | None = None,
    ) -> bool:
        """Make ``entries`` the entries of ``path``, atomically; False if already at the hash.

        When ``path`` is already indexed at ``content_hash`` only its ``change_token``
        is updated. Several instances (threads, processes) may sync the same path at
        once; the last complete sync wins and entries are never duplicated. An unknown
        ``source`` raises ``ValueError``. It is :meth:`sync_files` with one update.
        """
        return self.sync_files([FileUpdate(path, content_hash, entries, source, change_token)])[0]

    def sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        """:meth:`sync_file` for each update in order; what each returned.

        ``updates`` may be a generator that reads files as it goes. Backends do not
        override it: it checks each update's ``source`` as the backend reaches it
        (``ValueError`` unless it is one of :data:`INDEX_SOURCES`) and hands the updates
        to :meth:`_sync_files`.
        """
        if _syncs_by_file(self):
            return [
                self.sync_file(
                    u.path, u.content_hash, u.entries, source=u.source, change_token=u.change_token
                )
                for u in updates
            ]
        return self._sync_files(self._checked_sources(updates))

    def _sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        """Apply each update (its ``source`` checked) in order; what each changed.

        What every index backend implements. A backend may apply many updates in one
        transaction (the SQLite backend does, so that a rebuild costs about what
        inserting the rows raw costs); each file is still atomic.
        """
        raise NotImplementedError(f"{type(self).__name__} implements no _sync_files")

    def _checked_sources(self, updates: Iterable[FileUpdate]) -> Iterator[FileUpdate]:
        for update in updates:
            self._check_source(update.source)
            yield update

    @abstractmethod
    def remove(self, path: str) -> bool:
        """Forget ``path`` and its entries; return whether it was indexed."""

    def clear(self) -> None:
        """Forget every file (the start of a full rebuild)."""
        for path in self.files():
            self.remove(path)

    def scrub(self) -> bool:
        """Overwrite the bytes of removed entries in the store itself (``forget`` calls it
        after removing a fact's rows); True when this backend did so.

        A database keeps deleted text in free pages, full-text segments and its log until
        they are reused; a backend that can rewrite them (SQLite: secure delete, FTS5
        ``optimize``, ``VACUUM``, a truncating WAL checkpoint) does it here. The default
        does nothing and returns False: ``forget`` then reports the rows as removed and
        the bytes as not scrubbed.
        """
        return False

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        source: str = "memory",
        mode: SearchMode = "any",
        path_prefix: str | None = None,
        timeout: float | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[SearchHit]:
        """Best ``limit`` hits of ``source`` for a free-text ``query``, best first.

        ``mode``: ``any`` ranks entries holding any of the query's words (stop words
        dropped), ``all`` requires every word, ``phrase`` the words in order.
        ``path_prefix`` keeps hits whose path starts with it. A backend that declares the
        ``dates`` capability also takes ``since`` and ``until`` (ISO days, checked with
        :func:`check_dates`; inclusive; undated entries are left out when either is set):
        the best ``limit`` hits among the entries dated within them (the harness never
        passes them to a backend without it). Never raises on the query text (an empty or
        unsearchable query gives ``[]``); raises ``SearchTimeout`` after ``timeout``
        seconds (None: no limit). An unknown ``source`` or ``mode`` raises ``ValueError``,
        a query that is not a ``str`` ``TypeError``, a malformed day ``ConfigError``.

        Backends do not override it: it checks the arguments the same way for every one,
        parses the query, and hands :meth:`_search` a :class:`SearchRequest` with at
        least one term.
        """
        terms = self._search_terms(query, limit, source=source, mode=mode)
        if not terms:
            return []
        first, last = check_dates(since, until)
        return self._search(
            SearchRequest(query, terms, limit, source, mode, path_prefix, timeout, first, last)
        )

    @abstractmethod
    def _search(self, request: SearchRequest) -> list[SearchHit]:
        """The best ``request.limit`` hits for ``request.terms`` (never empty), best first.

        The arguments are checked already (:meth:`search`); what is left is the ranking,
        ``path_prefix``, the days for a backend with the ``dates`` capability, and the
        ``timeout`` (raise :class:`SearchTimeout`)."""

    @staticmethod
    def _check_source(source: str) -> None:
        """Raise ``ValueError`` unless ``source`` is one of :data:`INDEX_SOURCES`."""
        if source not in INDEX_SOURCES:
            raise ValueError(f"unknown index source {source!r}; expected one of {INDEX_SOURCES}")

    @classmethod
    def _search_terms(
        cls, query: str, limit: int, *, source: str, mode: SearchMode
    ) -> list[QueryTerm]:
        """Check the arguments of :meth:`search`; the query's terms, ``[]`` when none can match.

        :meth:`search` starts with it and returns ``[]`` when it gives ``[]``, so that
        every backend rejects the same arguments with the same errors. An unknown
        ``source`` or ``mode`` raises ``ValueError``; a ``limit`` under 1 gives ``[]`` (the
        query is then not read); a query that is not a ``str`` raises ``TypeError``; one
        without a searchable word gives ``[]``. The terms come from
        :func:`harnessmem.backends.fulltext.parse_query`, stop words kept in ``phrase`` mode.
        """
        cls._check_source(source)
        if mode not in _SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected 'any', 'all' or 'phrase'")
        if limit <= 0:
            return []
        # Imported here: _fts imports this module (for SearchMode).
        from harnessmem.backends._fts import parse_query

        return parse_query(query, keep_stop_words=mode == "phrase")

    @abstractmethod
    def stats(self) -> IndexStats:
        """Counts of files and entries."""

    def close(self) -> None:
        """Release connections and files; later calls are no-ops."""


#: The jobs a model backend serves; ``complete(purpose=...)`` takes one of these.
PURPOSES: tuple[str, ...] = ("summary", "flush", "consolidation")

#: Capabilities a model backend may declare (``ModelBackend.capabilities``):
#: ``offline`` (answers without network or key), ``deterministic`` (the same request
#: gets the same text), ``retries`` (retries transient failures itself), ``cost`` (reports
#: a money cost for priced models).
MODEL_CAPABILITIES: frozenset[str] = frozenset({"offline", "deterministic", "retries", "cost"})


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer and what it cost.

    ``model`` is the model that answered (as the provider names it, e.g. a dated
    variant); ``cost`` is in US dollars, ``None`` when the backend does not know the
    price; ``finish_reason`` is the provider's (``"stop"``, ``"length"`` when the answer
    was cut at ``max_tokens``), ``None`` when the backend has none. ``cache_read_tokens``:
    the prompt tokens the provider served from its prompt cache (part of
    ``prompt_tokens``), 0 when it reports none.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    cost: float | None = None
    finish_reason: str | None = None
    cache_read_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """A call whose arguments :meth:`ModelBackend.complete` checked, for ``_complete``."""

    #: The OpenAI-format chat messages to answer.
    messages: Sequence[Mapping[str, Any]]
    #: The job, one of :data:`PURPOSES`.
    purpose: str
    #: Most tokens of the answer (None: the backend's own cap, ``context["max_tokens"]``).
    max_tokens: int | None = None

    @classmethod
    def checked(
        cls, messages: Sequence[Mapping[str, Any]], purpose: str, max_tokens: int | None
    ) -> ModelRequest:
        """The request, or ``ValueError`` when ``purpose`` is not one of :data:`PURPOSES`."""
        if purpose not in PURPOSES:
            raise ValueError(f"unknown model purpose {purpose!r}; expected one of {PURPOSES}")
        return cls(messages, purpose, max_tokens)


class ModelBackend(_Backend, ABC):
    """A chat model used for summaries, fact extraction and consolidation.

    ``purpose`` is one of :data:`PURPOSES`: ``"summary"``, ``"flush"`` and
    ``"consolidation"``. The harness builds backends with :meth:`create` when it
    starts, so a backend that cannot work with its settings (a missing API key, an
    unknown provider) raises ``ConfigError`` there, before any work is done.
    ``context`` holds ``model_name`` (``model.name`` or the purpose's override, may
    be None), ``max_tokens`` (the default answer cap) and ``where`` (the settings
    section the values came from, e.g. ``"model.flush"``, for error messages).

    A backend implements :meth:`_complete` (and :meth:`_acomplete` when it has a native
    async client); :meth:`complete` and :meth:`acomplete` check the arguments and call
    them. ``complete`` raises only ``ModelError`` subclasses for model failures:
    ``ContextOverflowError`` (the request does not fit), ``ModelUnavailableError``
    (unreachable, or still failing after the backend's retries) and
    ``ModelResponseError`` (an empty or malformed answer).
    """

    #: Declared abilities (see :data:`MODEL_CAPABILITIES`); the conformance suite skips,
    #: with the reason, what a backend lacks.
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: Whether calls spend money or quota, and so count against ``model.budget``.
    metered: ClassVar[bool] = True

    @classmethod
    def create(
        cls, options: Mapping[str, Any] | BackendOptions | None = None, **context: Any
    ) -> Self:
        """Validate ``options`` and build the backend; ``context`` carries model name and routes."""
        where = context.get("where") or "model"
        return cls(cls.parse_options(options, where=f"{where}.options"), **context)

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        if not (_overrides(self, "_complete") or _overrides(self, "complete")):
            # What ABC would say of an abstract method; a backend written before
            # _complete existed overrides complete instead, which still works.
            raise TypeError(
                f"Can't instantiate model backend {type(self).__name__} without a _complete "
                "method; implement _complete(self, request: ModelRequest) -> Completion"
            )
        self.options = options
        self.context = context

    @property
    def model_name(self) -> str | None:
        """The configured model name (``model.name`` or a purpose override), if any."""
        name = self.context.get("model_name")
        return name if isinstance(name, str) else None

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer the OpenAI-format ``messages``; raise a ``ModelError`` subclass on failure.

        Backends do not override it: it checks ``purpose`` (``ValueError`` unless it is
        one of :data:`PURPOSES`) and hands :meth:`_complete` a :class:`ModelRequest`.
        """
        return self._complete(ModelRequest.checked(messages, purpose, max_tokens))

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Async twin of :meth:`complete`: the same checks, then :meth:`_acomplete`."""
        return await self._acomplete(ModelRequest.checked(messages, purpose, max_tokens))

    def _complete(self, request: ModelRequest) -> Completion:
        """The answer to ``request``, whose ``purpose`` is checked already; what every
        model backend implements."""
        raise NotImplementedError(f"{type(self).__name__} implements no _complete")

    async def _acomplete(self, request: ModelRequest) -> Completion:
        """Async twin of :meth:`_complete`; the default runs ``complete`` in a worker thread."""
        return await asyncio.to_thread(
            self.complete, request.messages, purpose=request.purpose, max_tokens=request.max_tokens
        )

    def close(self) -> None:
        """Release clients and connections."""
