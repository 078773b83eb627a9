"""Session transcripts: the raw messages compaction takes out of the context.

Before compaction drops messages from a conversation it appends them to
``sessions/<safe session id>.log.jsonl`` (append-only, one JSON object per line)::

    {"seq": 57, "pos": 57, "stream": 1, "ts": "2026-11-30T10:04:05.123456Z",
     "said": "2026-11-30T09:41:12.000000Z", "fp": "9f2c...",
     "message": {"role": "tool", "tool_call_id": "call_7", "content": "..."}}

- ``seq``: the line number in the file (1-based), what ``memory_get`` takes as ``start_line``;
- ``pos``: the message's position in the conversation, 1 = the first message after the
  leading system messages (``null`` for a message whose position is unknown);
- ``stream``: which conversation of the session the line belongs to (1, or higher when a
  caller reused the session id for a different conversation);
- ``ts``: when it was offloaded (UTC), at a compaction, often long after it was said;
- ``said`` (when known): when the message was said (UTC): the harness clock at the turn
  the session first saw it (the compactor notes each new message as it arrives). A
  timestamp the message itself carried stays in ``message`` and is the better answer;
  the index dates a line by that, else by ``said``, else by ``ts``;
- ``fp``: :func:`harnessmem.messages.fingerprint` of the message as it was in the
  conversation (before redaction), so readers can match lines to messages;
- ``message``: the OpenAI message, every key kept, every string value (whatever its key
  and depth, ``reasoning_content`` and dict arguments included) passed through the
  ``transform_memory_text(text, "offload")`` chain (the secret redactor); the structural
  keys (``role``, ``tool_call_id``, ``name``, ``id``, ``type``) are kept as they are
  (:mod:`harnessmem.memory._log_text`).

Every message is written exactly once, in order, across repeated compactions and
processes. What has been written is recorded in a small *offload mark*
(``sessions/<safe id>.offload.json``): the number of conversation positions logged,
a hash chain over their fingerprints, and the size of the log. Positions come from the
compactor, which knows them from the summary message it left at the top of the
conversation ("the first 123 messages were compacted"); a caller that sends its raw
history instead is matched against the hash chain. The mark is written after the lines,
under a workspace lease per session; a crash between the two is repaired on the next
offload from the lines past the recorded size.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from harnessmem import encoding
from harnessmem.encoding import content_hash
from harnessmem.layout import offload_lease, offload_mark_path, session_log_path
from harnessmem.memory._log_text import Transform, message_texts, redact_message
from harnessmem.messages import fingerprint

if TYPE_CHECKING:
    from harnessmem.workspace import Snapshot, Workspace

__all__ = [
    "OffloadMark",
    "OffloadResult",
    "SessionTranscript",
    "TranscriptRecord",
    "transcript_path",
]

logger = logging.getLogger("harnessmem.memory.transcripts")

Message = dict[str, Any]
#: ``(position, message)``; position None when it is not known.
Entry = tuple[int | None, Mapping[str, Any]]

_MARK_VERSION = 1
_LEASE_TTL = 120.0


#: Workspace path of a session's log (the name this module has always exported).
transcript_path = session_log_path


def _chain(previous: str, fp: str) -> str:
    return content_hash(f"{previous}:{fp}".encode())


def _iso(seconds: float) -> str:
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class TranscriptRecord:
    """One line of a session log."""

    seq: int
    pos: int | None
    stream: int
    ts: str
    fp: str
    message: dict[str, Any]
    said: str | None = None


@dataclass(frozen=True)
class OffloadMark:
    """What a session log holds, as recorded in ``sessions/<id>.offload.json``.

    ``logged``: positions ``1..logged`` of the current ``stream`` are in the log.
    ``chain``: hash chain over their fingerprints ("" when a gap made it unverifiable).
    ``lines`` / ``size``: lines and bytes of the log file after the last append.
    ``segments``: ``(first position, its line)`` for each contiguous run of positions,
    to turn a position into a line number.
    """

    lines: int = 0
    size: int = 0
    stream: int = 1
    logged: int = 0
    chain: str = ""
    segments: tuple[tuple[int, int], ...] = ()

    def line_of(self, pos: int) -> int | None:
        """The log line holding position ``pos`` of the current stream, if it is there."""
        if pos < 1 or pos > self.logged:
            return None
        for first_pos, first_line in reversed(self.segments):
            if pos >= first_pos:
                return first_line + pos - first_pos
        return None

    def to_json(self) -> str:
        data = {
            "version": _MARK_VERSION,
            "lines": self.lines,
            "size": self.size,
            "stream": self.stream,
            "logged": self.logged,
            "chain": self.chain,
            "segments": [list(s) for s in self.segments],
        }
        return json.dumps(data, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> OffloadMark:
        data = json.loads(text)
        return cls(
            lines=int(data["lines"]),
            size=int(data["size"]),
            stream=int(data["stream"]),
            logged=int(data["logged"]),
            chain=str(data["chain"]),
            segments=tuple((int(a), int(b)) for a, b in data.get("segments", ())),
        )

    def _advance(self, pos: int | None, fp: str, line: int, size: int) -> OffloadMark:
        """The mark after one more line (position ``pos``) was appended."""
        if pos is None or pos <= self.logged:
            return replace(self, lines=line, size=size)
        contiguous = pos == self.logged + 1
        segments = self.segments if contiguous and self.segments else (*self.segments, (pos, line))
        return replace(
            self,
            lines=line,
            size=size,
            logged=pos,
            chain=_chain(self.chain, fp) if contiguous and (self.chain or self.logged == 0) else "",
            segments=segments,
        )


@dataclass(frozen=True)
class _Log:
    """A session log as read before an append: the snapshot (text and version) and its
    bytes; ``recalled`` when not read but what this object's last append left there
    (nothing vouches for it until the conditional append from it succeeds)."""

    snapshot: Snapshot
    data: bytes
    recalled: bool = False


@dataclass(frozen=True)
class OffloadResult:
    """What one offload did.

    ``lines`` gives, for each entry passed in, the log line that holds it (written now
    or before), or None when that is unknown. ``restarted`` is True when the messages
    did not match what the log holds for this session, so a new stream was begun.
    """

    path: str
    appended: int
    already: int
    first_line: int | None = None
    last_line: int | None = None
    lines: tuple[int | None, ...] = field(default=())
    restarted: bool = False


def _parse_lines(data: bytes, first_seq: int) -> Iterator[TranscriptRecord]:
    """Records from raw log bytes; malformed lines are skipped (and still numbered)."""
    for offset, raw in enumerate(data.splitlines()):
        seq = first_seq + offset
        try:
            item = json.loads(raw)
            yield TranscriptRecord(
                seq=seq,
                pos=item.get("pos"),
                stream=int(item.get("stream", 1)),
                ts=str(item.get("ts", "")),
                fp=str(item.get("fp", "")),
                message=dict(item["message"]),
                said=item["said"] if isinstance(item.get("said"), str) else None,
            )
        except (ValueError, KeyError, TypeError):
            logger.warning("session log line %d is not a transcript record; skipped", seq)


class SessionTranscript:
    """The offload log of one session (``sessions/<safe id>.log.jsonl``) and its mark.

    ``transform`` is the ``transform_memory_text`` chain (the harness passes
    ``harness.hooks.transform_memory_text``); ``clock`` stamps the lines.
    """

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        *,
        clock: Callable[[], float] = time.time,
        transform: Transform | None = None,
        lease_timeout: float = 60.0,
    ) -> None:
        self.workspace = workspace
        self.session_id = session_id
        self.path = transcript_path(session_id)
        self.mark_path = offload_mark_path(session_id)
        self.clock = clock
        self.transform = transform
        self.lease_timeout = lease_timeout
        # The mark this object wrote last and the version of the log it described. While
        # the log still has that version, the stored mark is that one (every offload
        # changes the log and writes the mark after it, and nobody writes a mark without
        # a log that disagrees with it), so the next offload need not read the mark.
        self._known: tuple[OffloadMark, str | None] | None = None

    # reading --------------------------------------------------------------------------------

    def records(self) -> list[TranscriptRecord]:
        """Every record of the log, in order ([] when there is no log)."""
        try:
            data = self.workspace.read_bytes(self.path)
        except FileNotFoundError:
            return []
        return list(_parse_lines(data, 1))

    def mark(self) -> OffloadMark:
        """The offload mark, repaired from the log when a crash left it behind."""
        return self._load_mark()[0]

    def _load_mark(self, *, with_log: bool = False) -> tuple[OffloadMark, bool, bool, _Log | None]:
        """The mark; whether it was repaired (so it must be written back); whether the log
        ends in a partial line (a crash mid-append) that the next append must close; and,
        ``with_log`` on a remote store, the log as read (see :meth:`_read_log`).

        The log is read after the mark, so that a mark behind the log (lines appended
        after it was written) is repaired from the tail, never taken for a shrunk log.
        """
        try:
            mark = OffloadMark.from_json(self.workspace.read_text(self.mark_path))
        except FileNotFoundError:
            mark = OffloadMark()
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "offload mark %s unreadable (%s); rebuilt from the log", self.mark_path, exc
            )
            mark = OffloadMark(size=-1)
        log = self._read_log() if with_log else None
        if log is not None:
            size = len(log.data)  # read anyway for the append: no HEAD
        else:
            try:
                size = self.workspace.info(self.path).size
            except FileNotFoundError:
                size = 0
        if size == mark.size:
            return mark, False, False, log
        return (*self._repaired(mark, log.data if log is not None else None), True, log)

    def _repaired(self, mark: OffloadMark, data: bytes | None = None) -> tuple[OffloadMark, bool]:
        """The mark brought in line with the log file as it is (``data``, when read)."""
        if data is None:
            try:
                data = self.workspace.read_bytes(self.path)
            except FileNotFoundError:
                data = b""
        if 0 <= mark.size <= len(data):
            # Lines appended after the mark was written: a crash between the two.
            start, repaired = mark.size, mark
        elif mark.size < 0:
            start, repaired = 0, OffloadMark()  # unreadable mark: replay the whole log
        else:
            # The log shrank or vanished (pruned): positions already logged stay logged,
            # only the line numbers are recounted.
            start, repaired = 0, replace(mark, lines=0, segments=())
        tail = data[start:]
        for record in _parse_lines(tail, repaired.lines + 1):
            if record.stream > repaired.stream:
                repaired = OffloadMark(lines=repaired.lines, stream=record.stream)
            if record.stream == repaired.stream:
                repaired = repaired._advance(record.pos, record.fp, record.seq, 0)
        lines = (mark.lines if start else 0) + len(tail.splitlines())
        partial = bool(data) and not data.endswith(b"\n")
        return replace(repaired, lines=lines, size=len(data)), partial

    def _read_log(self) -> _Log | None:
        """The log with its version, on a remote store (where an append reads it anyway);
        None locally (appends grow the file in place, the size is a ``stat``) and for a
        log that is not clean UTF-8 (then appended to as bytes, which stay as they are)."""
        if self.workspace.is_local:
            return None
        snapshot = self.workspace.read_snapshot(self.path)
        if snapshot.original is not None:
            return None
        return _Log(snapshot, snapshot.text.encode("utf-8"))

    def _load(self, recall: bool) -> tuple[OffloadMark, bool, bool, _Log | None]:
        """:meth:`_load_mark` for an offload, sparing the mark's read when this object
        wrote the current one (the log is still at the version it described). ``recall``:
        spare the log's read too when this object's last append is that version; the
        append from it then checks that nobody wrote since."""
        known = self._known
        if known is not None and not self.workspace.is_local:
            # Any age: only the append's conditional PUT vouches for it, whenever it was.
            recalled = self.workspace.recall(self.path, max_age=math.inf) if recall else None
            if recalled is not None and recalled.version == known[1]:
                data = recalled.text.encode("utf-8")
                return known[0], False, False, _Log(recalled, data, recalled=True)
            log = self._read_log()
            if log is not None and log.snapshot.version == known[1]:
                return known[0], False, False, log
            # Someone else wrote since: read both again, the mark first.
        return self._load_mark(with_log=True)

    def _stream_fingerprints(self, stream: int, data: bytes | None) -> dict[int, str]:
        records = self.records() if data is None else _parse_lines(data, 1)
        return {r.pos: r.fp for r in records if r.stream == stream and r.pos is not None}

    def _matches(self, mark: OffloadMark, fps: Sequence[str], data: bytes | None) -> bool:
        """Whether conversation positions ``1..len(fps)`` agree with the logged stream
        (``data``: the log, when it was read already)."""
        if mark.logged == 0:
            return True
        if mark.chain and len(fps) >= mark.logged:
            chain = ""
            for fp in fps[: mark.logged]:
                chain = _chain(chain, fp)
            return chain == mark.chain
        # Shorter than what was logged, or a gap: compare line by line.
        logged = self._stream_fingerprints(mark.stream, data)
        return all(logged.get(pos, fp) == fp for pos, fp in enumerate(fps, start=1))

    # writing --------------------------------------------------------------------------------

    def _write(self, mark: OffloadMark, text: str, log: _Log | None) -> bool:
        """Append ``text`` to the log (when any), then write ``mark``; the caller holds the
        lease. With the log as read (remote stores), the append is one conditional PUT
        from that version instead of a read and a PUT. False, with nothing written, when
        the log was recalled and someone else wrote it since, or when there is only a mark
        to write (nothing then checks the recalled log): the offload starts over."""
        if log is not None and log.recalled and not text:
            return False
        self._known = None  # unknown until both writes are through
        version = log.snapshot.version if log is not None else None
        exact = log is not None
        if text and log is not None:
            bases: list[str] = []

            def append(current: str) -> str | None:
                bases.append(current)
                if log.recalled and current != log.snapshot.text:
                    return None  # not the log the mark and ``text`` were made from
                return current + text

            written = self.workspace.update_text(
                self.path, append, current=log.snapshot, append=True
            )
            # Kept for the index otherwise; a session log may be large, and the index
            # picks it up from its listing.
            self.workspace.take_written(self.path)
            if written is None:
                return False
            version = written.version
            # The mark describes the log only if the append landed on the version read.
            exact = len(bases) == 1
        elif text:
            self.workspace.append_text(self.path, text)
        self.workspace.write_text(self.mark_path, mark.to_json())
        if exact:
            self._known = (mark, version)
        return True

    def offload(
        self,
        entries: Sequence[Entry],
        *,
        verify: bool = False,
        said: Sequence[float | None] | None = None,
    ) -> OffloadResult:
        """Append the entries not logged yet; return where each one is.

        ``said`` holds, for each entry, when its message was said (seconds since the
        epoch, None when not known); a written line records it as ``said``.

        ``entries`` are ``(position, message)`` in conversation order. An entry whose
        position is at or below the mark's ``logged`` is already in the log and is
        skipped; one with position None is always written. With ``verify`` the
        positions were counted from the start of a raw history (no summary message told
        them): they are trusted only if the fingerprints match the logged stream,
        otherwise a new stream starts and every entry is written.
        """
        # Named after the files' stem, so that maintenance pruning them takes the same lease.
        with self.workspace.lock(
            offload_lease(self.session_id), ttl=_LEASE_TTL, timeout=self.lease_timeout
        ):
            result = self._offload(entries, verify, said, recall=True)
            if result is None:  # the log recalled was not the one on file: read it
                result = self._offload(entries, verify, said, recall=False)
            assert result is not None
            return result

    def _offload(
        self,
        entries: Sequence[Entry],
        verify: bool,
        said: Sequence[float | None] | None,
        *,
        recall: bool,
    ) -> OffloadResult | None:
        """:meth:`offload` under the lease; None when a recalled log (see :meth:`_load`)
        proved stale or unchecked, before anything was written."""
        mark, dirty, partial, log = self._load(recall)
        fps = [fingerprint(message) for _, message in entries]
        restarted = False
        if verify:
            ordered = [fp for (pos, _), fp in zip(entries, fps, strict=True) if pos is not None]
            if not self._matches(mark, ordered, log.data if log is not None else None):
                mark = OffloadMark(lines=mark.lines, size=mark.size, stream=mark.stream + 1)
                restarted = True
        stamp = _iso(self.clock())
        lines: list[int | None] = []
        chunks: list[str] = ["\n"] if partial else []
        written = 0
        new_mark = mark
        size = mark.size + len("".join(chunks))
        times = said if said is not None else [None] * len(entries)
        for (pos, message), fp, moment in zip(entries, fps, times, strict=True):
            if pos is not None and pos <= mark.logged:
                lines.append(mark.line_of(pos))
                continue
            line = new_mark.lines + 1
            record: dict[str, Any] = {
                "seq": line,
                "pos": pos,
                "stream": new_mark.stream,
                "ts": stamp,
            }
            if moment is not None:
                record["said"] = _iso(moment)
            record["fp"] = fp
            record["message"] = redact_message(message, self.transform)
            # Stored as UTF-8 can hold it (a lone surrogate becomes U+FFFD), so that one
            # odd character never keeps a whole prefix out of the log.
            text = encoding.storable(json.dumps(record, ensure_ascii=False, default=str)) + "\n"
            chunks.append(text)
            size += len(text.encode("utf-8"))
            new_mark = new_mark._advance(pos, fp, line, size)
            lines.append(line)
            written += 1
        if written or restarted or dirty:
            if not self._write(new_mark, "".join(chunks) if written else "", log):
                return None
        elif log is not None and log.recalled:
            return None  # what was logged comes from a mark nothing checked
        return OffloadResult(
            path=self.path,
            appended=written,
            already=len(entries) - written,
            first_line=mark.lines + 1 if written else None,
            last_line=new_mark.lines if written else None,
            lines=tuple(lines),
            restarted=restarted,
        )

    # forgetting -------------------------------------------------------------------------------

    def redact(
        self, chosen: Callable[[str], bool], marker: str, *, dry_run: bool = False
    ) -> list[tuple[int, str]]:
        """Put ``marker`` in place of every text of the messages ``chosen`` accepts (given
        a message's text); the ``(line, text)`` of each. ``forget(..., sessions=True)``.

        Each line keeps its ``seq``, ``pos``, ``stream`` and ``fp`` (the fingerprint of the
        message as it was said), so line numbers stay valid and the next offload still
        skips the messages already logged; the mark's size follows the shorter file, under
        the session's offload lease. Structural keys (role, ids, names) are kept.
        """
        found: list[tuple[int, str]] = []

        def rewrite(current: str) -> str | None:
            found.clear()
            lines = current.splitlines(keepends=True)
            for number, raw in enumerate(lines):
                try:
                    item = json.loads(raw)
                    message = item["message"]
                except (ValueError, KeyError, TypeError):
                    continue
                if not isinstance(message, Mapping):
                    continue
                said = " ".join(t for t in message_texts(message) if t and t != marker)
                if not said or not chosen(said):
                    continue
                found.append((number + 1, said))
                item["message"] = redact_message(message, lambda _text, _source: marker)
                ending = "\n" if raw.endswith("\n") else ""
                lines[number] = json.dumps(item, ensure_ascii=False) + ending
            return "".join(lines) if found and not dry_run else None

        if dry_run:
            with suppress(FileNotFoundError):
                rewrite(self.workspace.read_text(self.path))
            return list(found)
        with self.workspace.lock(
            offload_lease(self.session_id), ttl=_LEASE_TTL, timeout=self.lease_timeout
        ):
            mark = self.mark()  # repaired first: its size must describe the log as it was
            try:
                written = self.workspace.update_text(self.path, rewrite)
            except FileNotFoundError:
                return []
            if written is not None:
                self._known = None
                size = len(written.text.encode("utf-8"))
                self.workspace.write_text(self.mark_path, replace(mark, size=size).to_json())
        return list(found)
