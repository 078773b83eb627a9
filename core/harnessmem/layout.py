"""Where everything lives in a workspace: every path harnessmem reads or writes (DESIGN §6).

The one owner of the workspace layout; every other module takes its paths from here::

    MEMORY.md                                  curated long-term memory
    memory/YYYY-MM-DD.md                       daily logs (append-only)
    memory/archive/YYYY-MM-DD.md               expired daily logs
    memory/.consolidation_state                consolidation's watermark
    memory/.maintenance_state                  the last maintenance tick
    memory/.flush_state/<session>.json         the flush's high-water mark per session
    memory/.tombstones.json                    what was forgotten (salted word hashes)
    memory/.history/                           previous MEMORY.md versions, and the original
                                               bytes of files that were not clean UTF-8
    sessions/<session>.log.jsonl               raw messages offloaded before compaction
    sessions/<session>.offload.json            what a session log holds (its mark)
    large_tool_results/<session>/<call>-<hash>.txt   evicted tool output (eviction.path)
    usage/YYYY-MM-DD.jsonl                     the model-usage ledger
    audit/YYYY-MM-DD.jsonl                     the audit log: one record per change
    .locks/<name>.lease                        workspace leases (and local file locks)
    <workspace parent>/memory_index.db         the default SQLite index of a local workspace

Ids in paths (session ids, call ids, lease names) pass through :func:`safe_id`. It sits in
the lowest layer (beside settings and ``encoding``), so that every module may use it.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from harnessmem.encoding import content_hash

__all__ = [
    "ARCHIVE_DIR",
    "AUDIT_DIR",
    "AUDIT_OPERATIONS",
    "CONSOLIDATION_LEASE",
    "CONSOLIDATION_STATE",
    "EVICTION_DIR",
    "FLUSH_STATE_DIR",
    "HISTORY_DIR",
    "INDEX_FILE",
    "LOCKS_DIR",
    "LOCK_STRIPES",
    "MAINTENANCE_LEASE",
    "MAINTENANCE_STATE",
    "MEMORY_DIR",
    "MEMORY_FILE",
    "OFFLOAD_MARK_SUFFIX",
    "READABLE_FILES",
    "READABLE_PREFIXES",
    "RESERVED_NAMES",
    "SESSIONS_DIR",
    "SESSION_LOG_SUFFIX",
    "TOMBSTONES",
    "USAGE_DIR",
    "archive_path",
    "audit_path",
    "bookkeeping",
    "daily_log_date",
    "daily_log_path",
    "daily_path",
    "day_files",
    "default_index_path",
    "eviction_path",
    "file_lock_path",
    "flush_state_path",
    "history_path",
    "is_daily_log",
    "is_history_path",
    "lease_path",
    "local_date",
    "lock_stripe",
    "offload_lease",
    "offload_mark_path",
    "original_path",
    "public_url",
    "safe_id",
    "session_log_path",
    "session_stem",
    "source_of",
    "usage_path",
]

# -- files and folders --------------------------------------------------------------------------

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
ARCHIVE_DIR = "memory/archive"
#: Previous MEMORY.md versions kept by consolidation; also where the workspace keeps the
#: original bytes of a file that was not clean UTF-8 before the first write replaces them.
HISTORY_DIR = "memory/.history"
CONSOLIDATION_STATE = "memory/.consolidation_state"
MAINTENANCE_STATE = "memory/.maintenance_state"
FLUSH_STATE_DIR = "memory/.flush_state"
#: What ``forget`` removed, as salted word hashes that flush and consolidation honour.
TOMBSTONES = "memory/.tombstones.json"
SESSIONS_DIR = "sessions"
SESSION_LOG_SUFFIX = ".log.jsonl"
OFFLOAD_MARK_SUFFIX = ".offload.json"
USAGE_DIR = "usage"
#: The audit log: who changed which file when (``harnessmem.audit``).
AUDIT_DIR = "audit"
LOCKS_DIR = ".locks"
#: The default of ``eviction.path``.
EVICTION_DIR = "large_tool_results"
#: File name of the default SQLite index.
INDEX_FILE = "memory_index.db"

#: Top-level names of harnessmem's own files (the eviction folder may take none of them).
RESERVED_NAMES = frozenset({MEMORY_FILE, MEMORY_DIR, SESSIONS_DIR})
#: What ``memory_get`` reads, besides the eviction folder.
READABLE_FILES = (MEMORY_FILE,)
READABLE_PREFIXES = (f"{MEMORY_DIR}/", f"{SESSIONS_DIR}/")

# -- lease names --------------------------------------------------------------------------------

MAINTENANCE_LEASE = "maintenance"
CONSOLIDATION_LEASE = "consolidation"

_SAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_DATE = r"\d{4}-\d{2}-\d{2}"
_DAILY_NAME = re.compile(rf"^{_DATE}\.md$")
_DAILY_LOG = re.compile(rf"^{MEMORY_DIR}/(?P<archive>archive/)?(?P<date>{_DATE})\.md$")
_HISTORY = re.compile(r"^memory/\.history/MEMORY-\d{8}T\d{6}Z(?:-\d+)?\.md$")
_JSONL_DAY = re.compile(rf"({_DATE})\.jsonl")
#: Hex digits of the content hash in an eviction file's name.
_EVICTION_HASH_CHARS = 16


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def path_problem(
    raw: str, *, normal: bool = False, allow_root: bool = False
) -> tuple[str, str | None]:
    """The one statement of which paths name a file of a workspace.

    Returns ``(rel, None)`` with ``rel`` the normal relative POSIX form of ``raw``, or
    ``("", why)`` with the reason it is refused: a NUL or backslash, an absolute path, a URL
    or drive path, a path into :data:`LOCKS_DIR`, the root itself (unless ``allow_root``),
    and ``..`` above the root. ``normal``: ``raw`` must already be in normal form (no empty,
    ``.`` or ``..`` part), as the paths an export writes are; used for archives, where a
    path that only normalises into the workspace is a sign of a crafted file.
    """
    if "\x00" in raw or "\\" in raw:
        return "", "it contains a backslash or NUL"
    if raw.startswith("/"):
        return "", "it is absolute"
    if _SCHEME.match(raw):
        return "", "it is a URL or drive path"
    parts: list[str] = []
    for segment in raw.split("/"):
        if normal and segment in ("", ".", ".."):
            return "", "it has an empty, '.' or '..' part"
        if segment == "..":
            if not parts:
                return "", "'..' leaves the workspace"
            parts.pop()
        elif segment not in ("", "."):
            parts.append(segment)
    if parts and parts[0] == LOCKS_DIR:
        return "", f"{LOCKS_DIR}/ holds the workspace's locks and leases"
    if not parts and not allow_root:
        return "", "it names the workspace root, not a file"
    return "/".join(parts), None


def public_url(url: str) -> str:
    """``url`` without a user, password, query or fragment: what may name a workspace in
    telemetry and logs (``s3://key:secret@bucket/ws?x=y`` is ``s3://bucket/ws``)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def safe_id(text: str, *, max_length: int = 80) -> str:
    """Turn an id (session id, call id, lease name) into one safe path segment.

    Keeps ``[A-Za-z0-9._-]`` and replaces anything else with ``_``. The result is never
    empty, ``.`` or ``..``, and at most ``max_length`` characters. When the text had to be
    changed or cut, a hash of the original is appended, so distinct ids stay distinct;
    safe ids come back unchanged.
    """
    if max_length < 24:
        raise ValueError(f"safe_id max_length must be at least 24, got {max_length}")
    cleaned = _SAFE_CHARS.sub("_", text)
    if cleaned.strip(".") == "":
        cleaned = cleaned.replace(".", "_") or "_"
    if cleaned == text and len(text) <= max_length:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{cleaned[: max_length - len(digest) - 1]}-{digest}"


# -- daily logs ---------------------------------------------------------------------------------


def local_date(timestamp: float, timezone: str) -> str:
    """The calendar date of ``timestamp`` in ``timezone`` (names the daily log)."""
    return datetime.fromtimestamp(timestamp, ZoneInfo(timezone)).date().isoformat()


def daily_log_path(day: str) -> str:
    """The daily log of ``day`` (``YYYY-MM-DD``): ``memory/YYYY-MM-DD.md``."""
    return f"{MEMORY_DIR}/{day}.md"


def daily_path(timestamp: float, timezone: str) -> str:
    """``memory/YYYY-MM-DD.md`` for the day ``timestamp`` falls on in ``timezone``."""
    return daily_log_path(local_date(timestamp, timezone))


def archive_path(name: str) -> str:
    """Where the daily log named ``name`` (``YYYY-MM-DD.md``) goes when it expires."""
    return f"{ARCHIVE_DIR}/{name}"


def is_daily_log(name: str) -> bool:
    """Whether a file name (not a path) is a daily log's (``YYYY-MM-DD.md``)."""
    return bool(_DAILY_NAME.match(name))


def daily_log_date(path: str, *, archived: bool | None = False) -> str | None:
    """The date of the daily log at ``path``, None when it is not one.

    ``archived``: False for ``memory/YYYY-MM-DD.md`` only, True for
    ``memory/archive/YYYY-MM-DD.md`` only, None for either.
    """
    match = _DAILY_LOG.match(path)
    if match is None or (archived is not None and bool(match.group("archive")) != archived):
        return None
    return match.group("date")


def history_path(stamp: str, counter: int = 0) -> str:
    """Where a previous MEMORY.md version goes: ``memory/.history/MEMORY-<stamp>[-n].md``."""
    suffix = f"-{counter}" if counter else ""
    return f"{HISTORY_DIR}/MEMORY-{stamp}{suffix}.md"


def is_history_path(path: str) -> bool:
    """Whether ``path`` is a previous MEMORY.md version of :func:`history_path`."""
    return bool(_HISTORY.match(path))


def flush_state_path(session_id: str) -> str:
    """The flush's high-water mark of a session: ``memory/.flush_state/<safe id>.json``."""
    return f"{FLUSH_STATE_DIR}/{safe_id(session_id)}.json"


# -- session logs -------------------------------------------------------------------------------


def session_log_path(session_id: str) -> str:
    """Workspace path of a session's raw message log: ``sessions/<safe id>.log.jsonl``."""
    return f"{SESSIONS_DIR}/{safe_id(session_id)}{SESSION_LOG_SUFFIX}"


def offload_mark_path(session_id: str) -> str:
    """What a session log holds: ``sessions/<safe id>.offload.json``."""
    return f"{SESSIONS_DIR}/{safe_id(session_id)}{OFFLOAD_MARK_SUFFIX}"


def session_stem(path: str) -> str | None:
    """The safe session id of a session log or offload mark path, None for other paths."""
    head, _, name = path.rpartition("/")
    if head != SESSIONS_DIR:
        return None
    for suffix in (SESSION_LOG_SUFFIX, OFFLOAD_MARK_SUFFIX):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def offload_lease(session_id: str) -> str:
    """The name of the lease that guards a session log's appends and its pruning."""
    return f"offload:{safe_id(session_id)}"


# -- the rest -----------------------------------------------------------------------------------


def eviction_path(folder: str, session_id: str, call_id: str, text: str) -> str:
    """Workspace path of an evicted result: ``<folder>/<session>/<call id>-<hash>.txt``.

    The hash is over the stored text, so the same content under the same call id always
    maps to the same file and a reused call id with new content gets a new one.
    """
    digest = content_hash(text.encode("utf-8", "surrogatepass"))[:_EVICTION_HASH_CHARS]
    call = safe_id(call_id or "no-call-id", max_length=64)
    return f"{folder.strip('/')}/{safe_id(session_id)}/{call}-{digest}.txt"


def original_path(rel: str, timestamp: float, data: bytes) -> str:
    """Where the original bytes ``data`` of ``rel`` (not clean UTF-8) are kept before the
    first write replaces them: ``memory/.history/<rel>.<UTC stamp>-<hash>.original``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(timestamp))
    name = safe_id(rel.replace("/", "--"), max_length=120)
    return f"{HISTORY_DIR}/{name}.{stamp}-{content_hash(data)[:8]}.original"


def usage_path(day: str) -> str:
    """The usage ledger of one day (``YYYY-MM-DD``): ``usage/<day>.jsonl``."""
    return f"{USAGE_DIR}/{day}.jsonl"


def day_files(folder: str, paths: Iterable[str]) -> list[tuple[date, str]]:
    """The ``<folder>/<YYYY-MM-DD>.jsonl`` files among ``paths`` (a listing of ``folder``:
    the usage ledger's, the audit log's) as ``(day, path)``, oldest first; other names,
    and names that are not dates (2026-13-45.jsonl), are left out."""
    found = []
    for path in paths:
        head, _, name = path.rpartition("/")
        match = _JSONL_DAY.fullmatch(name)
        if match is None or head != folder:
            continue
        try:
            found.append((date.fromisoformat(match.group(1)), path))
        except ValueError:
            continue
    return sorted(found)


def bookkeeping(path: str) -> bool:
    """Whether ``path`` is one of harnessmem's state files rather than memory (the
    consolidation watermark, the maintenance state, flush marks, tombstones): the audit log
    records the memory an operation changed, not its bookkeeping."""
    return path in (CONSOLIDATION_STATE, MAINTENANCE_STATE, TOMBSTONES) or path.startswith(
        f"{FLUSH_STATE_DIR}/"
    )


#: The operations that write audit records (``audit/<day>.jsonl``), the ``op`` of each.
AUDIT_OPERATIONS = (
    "flush",
    "save",
    "consolidate",
    "edit",
    "forget",
    "import",
    "archive",
    "prune",
    "reindex",
)


def audit_path(day: str) -> str:
    """The audit log of one day (``YYYY-MM-DD``): ``audit/<day>.jsonl``."""
    return f"{AUDIT_DIR}/{day}.jsonl"


#: Lock files of a local workspace's appends and compare-and-swaps (see :func:`file_lock_path`).
LOCK_STRIPES = 256


def lock_stripe(rel: str) -> int:
    """The lock file (0 to LOCK_STRIPES - 1) that serialises writes to workspace path ``rel``.

    A hash of the path, never to change: processes of two versions that share a workspace
    must take the same lock for the same file.
    """
    digest = hashlib.blake2b(rel.encode(), digest_size=16).hexdigest()
    return int(digest[:8], 16) % LOCK_STRIPES


def file_lock_path(rel: str) -> str:
    """The lock file that serialises writes to ``rel`` (``.locks/files/NNN.lock``)."""
    return f"{LOCKS_DIR}/files/{lock_stripe(rel):03d}.lock"


def lease_path(name: str) -> str:
    """Where the lease ``name`` is stored, relative to the workspace root."""
    return f"{LOCKS_DIR}/{safe_id(name)}.lease"


def source_of(path: str, *, include_archive: bool = False) -> str | None:
    """The index source of a workspace path (``memory`` or ``sessions``), None if not indexed."""
    if path == MEMORY_FILE:
        return "memory"
    head, _, name = path.rpartition("/")
    if head == MEMORY_DIR and name.endswith(".md") and not name.startswith("."):
        return "memory"
    if include_archive and head == ARCHIVE_DIR and name.endswith(".md"):
        return "memory"
    if head == SESSIONS_DIR and name.endswith(SESSION_LOG_SUFFIX) and not name.startswith("."):
        return "sessions"
    return None


def default_index_path(local_root: Path | None, url: str) -> Path:
    """The default SQLite index file: ``memory_index.db`` beside a local workspace, else in
    a cache folder of its own for each workspace URL (``$XDG_CACHE_HOME/harnessmem/...``)."""
    if local_root is not None:
        return local_root.parent / INDEX_FILE
    digest = content_hash(url.encode())[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "harnessmem" / digest / INDEX_FILE
