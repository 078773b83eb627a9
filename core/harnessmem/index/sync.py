"""What goes into the index, and keeping it in step with the workspace.

Two parts, both independent of the backend:

- **Chunkers** (in :mod:`harnessmem.index.chunking`, re-exported here) split files into
  :class:`~harnessmem.backends.base.IndexEntry` units. Memory Markdown is cut at its
  natural units: a bullet (with its continuation lines), a paragraph, a fenced code
  block; each entry carries its line range, the path of the headings above it as
  ``context`` (searched with a lower weight), and its date (from the daily log's name,
  else from the nearest heading with an ISO date). The seed's
  ``## Memory Flush — <time> · session <id>`` headings give a date and a section
  boundary but no context words, so that "memory", "flush" and "session" do not match
  every entry. Session logs (``sessions/<id>.log.jsonl``) give one entry per message,
  dated by the day (in ``workspace.timezone``) the message was said.
- :class:`IndexSync` brings a backend up to date: it lists the indexed files with their
  change tokens (``FileInfo.etag_or_hash``: mtime/size/inode locally, the ETag on S3),
  re-reads only files whose token changed, and hands a backend a file only when its
  content hash changed. Tokens survive in the backend, so reopening a workspace re-reads
  nothing that is unchanged.

What is indexed: ``MEMORY.md`` and ``memory/*.md`` (source ``memory``; ``memory/archive/*.md``
too when ``index.include_archive``), and ``sessions/*.log.jsonl`` (source ``sessions``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.backends.base import (
    INDEX_SOURCES,
    FileUpdate,
    IndexEntry,
    SearchHit,
    SearchMode,
    check_dates,
    dated_within,
)
from harnessmem.encoding import content_hash, decode
from harnessmem.errors import PathNotAllowed
from harnessmem.index.chunking import (
    chunk_markdown,
    chunk_session_log,
)
from harnessmem.index.repeats import OVERFETCH, collapse_repeats
from harnessmem.layout import session_log_path, source_of
from harnessmem.workspace.changes import FileChange

if TYPE_CHECKING:
    from harnessmem.backends.base import IndexBackend
    from harnessmem.workspace import Workspace

logger = logging.getLogger("harnessmem.index")

#: Entries read before they are handed to the backend in one call.
BATCH_ENTRIES = 32_768
#: Hits asked of a backend without the ``dates`` capability for a search between dates.
DATED_FALLBACK_POOL = 200


# ------------------------------------------------------------------------------ sync


@dataclass
class ReindexResult:
    """What a reindex did: files looked at, re-indexed and dropped, in how long."""

    checked: int = 0
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    entries: int = 0
    seconds: float = 0.0
    full: bool = False
    rebuilt: bool = False
    errors: list[str] = field(default_factory=list)
    #: The files whose indexed content changed: the content hash the index held before
    #: (None: not indexed) and holds now (None: dropped). What the audit log records.
    changes: list[FileChange] = field(default_factory=list)

    def __str__(self) -> str:
        text = (
            f"{'rebuilt: ' if self.full else ''}{self.checked} files checked, "
            f"{self.indexed} indexed ({self.entries} entries), {self.removed} removed "
            f"in {self.seconds:.2f}s"
        )
        return text + (f"; {len(self.errors)} errors: {self.errors[0]}" if self.errors else "")


class IndexSync:
    """Keeps one backend in step with one workspace; thread-safe.

    A *sweep* lists every indexed file with its change token and re-reads those whose
    token moved; files whose content hash is unchanged are not re-indexed. Between
    sweeps, ``refresh`` (run before each search) is cheap on a local workspace: it
    stats the indexed folders (a new, deleted or renamed file changes their mtime, and
    then it sweeps) and the *hot* files — MEMORY.md and files changed within the last
    two days, i.e. the logs being appended to. So per-search cost does not grow with
    the number of files; an in-place edit of an older file is seen by the next sweep,
    at most ``interval`` seconds (by ``clock``) later. Remote workspaces sweep at most
    every ``interval``; ``interval`` 0 sweeps before every search.
    """

    #: Files modified this recently (seconds, by their mtime) are checked before every search.
    HOT_SECONDS = 2 * 86_400

    def __init__(
        self,
        workspace: Workspace,
        backend: IndexBackend,
        *,
        include_archive: bool = False,
        interval: float = 0.0,
        clock: Callable[[], float] = time.time,
        timezone: str = "UTC",
    ) -> None:
        self.workspace = workspace
        self.backend = backend
        self.include_archive = include_archive
        self.interval = interval
        self.clock = clock
        self.timezone = timezone
        self._lock = threading.RLock()
        # source -> path -> change token of the version the backend holds.
        self._known: dict[str, dict[str, str | None]] | None = None
        # path -> content hash the backend holds (what a change record starts from).
        self._hashes: dict[str, str] = {}
        self._resets = backend.resets
        self._swept_at: dict[str, float] = {}
        self._hot: dict[str, set[str]] = {}
        # folder -> its mtime at the last sweep, or None while that mtime is too recent
        # to prove that nothing changed since (see _racy).
        self._folders: dict[str, int | None] = {}

    # public -------------------------------------------------------------------------------

    def refresh(self, source: str) -> ReindexResult | None:
        """Catch ``source`` up before a search (see the class docstring); None if nothing ran."""
        with self._lock:
            known = self._load_known()
            last = self._swept_at.get(source)
            if last is None or self.clock() - last >= self.interval:
                return self.sync((source,))
            if self.workspace.local_root is None:
                return None
            return self._quick(source, known[source])

    def sync(
        self,
        sources: Iterable[str] = INDEX_SOURCES,
        *,
        full: bool = False,
        paths: Sequence[str] | None = None,
    ) -> ReindexResult:
        """Sweep ``sources`` (or check just ``paths``); ``full`` empties the index first."""
        started = time.perf_counter()
        result = ReindexResult(full=full)
        with self._lock:
            if full:
                self._load_known()
                held = dict(self._hashes)
                self.backend.clear()
                self._known = None
                self._load_known()
                self._hashes = held  # what was indexed before the rebuild
            known = self._load_known()
            if paths is not None:
                self._sync_paths(paths, known, result)
            else:
                for source in sources:
                    self._sweep(source, known[source], full, result)
        result.seconds = time.perf_counter() - started
        if result.indexed or result.removed:
            logger.debug("index sync of %s: %s", self.workspace.url, result)
        return result

    def search(
        self,
        query: str,
        limit: int,
        *,
        mode: SearchMode = "any",
        source: str = "memory",
        session_id: str | None = None,
        timeout: float | None = None,
        since: Any = None,
        until: Any = None,
    ) -> list[SearchHit]:
        """Refresh ``source``, then search it; once more if the backend rebuilt itself meanwhile.

        ``since`` / ``until`` (dates, inclusive) keep entries dated within them: the backend
        filters when it declares ``dates``; otherwise a pool of up to
        :data:`DATED_FALLBACK_POOL` hits is filtered here (a match ranked below that pool
        is then missed).
        """
        first, last = check_dates(since, until)
        prefix = session_log_path(session_id) if session_id is not None else None
        for _ in range(2):
            self.refresh(source)
            resets = self.backend.resets
            # Asked for more than wanted: repeats of one fact fold into one hit.
            hits = collapse_repeats(
                self._search(query, limit * OVERFETCH, source, mode, prefix, timeout, first, last),
                limit,
            )
            if self.backend.resets == resets:
                break
        return hits

    def _search(
        self,
        query: str,
        limit: int,
        source: str,
        mode: SearchMode,
        prefix: str | None,
        timeout: float | None,
        since: str | None,
        until: str | None,
    ) -> list[SearchHit]:
        backend = self.backend
        if since is None and until is None:
            return backend.search(
                query, limit, source=source, mode=mode, path_prefix=prefix, timeout=timeout
            )
        if "dates" in backend.capabilities:
            return backend.search(
                query,
                limit,
                source=source,
                mode=mode,
                path_prefix=prefix,
                timeout=timeout,
                since=since,
                until=until,
            )
        pool = max(limit, DATED_FALLBACK_POOL)
        hits = backend.search(
            query, pool, source=source, mode=mode, path_prefix=prefix, timeout=timeout
        )
        return [hit for hit in hits if dated_within(hit.date, since, until)][:limit]

    # internals ----------------------------------------------------------------------------

    def _load_known(self) -> dict[str, dict[str, str | None]]:
        if self._known is None or self._resets != self.backend.resets:
            self._resets = self.backend.resets
            known: dict[str, dict[str, str | None]] = {source: {} for source in INDEX_SOURCES}
            hashes: dict[str, str] = {}
            for path, indexed in self.backend.files().items():
                known.setdefault(indexed.source, {})[path] = indexed.change_token
                hashes[path] = indexed.content_hash
            self._known = known
            self._hashes = hashes
            self._swept_at.clear()
        return self._known

    def _folders_of(self, source: str) -> list[tuple[str, str]]:
        if source == "sessions":
            return [(layout.SESSIONS_DIR, layout.SESSION_LOG_SUFFIX)]
        folders = [(layout.MEMORY_DIR, ".md")]
        if self.include_archive:
            folders.append((layout.ARCHIVE_DIR, ".md"))
        return folders

    def _sweep(
        self, source: str, known: dict[str, str | None], full: bool, result: ReindexResult
    ) -> None:
        swept_at = self.clock()
        root = self.workspace.local_root
        listed: dict[str, str | None] = {}
        if root is not None:
            for folder, _ in self._folders_of(source):
                # Before the listing: a change made during it shows up at the next check.
                mtime = _mtime_ns(os.path.join(root, folder))
                self._folders[folder] = None if mtime is not None and _racy(mtime) else mtime
        if source == "memory":
            listed.update(self._tokens("", layout.MEMORY_FILE, exact=True))
        for folder, suffix in self._folders_of(source):
            listed.update(self._tokens(folder, suffix))
        result.checked += len(listed)
        stale = [(p, t) for p, t in listed.items() if full or t is None or known.get(p, "") != t]
        result.unchanged += len(listed) - len(stale)
        self._index(stale, source, known, result)
        for path in [p for p in known if p not in listed]:
            self._drop(path, known, result)
        self._swept_at[source] = swept_at
        horizon = (time.time() - self.HOT_SECONDS) * 1e9
        self._hot[source] = {
            path
            for path, token in listed.items()
            if token is None or _token_mtime_ns(token) >= horizon
        }

    def _quick(self, source: str, known: dict[str, str | None]) -> ReindexResult | None:
        """The cheap check between sweeps of a local workspace: folder mtimes, hot files."""
        root = self.workspace.local_root
        assert root is not None
        for folder, _ in self._folders_of(source):
            recorded = self._folders.get(folder, -1)
            if recorded is None or _mtime_ns(os.path.join(root, folder)) != recorded:
                return self.sync((source,))
        hot = self._hot.setdefault(source, set())
        if source == "memory":
            hot.add(layout.MEMORY_FILE)
        stale = []
        for path in hot:
            token = _file_token(os.path.join(root, path))
            if token != known.get(path):
                stale.append((path, token))
        if not stale:
            return None
        started = time.perf_counter()
        result = ReindexResult()
        result.checked = len(stale)
        for path, token in stale:
            if token is None:
                self._drop(path, known, result)
        self._index([(p, t) for p, t in stale if t is not None], source, known, result)
        result.seconds = time.perf_counter() - started
        return result

    def _sync_paths(
        self, paths: Sequence[str], known: dict[str, dict[str, str | None]], result: ReindexResult
    ) -> None:
        for raw in paths:
            try:
                written = self.workspace.take_written(raw)
                if written is not None:
                    # This process just wrote it: no need to ask the store again.
                    path, token, data = raw.strip("/"), written[1], written[0]
                else:
                    info = self.workspace.info(raw)
                    path, token, data = info.path, info.etag_or_hash, None
            except PathNotAllowed:
                continue
            except FileNotFoundError:
                for table in known.values():
                    self._drop(raw.strip("/"), table, result)
                continue
            source = source_of(path, include_archive=self.include_archive)
            if source is not None:
                result.checked += 1
                self._hot.setdefault(source, set()).add(path)
                loaded = {path: data} if data is not None else None
                self._index([(path, token)], source, known[source], result, loaded)

    def _drop(self, path: str, known: dict[str, str | None], result: ReindexResult) -> None:
        if path in known:
            del known[path]
            if self.backend.remove(path):
                result.removed += 1
                result.changes.append(FileChange(path, self._hashes.pop(path, None), None))

    def _index(
        self,
        items: Sequence[tuple[str, str | None]],
        source: str,
        known: dict[str, str | None],
        result: ReindexResult,
        loaded: dict[str, bytes] | None = None,
    ) -> None:
        """Read, chunk and hand over ``items`` (path, token) in batches of ~BATCH_ENTRIES.

        Files are read before the backend is called, so that a slow store never holds
        the index's write lock; ``loaded`` holds contents already known (not read again).
        """
        zone = self.timezone

        def chunk(path: str, text: str) -> Sequence[IndexEntry]:
            if source == "sessions":
                return chunk_session_log(path, text, zone)
            return chunk_markdown(path, text)

        batch: list[FileUpdate] = []
        size = 0
        for position, (path, token) in enumerate(items):
            try:
                data = (loaded or {}).get(path)
                if data is None:
                    data = self.workspace.read_at(path, token)
            except FileNotFoundError:  # deleted since the listing
                self._drop(path, known, result)
            except PathNotAllowed as exc:  # e.g. became a symlink out of the workspace
                logger.warning("not indexing %s: %s", path, exc.message)
                self._drop(path, known, result)
                known[path] = token  # not indexed; looked at again only once it changes
            else:
                # Decoded as read_text (and so memory_get) reads it: the line numbers agree,
                # and a UTF-16 file is indexed as text.
                entries = chunk(path, decode(data)[0])
                batch.append(FileUpdate(path, content_hash(data), entries, source, token))
                size += len(entries) + 1
            if batch and (size >= BATCH_ENTRIES or position == len(items) - 1):
                for update, changed in zip(batch, self.backend.sync_files(batch), strict=True):
                    # A token minted within a timestamp tick of a write may survive a
                    # further write (git's "racily clean" files): remember None, so the
                    # file is read again until its mtime is safely in the past.
                    token = update.change_token
                    local = self.workspace.local_root is not None
                    racy = local and token is not None and _racy(_token_mtime_ns(token))
                    known[update.path] = None if racy else token
                    if changed:
                        result.indexed += 1
                        result.entries += len(update.entries)
                        before = self._hashes.get(update.path)
                        if before != update.content_hash:
                            result.changes.append(
                                FileChange(update.path, before, update.content_hash)
                            )
                    else:
                        result.unchanged += 1
                    self._hashes[update.path] = update.content_hash
                batch, size = [], 0

    def _tokens(self, folder: str, suffix: str, *, exact: bool = False) -> dict[str, str | None]:
        root = self.workspace.local_root
        if root is not None:
            return _local_tokens(str(root), folder, suffix, exact=exact)
        if exact:
            try:
                return {suffix: self.workspace.info(suffix, listed=True).etag_or_hash}
            except FileNotFoundError:
                return {}
        return _remote_tokens(self.workspace, folder, suffix)


def _mtime_ns(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _file_token(path: str) -> str | None:
    """``Workspace.info``'s local change token of ``path``; None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"


