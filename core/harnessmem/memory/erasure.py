"""Forget and edit: a fact people want gone (or put right) leaves every file that holds it.

:class:`MemoryEraser` is the engine behind ``harness.forget(query)`` and
``harness.edit(old, new)``. A query names facts: a fact (a list item with its
continuation lines, or a line of prose) matches when it holds every word of the query
(case-insensitive, :func:`~harnessmem.memory.files.query_words`) or the query's exact
text. A query that matches nothing, or more than ``limit`` facts, is a
:class:`~harnessmem.errors.ForgetError` and nothing changes: never a silent mass delete.

A forget, under the ``maintenance`` and ``consolidation`` leases (so no consolidation,
archiving or pruning runs meanwhile, in any process):

1. writes a tombstone (:mod:`harnessmem.memory._tombstones`: salted word hashes, not the
   text) that every later flush and consolidation honours, so the fact does not come
   back from an old conversation flushed again or from an older daily log; then looks
   again at the daily logs and the flush states, for a flush that appended the fact
   meanwhile (a flush writing after that reads the tombstone again and takes the fact
   back out itself);
2. removes the matching facts from the daily logs and their archive (each a
   compare-and-swap, so a flush appending meanwhile loses nothing; the consolidation
   watermark is moved with the bytes it had consumed), from MEMORY.md (the guarded
   rewrite consolidation makes, with a history entry in which the forgotten facts are a
   marker), from the previous versions in ``memory/.history/``, from a flush's pending
   entry, from evicted tool results (matching lines become a marker) and, with
   ``sessions``, from the session logs (the message's text becomes a marker; line
   numbers and the offload bookkeeping stay valid);
3. reindexes what changed and asks the index to scrub the removed bytes
   (:meth:`harnessmem.backends.base.IndexBackend.scrub`).

An edit replaces the matching facts of MEMORY.md and the daily logs with the new text
(their list markers kept) and tombstones the old words; the history keeps the version it
replaced, as consolidation's does, and session logs and evicted results are left alone.
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from harnessmem import layout
from harnessmem.encoding import content_hash
from harnessmem.errors import ForgetError, HarnessMemError
from harnessmem.memory import files as mf
from harnessmem.memory._tombstones import add_tombstone
from harnessmem.memory._watermark import Watermark, same_content
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.memory.transcripts import SessionTranscript

__all__ = ["DEFAULT_LIMIT", "MARKER", "ForgetResult", "MemoryEraser", "Removal"]

logger = logging.getLogger("harnessmem.memory.forget")

#: What stands where a forgotten text was (session logs, evicted results, history).
MARKER = "[forgotten]"
#: How many matches ``forget`` removes without being told more (``limit``).
DEFAULT_LIMIT = 20
_PREVIEW = 120
_EXAMPLES = 5

Kind = Literal["memory", "daily", "archive", "history", "state", "session", "evicted"]
#: Kinds that count against ``limit``: the places a fact lives. The others (previous
#: MEMORY.md versions, a flush's pending entry) hold copies that go with it.
_COUNTED = frozenset({"memory", "daily", "archive", "session", "evicted"})
#: What a flush writes: the daily logs and its pending entry.
_FLUSHED: frozenset[Kind] = frozenset({"daily", "state"})


@dataclass(frozen=True)
class Removal:
    """One fact removed (or, in a dry run, to be removed): where, and its text."""

    path: str
    line: int
    text: str
    kind: Kind

    @property
    def preview(self) -> str:
        """The text on one line, cut to 120 characters."""
        flat = " ".join(self.text.split())
        return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "kind": self.kind, "text": self.preview}


@dataclass(frozen=True)
class ForgetResult:
    """What ``forget`` or ``edit`` removed or replaced, where (``dry_run``: would)."""

    query: str
    dry_run: bool
    removals: tuple[Removal, ...]
    replacement: str | None = None
    #: Whether a tombstone now keeps flush and consolidation from writing it again.
    tombstoned: bool = False
    #: Whether the index rewrote its storage so the removed bytes are gone too.
    index_scrubbed: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def count(self) -> int:
        """Facts removed from the places they live (copies in history not counted)."""
        return sum(1 for r in self.removals if r.kind in _COUNTED)

    @property
    def paths(self) -> tuple[str, ...]:
        """The files changed (or, in a dry run, to be changed), in order."""
        return tuple(dict.fromkeys(r.path for r in self.removals))

    def __str__(self) -> str:
        verb = "replace" if self.replacement is not None else "remove"
        done = f"would {verb}" if self.dry_run else f"{verb}d"
        history = sum(1 for r in self.removals if r.kind == "history")
        pending = sum(1 for r in self.removals if r.kind == "state")
        extras = []
        if history:
            extras.append(f"{history} cop{'y' if history == 1 else 'ies'} in history")
        if pending:
            extras.append(f"{pending} in a flush not yet written")
        extra = f" (and {', '.join(extras)})" if extras else ""
        return (
            f"{done} {self.count} fact{'s' if self.count != 1 else ''} matching "
            f"{self.query!r} in {len(self.paths)} file{'s' if len(self.paths) != 1 else ''}"
            f"{extra}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "dry_run": self.dry_run,
            "replacement": self.replacement,
            "count": self.count,
            "removals": [r.to_dict() for r in self.removals],
            "tombstoned": self.tombstoned,
            "index_scrubbed": self.index_scrubbed,
            "warnings": list(self.warnings),
        }


class _Query:
    """A query as a predicate over a fact's text."""

    def __init__(self, query: str, what: str) -> None:
        if not isinstance(query, str) or not query.strip():
            raise ForgetError(
                f"{what} needs a query naming the fact, got {query!r}",
                hint="pass the fact's text or a few of its words, e.g. 'dog Rex'",
            )
        self.text = query
        self.words = mf.query_words(query)
        if not self.words:
            raise ForgetError(
                f"{what}: the query {query!r} holds no word to match",
                hint="pass the fact's text or a few of its words, e.g. 'dog Rex'",
            )
        self.exact = _flat(query)

    def __call__(self, text: str) -> bool:
        return self.words <= mf.query_words(text) or self.exact in _flat(text)


