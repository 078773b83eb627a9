"""Consolidation: the daily logs are curated into MEMORY.md; ``memory_save`` appends to it.

:class:`MemoryConsolidator` owns every write of MEMORY.md, each a compare-and-swap
(``Workspace.update_text``: a conditional PUT on S3, a file lock locally), so a write that
another one overtook is redone on the newer text and neither is lost:
:meth:`~MemoryConsolidator.save` appends a dated entry (the agent's ``memory_save``),
:meth:`~MemoryConsolidator.consolidate` rewrites the file.

A consolidation run:

1. takes the ``consolidation`` lease (another run in progress: ``busy``);
2. reads the watermark ``memory/.consolidation_state`` (JSON: for each daily log, how many
   bytes were consolidated and their hash; the seed's bare ISO timestamp is read too) and
   collects the log text past it, oldest first, at most ``consolidation.max_input_tokens``
   (cut at entry boundaries; the rest waits for the next run);
3. asks the ``consolidation`` model for the complete new MEMORY.md within
   ``consolidation.max_memory_tokens`` (told as tokens and as characters);
4. rejects an answer that is empty, more than 10% over budget, or that drops more than
   ``consolidation.max_entry_loss`` of the prior entries while the prior file was within
   budget: MEMORY.md and the watermark stay as they were;
5. copies the previous version to ``memory/.history/``, then replaces MEMORY.md in one
   compare-and-swap that keeps what ``memory_save`` appended while the model ran (an
   append that lands in between makes it start again from the newer file), and only then
   advances the watermark.

The watermark is written twice around the replace ("pending", then committed), so that
after a crash at any point it agrees with the MEMORY.md on disk. It also records the
versions in ``memory/.history/``; the pending write, which names the new one, comes before
the copy, so a run that stops in between leaves ``pending`` behind and the next run lists
the folder again. MEMORY.md is read once per run: the read that resolves a pending
watermark is the version the run rewrites.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.encoding import content_hash, storable, wide_codec
from harnessmem.errors import ModelError
from harnessmem.events import MemoryConsolidatedEvent
from harnessmem.memory import files as mf
from harnessmem.memory._answer_check import entry_loss, restore_dates, unreplaced, unwrap
from harnessmem.memory._consolidation_result import ConsolidationResult, SaveResult
from harnessmem.memory._history import keep_version, plan_history
from harnessmem.memory._tombstones import read_tombstones
from harnessmem.memory._watermark import Segment, Watermark, same_content
from harnessmem.models.backoff import Backoff
from harnessmem.prompts import consolidation_request
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion
    from harnessmem.kernel import Kernel
    from harnessmem.workspace import FileInfo, Lease, Snapshot

__all__ = ["ConsolidationResult", "MemoryConsolidator", "SaveResult"]

logger = logging.getLogger("harnessmem.memory.consolidation")

#: Answers may exceed the budget by this share (models count tokens loosely).
OVER_BUDGET_SLACK = 0.10


class MemoryConsolidator:
    """Owner of MEMORY.md writes (see the module doc); one per harness."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.workspace = kernel.workspace
        self.backoff = Backoff(kernel.settings.consolidation.backoff_max)

    def tokens(self, text: str) -> int:
        """MEMORY.md's tokens as status and the inspector count them."""
        from harnessmem.tokens import memory_tokens

        return memory_tokens(text)

    # memory_save -----------------------------------------------------------------------------

    def save(self, text: str) -> SaveResult:
        """Append ``text`` (facts, ideally a bullet list) to MEMORY.md as a dated entry.

        Every bullet and every line of prose is kept, one entry each (see
        :func:`~harnessmem.memory.files.saved_facts`); headings are left out and listed in
        ``left_out``. Redacted like a flush; facts MEMORY.md already holds are skipped.
        Raises ValueError for blank text, WorkspaceError when the store fails.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("memory_save needs non-empty text (a fact, or a bullet list of facts)")
        with self.kernel.change("save", names.CREATE_MEMORY) as change:
            result = self._save(text)
            change.count("facts", len(result.entries))
            change.span.records(len(result.entries), result.entries)
        return result

    def _save(self, text: str) -> SaveResult:
        kernel = self.kernel
        facts, left_out = mf.saved_facts(text)
        if not facts:
            return SaveResult(layout.MEMORY_FILE, (), left_out=tuple(left_out))
        body = kernel.hooks.transform_memory_text(mf.bullet_block(facts), "save")
        facts = list(dict.fromkeys(mf.saved_facts(body)[0]))
        now = kernel.clock()
        fresh: list[str] = []

        def add_entry(current: str) -> str | None:
            # Dedup against MEMORY.md as it is when written (run again if it changed).
            nonlocal fresh
            fresh = mf.new_facts(facts, current)
            if not fresh:
                return None
            if mf.saved_today(current, now):
                # One heading a day: the day's saves go on under the one already there.
                gap = "" if current.endswith("\n") else "\n"
                return current + gap + mf.bullet_block(fresh) + "\n"
            return current + mf.entry_text(current, f"{mf.SAVE_HEADING}{mf.iso_utc(now)}", fresh)

        written = self.workspace.update_text(layout.MEMORY_FILE, add_entry, append=True)
        if written is None:
            return SaveResult(
                layout.MEMORY_FILE, (), duplicates=len(facts), left_out=tuple(left_out)
            )
        after = written.text
        warnings = []
        problem = mf.reindex_paths(kernel, [layout.MEMORY_FILE])
        if problem:
            warnings.append(problem)
        if self.tokens(after) > kernel.settings.consolidation.max_memory_tokens:
            mf.request_consolidation(kernel, "memory_save grew MEMORY.md past its budget")
        return SaveResult(
            layout.MEMORY_FILE,
            tuple(fresh),
            duplicates=len(facts) - len(fresh),
            warnings=tuple(warnings),
            left_out=tuple(left_out),
        )

    # forget and edit -------------------------------------------------------------------------

    def rewrite_memory(
        self, change: Callable[[str], str | None], *, previous: Callable[[str], str]
    ) -> tuple[Snapshot | None, str | None]:
        """Replace MEMORY.md with ``change(its text)`` outside a consolidation run (the
        guarded rewrite ``forget`` and ``edit`` make); the caller holds the
        ``consolidation`` lease. Returns the snapshot written (None when ``change``
        returned None) and the history version kept.

        As a consolidation does, it keeps the version it replaces in memory/.history/,
        as ``previous(that text)`` (``forget`` passes one with the forgotten facts
        marked, not kept), and the watermark follows: its MEMORY.md hash and history.
        The replace is a compare-and-swap, so a ``memory_save`` append racing it is kept.
        """
        watermark, snapshot = self._settled()
        if change(snapshot.text) is None:
            return None, None
        history, dropped = plan_history(self.kernel, watermark, snapshot.text)
        # Named in the watermark before it exists, as consolidation does (see the module doc).
        self._write_watermark(watermark)
        if history is not None:
            keep_version(self.workspace, history, previous(snapshot.text))
            for old in dropped:
                self.workspace.delete(old)
        written = self.workspace.update_text(layout.MEMORY_FILE, change, current=snapshot)
        if written is not None:
            text = written.text
            watermark.memory_hash = content_hash(text.encode()) if text.strip() else None
        self._write_watermark(watermark)
        return written, history

    # consolidation ---------------------------------------------------------------------------

    def consolidate(self, *, backoff: bool = False) -> ConsolidationResult:
        """One consolidation run (see the module doc).

        Raises the model's ``ModelError`` (after firing ``on_memory_consolidated`` with
        status ``failed``) and ``WorkspaceError``; MEMORY.md and the watermark are then
        as they were. A model that failed or was rejected is backed off: with ``backoff``
        (maintenance passes it) the next 1, 2, 4 ... runs, up to
        ``consolidation.backoff_max``, return ``deferred`` without asking it.
        """
        settings = self.kernel.settings.consolidation
        if not settings.enabled:
            self._outcome("disabled")
            return ConsolidationResult("disabled", reason="consolidation.enabled is false")
        if backoff and not self.backoff.ready():
            state = self.backoff.state
            self._outcome("deferred")
            return ConsolidationResult(
                "deferred",
                reason=(
                    f"the consolidation model is backed off after {state.failures} failure(s) "
                    f"in a row (last: {state.last_error})"
                ),
            )
        if self.workspace.listing_active:
            # A maintenance tick: its listing shows most often that nothing is new, which
            # then costs neither the lease nor a second look.
            idle = self._nothing_new(settings.max_memory_tokens)
            if idle is not None:
                return ConsolidationResult("nothing_new", tokens_before=idle)
        lease = self.workspace.try_lock(layout.CONSOLIDATION_LEASE, ttl=settings.lease_ttl)
        if lease is None:
            self._outcome("busy")
            return ConsolidationResult("busy", reason="another consolidation is running")
        with lease, self.kernel.change("consolidate", names.UPDATE_MEMORY) as change:
            try:
                result = self._run(lease)
            except ModelError as exc:
                self.backoff.failed(f"{type(exc).__name__}: {exc}")
                self._outcome("failed")
                raise
            except Exception:
                self._outcome("failed")
                raise
            change.count("entries_before", result.entries_before)
            change.count("entries_lost", result.entries_lost)
            change.count("tokens_after", result.tokens_after)
            change.span.set_attributes(
                {
                    names.STATUS: result.status,
                    "harnessmem.consolidation.entries_before": result.entries_before,
                    "harnessmem.consolidation.entries_lost": result.entries_lost,
                    "harnessmem.consolidation.tokens_before": result.tokens_before,
                    "harnessmem.consolidation.tokens_after": result.tokens_after,
                }
            )
        self._outcome(result.status)
        if result.status == "rejected":
            self.backoff.failed(result.reason)
            self.kernel.model_for("consolidation").rejected("consolidation", result.reason)
        elif result.accepted:
            self.backoff.succeeded()
        if result.status not in ("nothing_new", "busy", "disabled"):
            self._emit(result)
        return result

    def _outcome(self, status: str) -> None:
        self.kernel.telemetry.count(names.CONSOLIDATIONS, 1, {names.OUTCOME: status})

    def _run(self, lease: Lease) -> ConsolidationResult:
        kernel = self.kernel
        settings = kernel.settings.consolidation
        budget = settings.max_memory_tokens
        watermark, snapshot = self._settled()
        prior = snapshot.text
        if watermark.memory_hash and watermark.files and not prior.strip():
            # MEMORY.md was lost or emptied while the watermark survived: without a reset
            # everything consolidated before would silently vanish from the curated view.
            logger.warning(
                "MEMORY.md is missing or empty but the watermark says it was consolidated; "
                "consolidating every daily log again (previous versions: %s/)",
                layout.HISTORY_DIR,
            )
            watermark = Watermark(input_limit=watermark.input_limit, history=watermark.history)
        segments, pending = self._collect(watermark)
        if any(s.text.strip() for s in segments):
            # What was forgotten does not come back from an older daily log (see forget).
            tombstones = read_tombstones(self.workspace)
            segments = [replace(s, text=tombstones.scrub(s.text)) for s in segments]
        tokens_before = self.tokens(prior)
        text_segments = [s for s in segments if s.text.strip()]
        if not text_segments and tokens_before <= budget:
            if segments:  # only whitespace was appended: move past it without a model call
                self._commit_watermark(watermark, segments, prior)
            return ConsolidationResult("nothing_new", tokens_before=tokens_before)
        files = tuple(s.path for s in text_segments)
        base = ConsolidationResult(
            "rejected", files=files, tokens_before=tokens_before, pending=pending
        )
        completion = self._ask(prior, tokens_before, text_segments)
        base = replace(
            base,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        candidate = unwrap(completion.text)
        if not candidate.strip():
            return replace(base, reason="empty answer")
        if mf.is_no_reply(candidate):
            self._commit_watermark(watermark, segments, prior)
            return replace(base, status="unchanged", tokens_after=tokens_before)
        candidate = kernel.hooks.transform_memory_text(candidate, "consolidation")
        limit = int(budget * (1 + OVER_BUDGET_SLACK))
        candidate, tokens_after = self._with_dates(candidate, prior, text_segments, limit)
        base = replace(base, tokens_after=tokens_after)
        if tokens_after > limit:
            return replace(
                base,
                reason=f"over budget: {tokens_after} tokens > {budget} + 10% ({limit})",
            )
        considered, lost = entry_loss(prior, candidate)
        # A fact a newer entry replaces is retired, not lost (it stays in the daily logs
        # and .history); any other dropped fact still counts.
        lost = unreplaced(lost, text_segments)
        base = replace(base, entries_before=considered, entries_lost=len(lost))
        if (
            considered
            and tokens_before <= budget
            and len(lost) / considered > settings.max_entry_loss
        ):
            # Smaller batches next time: a model may have dropped old facts to make room
            # for too many new ones at once.
            watermark.input_limit = max(
                1, (watermark.input_limit or settings.max_input_tokens) // 2
            )
            self._write_watermark(watermark)
            return replace(
                base,
                reason=(
                    f"lossy: drops {len(lost)} of {considered} prior entries "
                    f"(> {settings.max_entry_loss:.0%}), e.g. {lost[0]!r}"
                ),
            )
        if lease.expires - self.kernel.clock() < lease.ttl / 2:
            # A slow model ate half the lease: extend it before writing (this fails loudly
            # if the run outlived its lease and another process took over).
            lease.renew()
        return self._replace_memory(base, watermark, segments, snapshot, candidate)

    def _replace_memory(
        self,
        base: ConsolidationResult,
        watermark: Watermark,
        segments: list[Segment],
        snapshot: Snapshot,
        candidate: str,
    ) -> ConsolidationResult:
        workspace = self.workspace
        prior = snapshot.text
        history, dropped = plan_history(self.kernel, watermark, prior)
        head = candidate.strip("\n") + "\n"
        # Pending names the new text without the appends it keeps: memory_save may append
        # between this write and the replace, and MEMORY.md starting with ``head`` is what
        # says the replace landed (see Watermark.resolve).
        watermark.pending = {
            "memory_bytes": len(head.encode()),
            "memory_hash": content_hash(head.encode()),
            "files": self._advanced_files(watermark, segments),
        }
        # Written before the history file, which it names: a run that stops after this
        # leaves ``pending`` behind, and the next run lists memory/.history/ again.
        self._write_watermark(watermark)
        if history is not None:
            if snapshot.original is not None:
                # Not clean UTF-8 (an edit in another editor): keep the bytes themselves.
                workspace.write_bytes(history, snapshot.original)
            else:
                keep_version(self.workspace, history, prior)
            for old in dropped:
                workspace.delete(old)
        appended = ""

        def rewrite(current: str) -> str | None:
            # memory_save appends while the model ran: keep them, after the new text.
            nonlocal appended
            if not current.startswith(prior):
                return None
            appended = current[len(prior) :]
            if not appended.strip():
                return head
            if not appended.lstrip().startswith("#"):
                # Saves that went on under the day's heading of the old text: that heading
                # comes with them (the new text may not hold it).
                appended = f"\n{mf.last_heading(prior)}\n{appended.lstrip(chr(10))}"
            return head + (appended if appended.startswith("\n") else "\n" + appended)

        # From the version read before the model ran: if nobody wrote since, one PUT.
        written = workspace.update_text(layout.MEMORY_FILE, rewrite, current=snapshot)
        if written is None:
            # Rewritten by hand meanwhile; the pending state is dropped at the next load.
            return replace(
                base, reason="MEMORY.md was rewritten by another writer while the model ran"
            )
        new_text = written.text
        self._commit_watermark(watermark, segments, new_text)
        problem = mf.reindex_paths(self.kernel, [layout.MEMORY_FILE])
        if problem:
            logger.warning("consolidation: %s", problem)
        return replace(
            base,
            status="consolidated",
            reason="",
            tokens_after=self.tokens(new_text) if appended.strip() else base.tokens_after,
            preserved_appends=appended.count(mf.SAVE_HEADING),
            history_path=history,
        )

    def _settled(self) -> tuple[Watermark, Snapshot]:
        """The watermark and MEMORY.md, each read once, a pending state settled."""
        watermark = Watermark.parse(
            self._read(layout.CONSOLIDATION_STATE), where=layout.CONSOLIDATION_STATE
        )
        snapshot = self.workspace.read_snapshot(layout.MEMORY_FILE)
        if watermark.pending is not None:
            # The last run wrote its new state as pending just before replacing MEMORY.md;
            # the file decides whether the new version made it (a crash may have come in
            # between, also between its writes of memory/.history/: list that again).
            watermark.resolve(snapshot.text.encode())
            watermark.history = None
            self._write_watermark(watermark)
        return watermark, snapshot

    def _nothing_new(self, budget: int) -> int | None:
        """MEMORY.md's tokens when a run would find nothing to do (every daily log as long
        as the watermark says it was consolidated, nothing pending, MEMORY.md within
        budget), else None. Read-only and without the lease: a log written meanwhile is
        the next run's."""
        watermark = Watermark.parse(
            self._read_listed(layout.CONSOLIDATION_STATE), where=layout.CONSOLIDATION_STATE
        )
        if watermark.pending is not None or watermark.legacy_since is not None:
            return None
        for name, found in self._daily_logs()[0].items():
            record = watermark.files.get(name)
            if not record or found.size != int(record.get("bytes") or 0):
                return None
        prior = self._read_listed(layout.MEMORY_FILE)
        if watermark.memory_hash and watermark.files and not prior.strip():
            return None  # MEMORY.md lost: the run starts over (see _run)
        tokens = self.tokens(prior)
        return tokens if tokens <= budget else None

    # inputs ----------------------------------------------------------------------------------

    def _daily_logs(self) -> tuple[dict[str, FileInfo], set[str] | None]:
        """The daily logs by name, live and archived (a live log wins over an archived one),
        with the size and time the listing gives: no HEAD per log; and the folders under
        memory/ that hold files when that listing tells (on S3 it does).

        memory/ is listed first: a log being archived (copied, then deleted) is in it, or
        in the archive by the time the archive is listed. The archive is listed only when
        memory/'s listing shows it holds something (or cannot tell)."""
        live, folders = self.workspace.scan_folders(layout.MEMORY_DIR)
        archived: list[FileInfo] = []
        if folders is None or layout.ARCHIVE_DIR.rpartition("/")[2] in folders:
            archived = self.workspace.scan(layout.ARCHIVE_DIR, recursive=False)
        names: dict[str, FileInfo] = {}
        for found in [*archived, *live]:
            name = found.path.rsplit("/", 1)[-1]
            if layout.is_daily_log(name):
                names[name] = found
        return names, folders

    def _collect(self, watermark: Watermark) -> tuple[list[Segment], bool]:
        """Log text past the watermark, oldest first, bounded; and whether more is left."""
        settings = self.kernel.settings.consolidation
        limit = watermark.input_limit or settings.max_input_tokens
        names, watermark.folders = self._daily_logs()
        watermark.live = set(names)
        segments: list[Segment] = []
        used = 0
        for name in sorted(names):
            info = names[name]
            path = info.path
            record = watermark.files.get(name) or {}
            done = int(record.get("bytes") or 0)
            if record and info.size == done:
                continue  # append-only and unchanged: no need to read it
            since = watermark.legacy_since
            if since is not None and not record and (info.modified or since + 1) <= since:
                # Consolidated by the seed before its timestamp watermark: consumed.
                data = self.workspace.read_bytes(path)
                segments.append(Segment(name, path, "", len(data), len(data), content_hash(data)))
                continue
            data = self.workspace.read_at(path, info.etag_or_hash)
            if not (record and len(data) >= done and same_content(data[:done], record.get("hash"))):
                done = 0  # new, or rewritten since: all of it is new
            # surrogateescape keeps a byte that is not UTF-8 (an edit in another editor) as
            # one character, so that the byte offset of what was taken stays exact; the
            # model sees it as U+FFFD. A UTF-16/32 log (a BOM) is read in its encoding.
            codec, errors, start = "utf-8", "surrogateescape", done
            wide = wide_codec(data)
            if wide is not None:
                codec, errors, start = wide[0], "replace", max(done, wide[1])
            text = data[start:].decode(codec, errors)
            taken = ""
            for entry in mf.split_entries(text):
                cost = self.tokens(entry)
                if used and used + cost > limit:
                    break
                taken += entry
                used += cost
            end = start + len(taken.encode(codec, "surrogateescape"))
            segment = Segment(name, path, storable(taken), done, end, content_hash(data[:end]))
            segments.append(segment)
            if end < len(data):
                return segments, True
        return segments, False

    def _with_dates(
        self, candidate: str, prior: str, segments: list[Segment], limit: int
    ) -> tuple[str, int]:
        """The answer with the days it lost put back (:func:`restore_dates`) and its tokens;
        as the model wrote it when the days alone would take it over ``limit`` (its facts
        are kept current, their days stay in the daily logs)."""
        dated = restore_dates(candidate, prior, segments)
        tokens = self.tokens(dated)
        if tokens > limit and dated != candidate:
            plain = self.tokens(candidate)
            if plain <= limit:
                logger.warning(
                    "consolidation: the days put back would take MEMORY.md over its budget "
                    "(%d > %d tokens); the answer is kept as the model wrote it",
                    tokens,
                    limit,
                )
                return candidate, plain
        return dated, tokens

    def _ask(
        self,
        prior: str,
        tokens_before: int,
        segments: list[Segment],
    ) -> Completion:
        settings = self.kernel.settings.consolidation
        request = consolidation_request(
            prior,
            {s.path: s.text for s in segments},
            max_tokens=settings.max_memory_tokens,
            template=settings.prompt or None,
            memory_tokens=tokens_before,
        )
        model = self.kernel.model_for("consolidation")
        try:
            return model.complete(request, purpose="consolidation")
        except Exception as exc:
            self._emit(
                ConsolidationResult(
                    "rejected",
                    reason=f"model failed: {type(exc).__name__}: {exc}",
                    files=tuple(s.path for s in segments),
                    tokens_before=tokens_before,
                ),
                status="failed",
            )
            raise

    # files -----------------------------------------------------------------------------------

    def _read(self, path: str) -> str:
        try:
            return self.workspace.read_text(path)
        except FileNotFoundError:
            return ""

    def _read_listed(self, path: str) -> str:
        """``path`` as the maintenance tick's listing finds it (see ``read_listed``): for
        the look without the lease, which the run under the lease checks again."""
        try:
            return self.workspace.decode_text(path, self.workspace.read_listed(path))
        except FileNotFoundError:
            return ""

    def _advanced_files(
        self, watermark: Watermark, segments: list[Segment]
    ) -> dict[str, dict[str, Any]]:
        files = dict(watermark.files)
        for segment in segments:
            files[segment.name] = {"bytes": segment.end, "hash": segment.file_hash}
        # Forget logs that no longer exist anywhere, so the watermark stays small.
        live = watermark.live if watermark.live is not None else set(files)
        live |= {s.name for s in segments}
        return {name: rec for name, rec in files.items() if name in live}

    def _commit_watermark(self, watermark: Watermark, segments: list[Segment], memory: str) -> None:
        committed = Watermark(
            files=self._advanced_files(watermark, segments),
            live=watermark.live,
            memory_hash=content_hash(memory.encode()) if memory.strip() else None,
            history=watermark.history,
        )
        self._write_watermark(committed)

    def _write_watermark(self, watermark: Watermark) -> None:
        self.workspace.write_text(layout.CONSOLIDATION_STATE, watermark.dumps(self.kernel.clock()))

    def _emit(self, result: ConsolidationResult, status: str | None = None) -> None:
        self.kernel.hooks.memory_consolidated(
            MemoryConsolidatedEvent(
                accepted=result.accepted,
                files=result.files,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                reason=result.reason,
                status=status or result.status,
                entries_before=result.entries_before,
                entries_lost=result.entries_lost,
                preserved_appends=result.preserved_appends,
                history_path=result.history_path,
                details={"pending": result.pending},
            )
        )
