"""An index backend kept in one JSON file: the template for a third-party index.

Copy this module to wrap your own search engine. It shows the parts every backend has:

- ``Options``: a pydantic model of ``index.options`` (unknown keys are refused with the
  dotted path, ``index.options.pth: unknown setting; did you mean 'index.options.path'?``);
- ``__init__`` reads the context the harness passes (``index_path``, ``workspace``) and
  opens the store;
- ``capabilities`` says what the conformance suite may test (here ``persistent``: a second
  instance on the same file sees what the first wrote);
- ``_sync_files`` / ``remove`` / ``clear`` change the store atomically, ``_search`` answers
  from it, ``files`` / ``stats`` describe it, ``close`` releases it;
- rows are keyed by ``self.workspace_id``: several workspaces may share one store (sibling
  workspaces, a ``HarnessPool``), and each instance reads, writes, counts and clears only its
  own (``IndexBackendSuite``'s isolation tests check it; ``scoped()`` gives the instance of
  another workspace on the same store);
- a store that is missing or unreadable starts empty and counts a ``reset``, so the harness
  hands over every file again.

The "engine" here is harnessmem's in-memory reference index (BM25 ranking, CJK, phrases),
rebuilt from the file whenever another process changed it; yours would be Tantivy,
Elasticsearch, a vector store, ... The file is rewritten whole at every change, so keep it
to a few thousand entries: it is a template, not a production index.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from filelock import FileLock
from pydantic import Field

from harnessmem import ConfigError
from harnessmem.backends import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    SearchHit,
    SearchRequest,
)
from harnessmem.backends.inmemory import InMemoryIndex

__all__ = ["JsonFileIndex", "JsonFileIndexOptions"]

logger = logging.getLogger("harnessmem_example.jsonindex")

#: Bump when the layout of the file changes; a file of another format is rebuilt.
FORMAT = 2


class JsonFileIndexOptions(BackendOptions):
    """``index.options`` of the ``jsonfile`` backend."""

    path: str | None = Field(
        None,
        description="The JSON file. Default: beside the harness's index_path, one file per "
        "workspace.",
    )
    indent: int | None = Field(
        None, ge=0, le=8, description="Indent the file for reading by eye (larger file)."
    )


class JsonFileIndex(IndexBackend):
    """Entries of every file in one JSON document; searched by the in-memory reference."""

    name: ClassVar[str] = "jsonfile"
    Options = JsonFileIndexOptions
    capabilities: ClassVar[frozenset[str]] = InMemoryIndex.capabilities | {"persistent"}

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        super().__init__(options, **context)
        assert isinstance(options, JsonFileIndexOptions)
        self.path = _file_for(options, context)
        self.indent = options.indent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # threads of this process
        self._file_lock = FileLock(f"{self.path}.lock")  # other processes
        self._seen: bytes | None = None  # the file's bytes when last read
        # Every workspace's files as the document holds them; ours are _files. Sibling
        # workspaces may share one file (options.path), so rows are keyed by workspace id:
        # this instance reads, writes and clears only its own.
        self._workspaces: dict[str, dict[str, dict[str, Any]]] = {}
        self._files: dict[str, dict[str, Any]] = {}
        self._engine = InMemoryIndex.create({})

    # -- the store ------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Read the file again if it changed since we last did (another instance wrote)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if raw == self._seen:
            return
        try:
            workspaces, engine = _load(raw, self.workspace_id)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Unreadable: start empty; the harness sees ``resets`` move and re-syncs.
            logger.warning("index file %s is unusable (%s); starting empty", self.path, exc)
            self.resets += 1
            workspaces, engine = {}, InMemoryIndex.create({})
        self._workspaces, self._engine, self._seen = workspaces, engine, raw
        self._files = workspaces.setdefault(self.workspace_id, {})

    def _save(self) -> None:
        """Write the whole document atomically: a temp file in the same folder, renamed."""
        data = {"format": FORMAT, "workspaces": self._workspaces}
        raw = json.dumps(data, ensure_ascii=False, indent=self.indent).encode()
        handle, temp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(raw)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        self._seen = raw

    # -- writes: read what others wrote, change it, write it back, under both locks ----------

    def _sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        # The base class's sync_file and sync_files check each update's source first.
        return [self._sync(update) for update in updates]

    def _sync(self, update: FileUpdate) -> bool:
        path, content_hash, change_token = update.path, update.content_hash, update.change_token
        rows = [list(entry) for entry in update.entries]  # entries may be a lazy sequence
        with self._lock, self._file_lock:
            self._refresh()
            held = self._files.get(path)
            changed = held is None or held["hash"] != content_hash
            if changed:
                held = {"source": update.source, "hash": content_hash, "entries": rows}
            assert held is not None
            held["token"] = change_token
            self._files[path] = held
            self._save()
            self._engine.sync_file(
                path,
                content_hash,
                [IndexEntry(*row) for row in held["entries"]],
                source=held["source"],
                change_token=change_token,
            )
            return changed

    def remove(self, path: str) -> bool:
        with self._lock, self._file_lock:
            self._refresh()
            if self._files.pop(path, None) is None:
                return False
            self._save()
            return self._engine.remove(path)

    def clear(self) -> None:
        with self._lock, self._file_lock:
            self._refresh()
            self._files.clear()  # this workspace's rows only
            self._save()
            self._engine.clear()

    # -- reads ----------------------------------------------------------------------------

    def _search(self, request: SearchRequest) -> list[SearchHit]:
        # search() checked the arguments and parsed the query, as for every backend; the
        # in-memory reference ranks them (and keeps the hits dated within since..until).
        with self._lock:
            self._refresh()
            engine = self._engine
        return engine.search(
            request.text,
            request.limit,
            source=request.source,
            mode=request.mode,
            path_prefix=request.path_prefix,
            timeout=request.timeout,
            since=request.since,
            until=request.until,
        )

    def files(self) -> dict[str, IndexedFile]:
        with self._lock:
            self._refresh()
            return self._engine.files()

    def stats(self) -> IndexStats:
        with self._lock:
            self._refresh()
            held = self._engine.stats()
        return IndexStats(held.files, held.entries, {"path": str(self.path)})

    def close(self) -> None:
        # Nothing stays open between calls; an engine with connections closes them here
        # (and must allow a second close()).
        self._engine.close()


def _load(
    raw: bytes, workspace_id: str
) -> tuple[dict[str, dict[str, dict[str, Any]]], InMemoryIndex]:
    """Every workspace's files in a document, and an engine holding the entries of
    ``workspace_id``'s (empty for no bytes)."""
    engine = InMemoryIndex.create({})
    if not raw:
        return {}, engine
    data = json.loads(raw)
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
    workspaces = {str(k): dict(v) for k, v in dict(data["workspaces"]).items()}
    for path, held in workspaces.get(workspace_id, {}).items():
        entries = [IndexEntry(*row) for row in held["entries"]]
        engine.sync_file(
            path, held["hash"], entries, source=held["source"], change_token=held["token"]
        )
    return workspaces, engine


def _file_for(options: JsonFileIndexOptions, context: dict[str, Any]) -> Path:
    """The configured file, else one beside ``index_path`` named after the workspace.

    Sibling workspaces share their parent's ``index_path`` (``memory_index.db``), so the
    default name carries a digest of the workspace URL: two workspaces never share a file.
    """
    if options.path:
        return Path(options.path).expanduser()
    index_path = context.get("index_path")
    if index_path is None:
        raise ConfigError(
            "index.options.path: the jsonfile index needs a file",
            hint="set index.options.path (a harness passes an index_path of its own)",
        )
    workspace = context.get("workspace")
    digest = hashlib.sha256(str(getattr(workspace, "url", "")).encode()).hexdigest()[:12]
    return Path(index_path).with_name(f"jsonfile-index-{digest}.json")