#: Timestamps closer to now than this may not yet reflect every write (coarse kernel
#: clocks tick every few ms; FAT and HFS+ store 1-2 s); such tokens are not trusted.
_RACY_NS = 2_000_000_000


def _racy(mtime_ns: float) -> bool:
    return time.time_ns() - mtime_ns < _RACY_NS


def _token_mtime_ns(token: str) -> float:
    head = token.split("-", 1)[0]
    return float(head) if head.isdigit() else float("inf")  # unknown form: keep it hot


def _local_tokens(root: str, folder: str, suffix: str, *, exact: bool) -> dict[str, str | None]:
    """Change tokens as ``Workspace.info`` makes them, from one ``scandir`` of ``folder``.

    A symlink leading outside the workspace is skipped (memory_get would refuse it too).
    """
    directory = os.path.join(root, folder) if folder else root
    found: dict[str, str | None] = {}
    try:
        scanner = os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return found
    with scanner:
        for item in scanner:
            name = item.name
            if exact:
                if name != suffix:
                    continue
            elif not name.endswith(suffix) or name.startswith("."):
                continue
            try:
                if not item.is_file():
                    continue
                if item.is_symlink() and not _links_to_memory(root, item.path):
                    logger.debug("not indexing %s: a symlink out of the memory files", item.path)
                    continue
                st = item.stat()
            except OSError:
                continue
            rel = f"{folder}/{name}" if folder else name
            found[rel] = f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"
    return found


def _links_to_memory(root: str, link: str) -> bool:
    """Whether a symlink resolves to a memory file or session log of this workspace.

    The same rule as ``MemoryHarness.get``: a link to anything else (outside the
    workspace, or AGENTS.md inside it) would leak through search what get refuses.
    """
    real = os.path.realpath(link)
    base = os.path.realpath(root).rstrip(os.sep) + os.sep
    if not real.startswith(base):
        return False
    rel = real[len(base) :].replace(os.sep, "/")
    return rel == layout.MEMORY_FILE or rel.startswith(
        (f"{layout.MEMORY_DIR}/", f"{layout.SESSIONS_DIR}/")
    )


def _remote_tokens(workspace: Workspace, folder: str, suffix: str) -> dict[str, str | None]:
    """Change tokens from one listing with details (the ETag on S3)."""
    found: dict[str, str | None] = {}
    for info in workspace.scan(folder, recursive=False):
        name = info.path.rsplit("/", 1)[-1]
        if name.endswith(suffix) and not name.startswith("."):
            found[info.path] = info.etag_or_hash
    return found
