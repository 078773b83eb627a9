"""The audit log: one record per change to a workspace, saying who changed which files when.

Every operation that changes memory writes one :class:`AuditRecord` to
``audit/YYYY-MM-DD.jsonl`` (the day in ``workspace.timezone``): a flush that wrote facts
(``flush``), ``memory_save`` (``save``), a consolidation that rewrote MEMORY.md
(``consolidate``), ``edit``, ``forget``, an ``import``, maintenance's ``archive`` and
``prune`` steps, and a ``reindex`` that found files changed. A record holds the time, the
operation, the actor (``session:<id>``, ``cli``, ``mcp:<client>``, ``maintenance``,
``inspector``, or ``api`` for a program's own call), the tenant in a pool, the session, each
file touched with the content hash (:func:`harnessmem.encoding.content_hash`) it held before
and after, the operation's counts, the error when it failed part-way, and the OpenTelemetry
trace and span ids when a span was recording. Never text: a record of a ``forget`` names the
files and hashes the fact left, so the audit log keeps nothing a forget removed.

An operation that changed nothing writes nothing. An operation inside another one (the
reindex a flush runs, the consolidation of a maintenance tick's step) is part of the outer
record, not a record of its own.

Writing never fails the operation it records: the record is appended with the workspace's
safe append (``O_APPEND`` under a file lock locally, a conditional PUT on S3; several
writers lose nothing), and when that fails it is kept in memory, logged, retried before
the next record and again when the harness closes. Each record is one JSON line that starts
with ``{"id":``; a reader skips a line torn by a crash and recovers a record appended after
one (see :func:`parse_line`). Maintenance deletes the files older than
``audit.retention_days`` (never today's or yesterday's).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from harnessmem import layout
from harnessmem.workspace.changes import FileChange, watch_changes

if TYPE_CHECKING:
    from harnessmem.workspace import Workspace

__all__ = [
    "OPERATIONS",
    "AuditChange",
    "AuditLog",
    "AuditRecord",
    "acting_as",
    "audit_files",
    "current_actor",
    "in_session",
    "parse_line",
    "read_audit",
    "set_actor",
]

logger = logging.getLogger("harnessmem.audit")

#: The operations that write audit records.
OPERATIONS = layout.AUDIT_OPERATIONS
#: Operations whose error message could quote what they removed: their records keep only
#: the exception's type.
_TEXT_FREE_ERRORS = frozenset({"forget", "edit"})
#: Files listed in one record at most (a full reindex of a large workspace touches every
#: file); ``counts["files"]`` still says how many there were.
MAX_FILES = 500
_START = '{"id":'

_ACTOR: ContextVar[str | None] = ContextVar("harnessmem_audit_actor", default=None)
_SESSION: ContextVar[str | None] = ContextVar("harnessmem_audit_session", default=None)
_OPEN: ContextVar[AuditChange | None] = ContextVar("harnessmem_audit_change", default=None)


# ------------------------------------------------------------------------------ who


def current_actor() -> str | None:
    """The actor this context acts as (:func:`acting_as`), None when unset."""
    return _ACTOR.get()


def set_actor(actor: str) -> Callable[[], None]:
    """Act as ``actor`` from now on in this context (a command's whole run); returns the
    function that ends it (the command line calls it when the command ends)."""
    token = _ACTOR.set(actor)
    return lambda: _ACTOR.reset(token)


@contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """Records of changes made in the block name ``actor`` (``cli``, ``mcp:<client>``,
    ``maintenance``, ...); the innermost one counts."""
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


@contextmanager
def in_session(session_id: str) -> Iterator[None]:
    """Changes made in the block come from the session ``session_id`` (its tool calls)."""
    token = _SESSION.set(session_id)
    try:
        yield
    finally:
        _SESSION.reset(token)


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class AuditRecord:
    """One change to a workspace (see the module docstring). ``files`` are the files it
    changed; ``counts`` its figures (facts written, files archived, ...)."""

    id: str
    at: float
    op: str
    actor: str
    files: tuple[FileChange, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    session: str | None = None
    tenant: str | None = None
    error: str | None = None
    trace_id: str | None = None
    span_id: str | None = None

    def to_json(self) -> str:
        """One JSON line's text, ``id`` first (what :func:`parse_line` recovers by)."""
        data: dict[str, Any] = {
            "id": self.id,
            "v": 1,
            "at": round(self.at, 6),
            "op": self.op,
            "actor": self.actor,
            "session": self.session,
            "tenant": self.tenant,
            "files": [change.as_dict() for change in self.files],
            "counts": dict(self.counts),
        }
        for key, value in (
            ("error", self.error),
            ("trace_id", self.trace_id),
            ("span_id", self.span_id),
        ):
            if value is not None:
                data[key] = value
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        files = tuple(
            FileChange(str(f["path"]), f.get("before"), f.get("after"))
            for f in data.get("files") or ()
        )
        return cls(
            id=str(data["id"]),
            at=float(data["at"]),
            op=str(data["op"]),
            actor=str(data["actor"]),
            files=files,
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            session=data.get("session"),
            tenant=data.get("tenant"),
            error=data.get("error"),
            trace_id=data.get("trace_id"),
            span_id=data.get("span_id"),
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``harnessmem audit --json``)."""
        return dict(json.loads(self.to_json()))

    def day(self, timezone: str) -> str:
        """The day of the record (``YYYY-MM-DD``) in ``timezone``."""
        return layout.local_date(self.at, timezone)


def parse_line(line: str) -> AuditRecord | None:
    """The record of one line of an audit file; None for a blank, torn or foreign line.

    A writer that died mid-append (a power cut; a killed process writes whole lines) leaves
    the start of a record without its newline, and the next append continues that line:
    the record that starts last on the line is then read.
    """
    line = line.strip()
    if not line:
        return None
    for start in (0, line.rfind(_START)):
        if start < 0:
            continue
        try:
            data = json.loads(line[start:])
            return AuditRecord.from_dict(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return None


def audit_files(workspace: Workspace) -> list[tuple[date, str]]:
    """The audit log's day files as ``(day, path)``, oldest first, from one listing."""
    return layout.day_files(layout.AUDIT_DIR, workspace.list(layout.AUDIT_DIR, recursive=False))


def read_audit(
    workspace: Workspace,
    *,
    since: float | None = None,
    until: float | None = None,
    ops: Iterable[str] | None = None,
    actor: str | None = None,
    limit: int | None = None,
    timezone: str = "UTC",
) -> list[AuditRecord]:
    """The records of the audit log, oldest first, filtered.

    ``since`` / ``until``: timestamps (inclusive); ``ops``: operation names; ``actor``: an
    actor (``cli``), or its kind before the colon (``session`` matches
    ``session:<any id>``); ``limit``: the latest that many. Only the day files the time range
    covers are read.
    """
    wanted_ops = None if ops is None else frozenset(ops)
    first = None if since is None else date.fromisoformat(layout.local_date(since, timezone))
    last = None if until is None else date.fromisoformat(layout.local_date(until, timezone))
    found: list[AuditRecord] = []
    for day, path in audit_files(workspace):
        # A day file may hold a record of the day before or after (a writer in another
        # time zone): one day of slack each side.
        if first is not None and (day - first).days < -1:
            continue
        if last is not None and (day - last).days > 1:
            continue
        try:
            text = workspace.read_text(path)
        except FileNotFoundError:  # pruned since the listing
            continue
        for line in text.splitlines():
            record = parse_line(line)
            if record is None or not _matches(record, since, until, wanted_ops, actor):
                continue
            found.append(record)
    found.sort(key=lambda record: record.at)  # stable: in the order appended
    if limit is not None:
        found = found[-limit:] if limit > 0 else []
    return found


def _matches(
    record: AuditRecord,
    since: float | None,
    until: float | None,
    ops: frozenset[str] | None,
    actor: str | None,
) -> bool:
    if since is not None and record.at < since:
        return False
    if until is not None and record.at > until:
        return False
    if ops is not None and record.op not in ops:
        return False
    return actor is None or actor in (record.actor, record.actor.split(":", 1)[0])


# ------------------------------------------------------------------------------ writing


class AuditChange:
    """One operation under way (``with audit.change(op) as change``): its id, and the
    counts it adds with :meth:`count`. ``record`` is the record written, once it ended
    (None when it changed nothing, or the audit log is off)."""

    def __init__(self, op: str, record_id: str, session: str | None) -> None:
        self.op = op
        self.id = record_id
        self.session = session
        self.counts: dict[str, int] = {}
        self.record: AuditRecord | None = None
        self._noted: list[FileChange] = []
        self._thread = threading.get_ident()
        self._open = True

    def count(self, name: str, value: int) -> None:
        """Set the figure ``name`` of this change's record."""
        self.counts[name] = int(value)

    def note(self, changes: Iterable[FileChange]) -> None:
        """Add changes the workspace did not write (a reindex's: the index's view of files
        changed by someone else); a path the workspace wrote keeps the workspace's hashes."""
        self._noted.extend(change for change in changes if change.before != change.after)

    def joins(self) -> bool:
        """Whether an operation starting now in this context is part of this one: it is
        open and runs on the thread that opened it (a tick queued from inside a flush and
        run on the maintenance thread later is an operation of its own)."""
        return self._open and self._thread == threading.get_ident()


def _merged(written: list[FileChange], noted: list[FileChange]) -> list[FileChange]:
    """The workspace's changes, then the noted ones of other paths (first before, last
    after of each), without those that ended where they began."""
    found = {change.path: change for change in written}
    own = set(found)
    for change in noted:
        known = found.get(change.path)
        if known is None:
            found[change.path] = change
        elif change.path not in own:
            found[change.path] = FileChange(change.path, known.before, change.after)
    return [change for change in found.values() if change.before != change.after]


def _wanted(path: str, kind: str) -> bool:
    """What a change records: every file but harnessmem's bookkeeping, the usage ledger
    (telemetry, not memory: its appends come from whatever model call runs meanwhile, and
    the prune step counts the days it deletes) and the audit log's own appends."""
    top = path.split("/", 1)[0]
    if top == layout.USAGE_DIR or (kind == "append" and top == layout.AUDIT_DIR):
        return False
    return not layout.bookkeeping(path)


class AuditLog:
    """Writes this harness's audit records (see the module docstring); thread-safe.

    ``tenant`` names the tenant in a pool (None outside one); ``trace_ids`` returns the
    current span's (trace id, span id) as hex, or None (the telemetry's).
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        clock: Callable[[], float],
        timezone: str = "UTC",
        enabled: bool = True,
        trace_ids: Callable[[], tuple[str, str] | None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.clock = clock
        self.zone = ZoneInfo(timezone)
        self.timezone = timezone
        self.enabled = enabled
        self.trace_ids = trace_ids
        #: The tenant of this workspace in a ``HarnessPool`` (the pool sets it).
        self.tenant: str | None = None
        #: Appends that failed so far (each is retried).
        self.failures = 0
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._pending: list[AuditRecord] = []
        self._failing = False

    @property
    def pending(self) -> int:
        """Records whose append failed and waits for a retry."""
        with self._lock:
            return len(self._pending)

    def new_id(self) -> str:
        """A new record id: the time in milliseconds (hex, so ids sort by time) and 32
        random bits."""
        return f"{int(self.clock() * 1000):011x}-{secrets.token_hex(4)}"

    @contextmanager
    def change(self, op: str, *, session_id: str | None = None) -> Iterator[AuditChange]:
        """Record the workspace files changed in the block as one ``op`` record.

        Inside another open change of this thread, the block is part of that one (the
        yielded change is the outer's). The record is written when the block ends, also when
        it raises (with ``error``); a block that changed nothing writes nothing.
        """
        outer = _OPEN.get()
        if outer is not None and outer.joins():
            yield outer
            return
        if op not in OPERATIONS:
            raise ValueError(f"unknown audit operation {op!r}; known: {', '.join(OPERATIONS)}")
        change = AuditChange(op, self.new_id(), session_id or _SESSION.get())
        if not self.enabled:
            yield change
            return
        ids = self.trace_ids() if self.trace_ids is not None else None
        token = _OPEN.set(change)
        error: BaseException | None = None
        try:
            with watch_changes(_wanted) as watch:
                yield change
        except BaseException as exc:
            error = exc
            raise
        finally:
            change._open = False
            _OPEN.reset(token)
            files = _merged(watch.changes, change._noted)
            if files:
                change.record = self._record(change, files, error, ids)
                self.append(change.record)

    def _record(
        self,
        change: AuditChange,
        files: Sequence[FileChange],
        error: BaseException | None,
        ids: tuple[str, str] | None,
    ) -> AuditRecord:
        counts = dict(change.counts)
        if len(files) > MAX_FILES:
            counts.setdefault("files", len(files))
        message = None
        if error is not None:
            message = type(error).__name__
            if change.op not in _TEXT_FREE_ERRORS:
                message = f"{message}: {' '.join(str(error).split())}"[:300]
        actor = _ACTOR.get() or (f"session:{change.session}" if change.session else "api")
        return AuditRecord(
            id=change.id,
            at=self.clock(),
            op=change.op,
            actor=actor,
            files=tuple(files[:MAX_FILES]),
            counts=counts,
            session=change.session,
            tenant=self.tenant,
            error=message,
            trace_id=ids[0] if ids else None,
            span_id=ids[1] if ids else None,
        )

    def append(self, record: AuditRecord) -> bool:
        """Write ``record`` (after the ones still pending); never raises. False when it
        could not be written now: it is kept and retried with the next record and at
        :meth:`close`."""
        with self._lock:
            self._pending.append(record)
        return self.flush()

    def flush(self) -> bool:
        """Write the pending records; whether none is left pending."""
        with self._io_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return True
            by_day: dict[str, list[AuditRecord]] = {}
            for record in batch:
                day = datetime.fromtimestamp(record.at, self.zone).date().isoformat()
                by_day.setdefault(day, []).append(record)
            failed: list[AuditRecord] = []
            problem: BaseException | None = None
            for day, records in by_day.items():
                text = "".join(record.to_json() + "\n" for record in records)
                try:
                    self.workspace.append_text(layout.audit_path(day), text)
                except Exception as exc:  # the change it records stands: keep, retry, report
                    failed.extend(records)
                    problem = exc
            with self._lock:
                self._pending[:0] = failed
                began, ended = bool(failed) and not self._failing, not failed and self._failing
                self._failing = bool(failed)
                self.failures += bool(failed)
        if began and problem is not None:
            logger.warning(
                "writing the audit log of %s failed (%s: %s); %d record(s) kept in memory, "
                "retried with the next change and when the harness closes",
                self.workspace.url,
                type(problem).__name__,
                problem,
                len(failed),
            )
        elif ended:
            logger.warning("the audit log of %s is written again", self.workspace.url)
        return not failed

    def close(self) -> None:
        """Write what is still pending (the harness closes); what still fails is logged as
        an error with the records' ids, operations and times."""
        if self.flush():
            return
        with self._lock:
            lost = list(self._pending)
        logger.error(
            "%d audit record(s) of %s could not be written and are lost: %s",
            len(lost),
            self.workspace.url,
            ", ".join(f"{r.id} {r.op} at {r.at:.0f}" for r in lost[:10]),
        )