def _flat(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass
class _Plan:
    """The removals found in one file."""

    path: str
    kind: Kind
    removals: list[Removal]


class MemoryEraser:
    """Forget and edit (see the module doc); one per harness."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.workspace = kernel.workspace
        # Forgets and edits under way: closing the harness waits for them (a pool's
        # eviction included), so none stops between its files and the index.
        self._running = 0
        self._draining = False
        self._idle = threading.Condition()
        kernel.on_close(self._drain)

    # public ----------------------------------------------------------------------------------

    def forget(
        self,
        query: str,
        *,
        dry_run: bool = False,
        sessions: bool = False,
        limit: int = DEFAULT_LIMIT,
    ) -> ForgetResult:
        """Remove every fact matching ``query`` from the workspace and the index.

        ``sessions`` redacts the session logs too (the raw conversations); ``dry_run``
        lists what would be removed and changes nothing. Raises ForgetError when
        nothing matches or more than ``limit`` facts do (nothing is changed then).
        """
        matcher = _Query(query, "forget")
        return self._run(matcher, None, dry_run=dry_run, sessions=sessions, limit=limit)

    def edit(
        self, old: str, new: str, *, dry_run: bool = False, limit: int = DEFAULT_LIMIT
    ) -> ForgetResult:
        """Replace every fact matching ``old`` in MEMORY.md and the daily logs with ``new``.

        The old words are tombstoned, so a flush or consolidation does not bring the old
        text back; hence ``new`` may not hold every word of ``old`` (the tombstone would
        cover it too): name the old fact by a word the new text drops.
        """
        matcher = _Query(old, "edit")
        if not isinstance(new, str) or not new.strip():
            raise ForgetError(
                f"edit needs the new text of the fact, got {new!r}",
                hint="to remove the fact instead, use forget",
            )
        if matcher(new):
            raise ForgetError(
                f"edit: the new text {new!r} holds every word of {old!r}",
                hint="the old text is tombstoned, which would keep the new one out of memory "
                "as well: name the old fact by a word the new text does not have",
            )
        replacement = " ".join(self.kernel.hooks.transform_memory_text(new, "save").split())
        return self._run(matcher, replacement, dry_run=dry_run, sessions=False, limit=limit)

    def retract(self, path: str, covered: Callable[[str], bool]) -> bool:
        """Take the facts ``covered`` (by a tombstone) out of the daily log at ``path``,
        under the forget's leases, the consolidation watermark moved with the bytes as a
        forget moves it; whether the log changed. A flush calls it when a tombstone
        written while it was appending covers what it wrote."""
        self.kernel.check_open()
        with self._leases():
            return self._rewrite_log(path, covered, None)

    def scrub(self, warnings: list[str]) -> bool:
        """Have the index overwrite the bytes of removed rows; whether it did. A failure is
        logged and added to ``warnings``, not raised: the files are already rewritten."""
        try:
            return self.kernel.scrub_index()
        except Exception as exc:
            logger.warning("scrubbing the index failed: %s: %s", type(exc).__name__, exc)
            warnings.append(f"index scrub failed: {type(exc).__name__}: {exc}")
            return False

    # the run ---------------------------------------------------------------------------------

    def _run(
        self,
        query: _Query,
        replacement: str | None,
        *,
        dry_run: bool,
        sessions: bool,
        limit: int,
    ) -> ForgetResult:
        self.kernel.check_open()
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if dry_run:
            plans = self._plan(query, replacement, sessions)
            self._check(query, plans, limit)
            return ForgetResult(query.text, True, _removals(plans), replacement)
        # A forget's query names what is to be forgotten: it never goes into a span.
        op, operation = (
            ("forget", names.DELETE_MEMORY)
            if replacement is None
            else ("edit", names.UPDATE_MEMORY)
        )
        with self._under_way(), self.kernel.change(op, operation) as change:
            result = self._change(query, replacement, sessions=sessions, limit=limit)
            change.count("replaced" if replacement is not None else "removed", result.count)
            change.span.records(result.count, [replacement] if replacement is not None else ())
        return result

    @contextmanager
    def _under_way(self) -> Iterator[None]:
        with self._idle:
            if self._draining:
                raise HarnessMemError(
                    f"the harness for {self.workspace.url} is closing; nothing was changed",
                    hint="run it again on a harness opened anew (a pool reopens the tenant)",
                )
            self._running += 1
        try:
            yield
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def _drain(self, seconds: float) -> None:
        """Wait (up to ``seconds``) for the forgets and edits under way to finish."""
        with self._idle:
            self._draining = True  # no new one starts
            if not self._idle.wait_for(lambda: self._running == 0, timeout=seconds):
                logger.warning(
                    "a forget on %s was still running after %gs; closing anyway",
                    self.workspace.url,
                    seconds,
                )

    def _change(
        self, query: _Query, replacement: str | None, *, sessions: bool, limit: int
    ) -> ForgetResult:
        with self._leases():
            plans = self._plan(query, replacement, sessions)
            self._check(query, plans, limit)
            add_tombstone(self.workspace, query.words)
            # Flushes append without a lease. One that read the tombstones before this one
            # was written and appended since to a file planned clean is found by a second
            # look at what flushes write, now that the tombstone is on file; one that
            # appends later reads the tombstones again after its write and takes the fact
            # back out itself (MemoryFlusher), so no order of the two leaves it behind.
            planned = {plan.path for plan in plans}
            plans += [
                plan
                for plan in self._plan(query, replacement, sessions, kinds=_FLUSHED)
                if plan.path not in planned
            ]
            warnings: list[str] = []
            done = [plan for plan in plans if self._apply(plan, query, replacement)]
        changed = [p.path for p in done if layout.source_of(p.path, include_archive=True)]
        if changed:
            problem = mf.reindex_paths(self.kernel, changed)
            if problem:
                warnings.append(problem)
        scrubbed = False
        if replacement is None:
            scrubbed = self.scrub(warnings)
            if not scrubbed and not warnings:
                warnings.append(
                    "the index backend cannot scrub removed bytes: its rows are gone, "
                    "its storage may still hold the text until it is reused"
                )
        return ForgetResult(
            query.text,
            False,
            _removals(done),
            replacement,
            tombstoned=True,
            index_scrubbed=scrubbed,
            warnings=tuple(warnings),
        )

    @contextmanager
    def _leases(self) -> Iterator[None]:
        settings = self.kernel.settings
        with ExitStack() as stack:
            # The order maintenance takes them in: maintenance, then consolidation.
            for name, ttl in (
                (layout.MAINTENANCE_LEASE, settings.maintenance.lease_ttl),
                (layout.CONSOLIDATION_LEASE, settings.consolidation.lease_ttl),
            ):
                stack.enter_context(self.workspace.lock(name, ttl=ttl, timeout=ttl))
            yield

    def _check(self, query: _Query, plans: list[_Plan], limit: int) -> None:
        removals = _removals(plans)
        counted = [r for r in removals if r.kind in _COUNTED]
        if not removals:
            raise ForgetError(
                f"nothing in {self.workspace.url} matches {query.text!r}; nothing was changed",
                hint="a fact matches when it holds every word of the query; "
                "try fewer words, or search first (harnessmem search)",
            )
        if len(counted) > limit:
            examples = "; ".join(f"{r.path}:{r.line} {r.preview!r}" for r in counted[:_EXAMPLES])
            raise ForgetError(
                f"{len(counted)} facts match {query.text!r}, more than the limit of {limit}; "
                f"nothing was changed (e.g. {examples})",
                hint="name the fact more precisely (more of its words), or raise the limit "
                "(limit=..., --limit) if every one of them is to go",
            )

    # finding ---------------------------------------------------------------------------------

    def _plan(
        self,
        query: _Query,
        replacement: str | None,
        sessions: bool,
        *,
        kinds: frozenset[Kind] | None = None,
    ) -> list[_Plan]:
        """The removals in each file that holds the fact (of ``kinds``, else of all)."""
        plans: list[_Plan] = []
        edit = replacement is not None
        for path, kind in self._candidates(sessions and not edit, edit, kinds):
            try:
                text = self.workspace.read_text(path)
            except FileNotFoundError:
                continue
            found = self._find(path, kind, text, query)
            if found:
                plans.append(_Plan(path, kind, found))
        return plans

    def _candidates(
        self, sessions: bool, edit: bool, kinds: frozenset[Kind] | None = None
    ) -> Iterator[tuple[str, Kind]]:
        """The files that may hold a fact, with their kind: of ``kinds`` only when given (a
        kind not wanted costs no listing), else of every kind."""

        def wanted(kind: Kind) -> bool:
            return kinds is None or kind in kinds

        workspace = self.workspace
        if wanted("memory"):
            yield layout.MEMORY_FILE, "memory"
        if wanted("daily"):
            for path in workspace.list(layout.MEMORY_DIR, recursive=False):
                if layout.daily_log_date(path) is not None:
                    yield path, "daily"
        if wanted("archive"):
            for path in workspace.list(layout.ARCHIVE_DIR, recursive=False):
                if layout.daily_log_date(path, archived=True) is not None:
                    yield path, "archive"
        if edit:
            return  # an edit corrects memory; the record of what was said stays
        if wanted("history"):
            for path in workspace.list(layout.HISTORY_DIR):
                yield path, "history"
        if wanted("state"):
            for path in workspace.list(layout.FLUSH_STATE_DIR, recursive=False):
                yield path, "state"
        if wanted("evicted"):
            for path in workspace.list(self.kernel.settings.eviction.path.strip("/")):
                yield path, "evicted"
        if sessions and wanted("session"):
            for path in workspace.list(layout.SESSIONS_DIR, recursive=False):
                if path.endswith(layout.SESSION_LOG_SUFFIX):
                    yield path, "session"

    def _find(self, path: str, kind: Kind, text: str, query: _Query) -> list[Removal]:
        if kind == "session":
            return [
                Removal(path, line, said, kind)
                for line, said in self._transcript(path).redact(query, MARKER, dry_run=True)
            ]
        if kind == "evicted":
            return [
                Removal(path, n, line, kind)
                for n, line in enumerate(text.splitlines(), 1)
                if query(line) and line.strip() != MARKER
            ]
        if kind == "state":
            return [Removal(path, 1, entry, kind)] if (entry := _pending(text, query)) else []
        found = mf.rewrite_units(text, query)[1]
        return [Removal(path, line, unit, kind) for line, unit in found]

    def _transcript(self, path: str) -> SessionTranscript:
        # The stem is a safe id already, which names the same log, mark and lease again.
        return SessionTranscript(
            self.workspace, layout.session_stem(path) or "", clock=self.kernel.clock
        )

    # changing --------------------------------------------------------------------------------

    def _apply(self, plan: _Plan, query: _Query, replacement: str | None) -> bool:
        """Rewrite one file; whether it changed (it may have lost the fact meanwhile)."""
        workspace, path, kind = self.workspace, plan.path, plan.kind
        if kind == "memory":
            return self._rewrite_memory(query, replacement)
        if kind in ("daily", "archive"):
            return self._rewrite_log(path, query, replacement)
        if kind == "session":
            return bool(self._transcript(path).redact(query, MARKER))
        if kind == "state":
            return self._resolve_pending(path, query)

        def change(current: str) -> str | None:
            if kind == "evicted":
                lines = current.splitlines(keepends=True)
                new = [
                    (MARKER + ("\n" if line.endswith("\n") else "")) if query(line) else line
                    for line in lines
                ]
                return "".join(new) if new != lines else None
            text, found = mf.rewrite_units(current, query)
            return text if found else None

        return workspace.update_text(path, change) is not None

    def _rewrite_memory(self, query: _Query, replacement: str | None) -> bool:
        def change(current: str) -> str | None:
            text, found = mf.rewrite_units(current, query, replacement)
            return text if found else None

        def previous(text: str) -> str:
            # An edit keeps the version it replaced, as consolidation does; a forget keeps
            # where the fact was, not the fact.
            if replacement is not None:
                return text
            return mf.rewrite_units(text, query, MARKER)[0]

        consolidator = self.kernel.consolidator
        written, _ = consolidator.rewrite_memory(change, previous=previous)
        return written is not None

    def _rewrite_log(
        self, path: str, query: Callable[[str], bool], replacement: str | None
    ) -> bool:
        """Rewrite a daily log, and move the consolidation watermark with it: the bytes it
        had consumed are counted again in the new text, so consolidation does not take
        the whole log for new."""
        watermark = Watermark.parse(_read(self, layout.CONSOLIDATION_STATE), where="forget")
        name = path.rsplit("/", 1)[-1]
        record = watermark.files.get(name) or {}
        done = int(record.get("bytes") or 0)
        moved: dict[str, Any] = {}

        def change(current: str) -> str | None:
            moved.clear()
            data = current.encode("utf-8", "surrogatepass")
            if done and len(data) >= done and same_content(data[:done], record.get("hash")):
                head = data[:done].decode("utf-8", "replace")
                rest = data[done:].decode("utf-8", "replace")
                new_head, found_head = mf.rewrite_units(head, query, replacement)
                new_rest, found_rest = mf.rewrite_units(rest, query, replacement)
                if not (found_head or found_rest):
                    return None
                head_bytes = new_head.encode("utf-8")
                moved.update(bytes=len(head_bytes), hash=content_hash(head_bytes))
                return new_head + new_rest
            text, found = mf.rewrite_units(current, query, replacement)
            return text if found else None

        if self.workspace.update_text(path, change) is None:
            return False
        if moved:
            watermark = Watermark.parse(_read(self, layout.CONSOLIDATION_STATE), where="forget")
            watermark.files[name] = dict(moved)
            self.workspace.write_text(
                layout.CONSOLIDATION_STATE, watermark.dumps(self.kernel.clock())
            )
        return True

    def _resolve_pending(self, path: str, query: _Query) -> bool:
        """A flush state whose pending entry holds the fact: settle it as the next flush
        would (adopt its mark when the entry reached the log, else drop it)."""
        import json

        def change(current: str) -> str | None:
            if not _pending(current, query):
                return None
            data = json.loads(current)
            pending = data.pop("pending")
            log = str(pending.get("path") or "")
            try:
                landed = bool(log) and pending["entry"] in self.workspace.read_text(log)
            except FileNotFoundError:
                landed = False
            if landed and pending.get("mark") is not None:
                data["mark"] = pending["mark"]
            return json.dumps(data, ensure_ascii=False)

        return self.workspace.update_text(path, change) is not None


def _pending(text: str, query: _Query) -> str:
    """The pending entry of a flush state, when it holds a matching fact ("" if not)."""
    import json

    try:
        entry = json.loads(text)["pending"]["entry"]
    except (ValueError, KeyError, TypeError):
        return ""
    if not isinstance(entry, str) or not mf.rewrite_units(entry, query)[1]:
        return ""
    return entry


def _read(eraser: MemoryEraser, path: str) -> str:
    try:
        return eraser.workspace.read_text(path)
    except FileNotFoundError:
        return ""


def _removals(plans: list[_Plan]) -> tuple[Removal, ...]:
    return tuple(r for plan in plans for r in plan.removals)
