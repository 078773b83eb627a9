"""Moving a workspace: export to one archive, import it elsewhere, import the Java harness's.

**The archive** is a gzipped tar file: every file of the workspace under ``workspace/``
(``MEMORY.md``, the daily logs and their archive, the session logs and their marks, the
evicted tool results, the consolidation watermark, ``MEMORY.md``'s history, maintenance
state and usage records; not ``.locks/`` and not the index, which is derived data), and a
manifest ``harnessmem-export.json`` as the last member::

    {"format": "harnessmem-export", "version": 1, "workspace": "s3://bucket/agents/a",
     "exported_at": "2026-11-30T09:15:02Z",
     "files": [{"path": "MEMORY.md", "size": 1234, "sha256": "9f2c..."}, ...]}

Any tar tool opens it. :func:`export_workspace` reads each file once and writes the
archive beside its destination, renaming it into place when it is complete, so a crash
never leaves a torn archive under the name asked for.

:func:`import_archive` checks the whole archive before it writes anything: the manifest,
every member's path (confined as ``memory_get`` confines paths) and SHA-256, and every file
the workspace already holds at a path the archive brings (the same bytes: skipped;
different bytes: a conflict, and nothing is imported). Each file is then written atomically,
so an import stopped half-way is finished by running it again.

:func:`import_java_workspace` reads a workspace the AgentScope Java harness wrote
(``<root>/MEMORY.md``, ``memory/YYYY-MM-DD.md`` and ``memory/archive/``,
``memory/.consolidation_state``, ``agents/<agent>/sessions/<id>.log.jsonl``,
``large_tool_results/``; with per-user isolation all of it but ``large_tool_results`` under
``<root>/<user>/``). Memory files are taken as they are: harnessmem reads the Java daily
logs' ``## Memory Flush — <instant>`` headings and its watermark's bare ISO instant. Session
logs are converted (:func:`harnessmem.messages.from_java_session_log`) and written through
the session transcript, so each line passes the secret redactor and the exactly-once
bookkeeping holds; importing the same logs again adds nothing. Files that are not memory
(``AGENTS.md``, ``knowledge/``, ``skills/``, ...) are listed in the result and left out.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ArchiveError, PathNotAllowed
from harnessmem.layout import (
    ARCHIVE_DIR,
    CONSOLIDATION_STATE,
    MEMORY_DIR,
    MEMORY_FILE,
    is_daily_log,
    path_problem,
    session_log_path,
)
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.messages import MessageFormatError, from_java_session_log

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness
    from harnessmem.kernel import Kernel
    from harnessmem.workspace import Workspace

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "Archive",
    "ExportResult",
    "ImportResult",
    "JavaWorkspace",
    "export_workspace",
    "import_archive",
    "import_java_workspace",
    "read_archive",
    "read_java_workspace",
]

FORMAT = "harnessmem-export"
VERSION = 1
#: The manifest's name inside the archive; the files are under ``workspace/``.
MANIFEST = "harnessmem-export.json"
_PREFIX = "workspace/"


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_workspace` wrote: the archive, its files and their bytes."""

    path: str
    files: int
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "bytes": self.bytes}


@dataclass
class ImportResult:
    """What an import wrote (``written``), found already there (``unchanged``) and left out.

    ``sessions`` and ``messages`` count the session logs converted from the Java harness's
    and the messages they held (``messages_new`` of them newly written); ``skipped`` lists
    source files that are not memory, ``bad_lines`` the unreadable lines of session logs.
    """

    source: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    sessions: int = 0
    messages: int = 0
    messages_new: int = 0
    skipped: list[str] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "written": list(self.written),
            "unchanged": list(self.unchanged),
            "sessions": self.sessions,
            "messages": self.messages,
            "messages_new": self.messages_new,
            "skipped": list(self.skipped),
            "bad_lines": list(self.bad_lines),
        }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------ export


def export_workspace(
    workspace: Workspace,
    destination: str | os.PathLike[str],
    *,
    clock: Callable[[], float],
    overwrite: bool = False,
) -> ExportResult:
    """Write every file of ``workspace`` into the archive ``destination`` (a local path)."""
    target = Path(destination)
    if target.exists() and not overwrite:
        raise ArchiveError(
            f"{target} already exists; nothing was written",
            hint="choose another file name, or pass --force to replace it",
        )
    if not target.parent.is_dir():
        raise ArchiveError(f"folder {target.parent} does not exist; nothing was written")
    files = sorted(workspace.list(""))
    listed: list[dict[str, Any]] = []
    total = 0
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            for rel in files:
                try:
                    data = workspace.read_bytes(rel)
                except FileNotFoundError:
                    continue  # deleted since the listing (pruned, moved to the archive)
                _add(tar, _PREFIX + rel, data, clock())
                listed.append({"path": rel, "size": len(data), "sha256": _sha256(data)})
                total += len(data)
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "workspace": workspace.url,
                "exported_at": _iso(clock()),
                "files": listed,
            }
            _add(tar, MANIFEST, json.dumps(manifest, indent=1).encode(), clock())
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return ExportResult(str(target), len(listed), total)


def _add(tar: tarfile.TarFile, name: str, data: bytes, moment: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(moment)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


# ------------------------------------------------------------------------------ import


@dataclass(frozen=True)
class Archive:
    """A checked archive: where it came from and workspace path -> bytes."""

    source: str
    files: Mapping[str, bytes]


def read_archive(archive: str | os.PathLike[str]) -> Archive:
    """Read and check an archive :func:`export_workspace` wrote; ArchiveError if amiss."""
    path = Path(archive)
    return Archive(str(path), _read_archive(path))


def _read_archive(path: Path) -> dict[str, bytes]:
    where = str(path)
    if not path.is_file():
        raise ArchiveError(
            f"{where} is not a file", hint="pass the archive harnessmem export wrote"
        )
    try:
        with tarfile.open(path, mode="r:*") as tar:
            members = {m.name: m for m in tar.getmembers()}
            if MANIFEST not in members:
                raise ArchiveError(
                    f"{where} is not a harnessmem export: it has no {MANIFEST}",
                    hint="harnessmem export -w WORKSPACE FILE writes one; a Java harness "
                    "workspace is imported with --from java",
                )
            manifest = _manifest(tar, members[MANIFEST], where)
            contents: dict[str, bytes] = {}
            for entry in manifest:
                rel = entry["path"]
                member = members.get(_PREFIX + rel)
                if member is None or not member.isfile():
                    raise ArchiveError(f"{where}: the manifest lists {rel!r}, the archive lacks it")
                extracted = tar.extractfile(member)
                data = extracted.read() if extracted is not None else b""
                if len(data) != entry["size"] or _sha256(data) != entry["sha256"]:
                    raise ArchiveError(
                        f"{where}: {rel!r} does not match its manifest entry (damaged archive)"
                    )
                contents[rel] = data
            extra = sorted(
                name[len(_PREFIX) :]
                for name in members
                if name.startswith(_PREFIX) and name[len(_PREFIX) :] not in contents
            )
            if extra:
                raise ArchiveError(f"{where}: files outside its manifest: {', '.join(extra[:5])}")
            return contents
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        why = "not a tar file, plain or compressed" if isinstance(exc, tarfile.ReadError) else exc
        raise ArchiveError(f"{where} is not a readable archive: {why}") from None


def _manifest(tar: tarfile.TarFile, member: tarfile.TarInfo, where: str) -> list[dict[str, Any]]:
    extracted = tar.extractfile(member)
    try:
        data = json.loads(extracted.read() if extracted is not None else b"")
    except (ValueError, UnicodeDecodeError):
        raise ArchiveError(f"{where}: {MANIFEST} is not JSON") from None
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ArchiveError(f"{where}: {MANIFEST} is not a harnessmem export manifest")
    if data.get("version") != VERSION:
        raise ArchiveError(
            f"{where}: export format version {data.get('version')!r}; this harnessmem reads "
            f"version {VERSION}",
            hint="import it with the harnessmem version that exported it, or a newer one",
        )
    files = data.get("files")
    ok = isinstance(files, list) and all(
        isinstance(f, Mapping)
        and isinstance(f.get("path"), str)
        and isinstance(f.get("size"), int)
        and isinstance(f.get("sha256"), str)
        for f in files
    )
    if not ok:
        raise ArchiveError(f"{where}: {MANIFEST} has no valid 'files' list")
    assert isinstance(files, list)  # checked above
    for entry in files:
        _, problem = path_problem(entry["path"], normal=True)
        if problem:
            raise ArchiveError(
                f"{where}: path {entry['path']!r} is not allowed in a workspace: {problem}; "
                "nothing was imported"
            )
    return [dict(f) for f in files]


def _plan(
    workspace: Workspace, contents: Mapping[str, bytes], source: str
) -> tuple[list[str], list[str]]:
    """(paths to write, paths already holding the same bytes); ArchiveError on conflicts."""
    write: list[str] = []
    same: list[str] = []
    conflicts: list[str] = []
    for rel, data in contents.items():
        try:
            workspace.resolve(rel)
        except PathNotAllowed as exc:
            raise ArchiveError(f"{source}: {exc.message}; nothing was imported") from None
        try:
            current = workspace.read_bytes(rel)
        except FileNotFoundError:
            write.append(rel)
            continue
        (same if current == data else conflicts).append(rel)
    if conflicts:
        shown = ", ".join(sorted(conflicts)[:5]) + (", ..." if len(conflicts) > 5 else "")
        raise ArchiveError(
            f"workspace {workspace.url} already holds {len(conflicts)} of these files with other "
            f"content ({shown}); nothing was imported",
            hint="import into a new or empty workspace (-w), or move those files away first",
        )
    return write, same


def _write_all(kernel: Kernel, contents: Mapping[str, bytes], write: Sequence[str]) -> None:
    # MEMORY.md and the watermark last: a reader of a half-finished import sees daily logs
    # that are not consolidated yet rather than a watermark claiming logs that are missing.
    last = (CONSOLIDATION_STATE, MEMORY_FILE)
    for rel in sorted(write, key=lambda p: (p in last, last.index(p) if p in last else 0, p)):
        kernel.workspace.write_bytes(rel, contents[rel])


def import_archive(
    harness: MemoryHarness, archive: Archive | str | os.PathLike[str]
) -> ImportResult:
    """Import an archive :func:`export_workspace` wrote into the harness's workspace.

    Pass what :func:`read_archive` returned to check the archive before opening (and so
    creating) the workspace."""
    kernel = harness.kernel
    checked = archive if isinstance(archive, Archive) else read_archive(archive)
    write, same = _plan(kernel.workspace, checked.files, checked.source)
    _write_all(kernel, checked.files, write)
    if write:
        kernel.reindex()
    return ImportResult(checked.source, written=sorted(write), unchanged=sorted(same))


# ------------------------------------------------------------------------------ Java harness


def _java_base(root: Path, user: str | None) -> Path:
    def holds_memory(folder: Path) -> bool:
        return (folder / "MEMORY.md").is_file() or (folder / "memory").is_dir()

    if not root.is_dir():
        raise ArchiveError(
            f"{root} is not a folder", hint="pass the Java harness's workspace folder"
        )
    if user is not None:
        base = root / user
        if user in ("", ".", "..") or "/" in user or not holds_memory(base):
            raise ArchiveError(f"{root} holds no memory of user {user!r}")
        return base
    if holds_memory(root):
        return root
    users = sorted(p.name for p in root.iterdir() if p.is_dir() and holds_memory(p))
    if users:
        raise ArchiveError(
            f"{root} holds the memory of {len(users)} users ({', '.join(users[:8])}); "
            "nothing was imported",
            hint="pass --user NAME to import one of them",
        )
    raise ArchiveError(
        f"{root} holds no Java harness memory (no MEMORY.md, memory/ or user folders)",
        hint="pass the folder the Java harness used as its workspace (by default "
        ".agentscope/workspace)",
    )


def _java_memory_files(base: Path, root: Path, eviction: str) -> tuple[dict[str, bytes], list[str]]:
    contents: dict[str, bytes] = {}
    skipped: list[str] = []
    # The Java harness's names (its layout: agentscope-java-memory.md §10) -> ours.
    memory_file = base / "MEMORY.md"
    if memory_file.is_file():
        contents[MEMORY_FILE] = memory_file.read_bytes()
    folders = ((base / "memory", MEMORY_DIR), (base / "memory" / "archive", ARCHIVE_DIR))
    for folder, ours in folders:
        if folder.is_dir():
            for item in sorted(folder.iterdir()):
                if item.is_file() and is_daily_log(item.name):
                    contents[f"{ours}/{item.name}"] = item.read_bytes()
    state = base / "memory" / ".consolidation_state"
    if state.is_file():
        contents[CONSOLIDATION_STATE] = state.read_bytes()
    results = root / "large_tool_results"
    if results.is_dir():
        for item in sorted(results.rglob("*")):
            if item.is_file():
                contents[f"{eviction}/{item.relative_to(results).as_posix()}"] = item.read_bytes()
    for item in sorted(base.iterdir()):
        if item.name not in ("MEMORY.md", "memory", "agents", "large_tool_results"):
            skipped.append(item.relative_to(root).as_posix() + ("/" if item.is_dir() else ""))
    return contents, skipped


def _java_session_logs(base: Path) -> dict[str, Path]:
    """Session id -> its log; ``<agent>-<id>`` where two agents used one id."""
    found: dict[tuple[str, str], Path] = {}
    for sessions in sorted((base / "agents").glob("*/sessions")):
        agent = sessions.parent.name
        for log in sorted(sessions.glob("*.jsonl")):
            if log.name.endswith(".log.jsonl"):
                found[(agent, log.name.removesuffix(".log.jsonl"))] = log
            else:  # the "context" file; used where the log is missing
                found.setdefault((agent, log.name.removesuffix(".jsonl")), log)
    counts: dict[str, int] = {}
    for _, sid in found:
        counts[sid] = counts.get(sid, 0) + 1
    return {
        (sid if counts[sid] == 1 else f"{agent}-{sid}"): log for (agent, sid), log in found.items()
    }


def _java_records(log: Path, bad: list[str], root: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    text = log.read_bytes().decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            bad.append(f"{log.relative_to(root).as_posix()}:{number}")
            continue
        records.append(record)
    return records


@dataclass(frozen=True)
class JavaWorkspace:
    """What :func:`read_java_workspace` found: memory files, conversations, what is left out."""

    source: str
    files: Mapping[str, bytes]
    conversations: Mapping[str, Sequence[dict[str, Any]]]
    skipped: Sequence[str]
    bad_lines: Sequence[str]


def read_java_workspace(
    root: str | os.PathLike[str],
    *,
    user: str | None = None,
    eviction_path: str = "large_tool_results",
) -> JavaWorkspace:
    """Read the memory of a workspace the Java harness wrote; ArchiveError if there is none.

    ``eviction_path`` is where the evicted tool results go in the harnessmem workspace."""
    top = Path(root)
    base = _java_base(top, user)
    contents, skipped = _java_memory_files(base, top, eviction_path.strip("/"))
    bad: list[str] = []
    conversations: dict[str, Sequence[dict[str, Any]]] = {}
    for sid, log in _java_session_logs(base).items():
        records = _java_records(log, bad, top)
        try:
            conversations[sid] = from_java_session_log(records)
        except MessageFormatError as exc:
            raise ArchiveError(
                f"{log}: {exc.message}; nothing was imported", hint=exc.hint
            ) from None
    return JavaWorkspace(str(top), contents, conversations, skipped, bad)


def import_java_workspace(
    harness: MemoryHarness, root: JavaWorkspace | str | os.PathLike[str], *, user: str | None = None
) -> ImportResult:
    """Import the memory of a workspace the Java harness wrote; see the module doc.

    Pass what :func:`read_java_workspace` returned to check the source before opening (and
    so creating) the workspace."""
    kernel = harness.kernel
    found = (
        root
        if isinstance(root, JavaWorkspace)
        else read_java_workspace(root, user=user, eviction_path=kernel.settings.eviction.path)
    )
    write, same = _plan(kernel.workspace, found.files, found.source)
    _write_all(kernel, found.files, write)
    result = ImportResult(
        found.source,
        written=sorted(write),
        unchanged=sorted(same),
        skipped=list(found.skipped),
        bad_lines=list(found.bad_lines),
    )
    for sid, messages in found.conversations.items():
        new = _offload(kernel, sid, messages)
        result.sessions += 1
        result.messages += len(messages)
        result.messages_new += new
        if new:
            result.written.append(session_log_path(sid))
    if write or result.messages_new:
        kernel.reindex()
    return result


def _offload(kernel: Kernel, session_id: str, messages: Sequence[dict[str, Any]]) -> int:
    if not messages:
        return 0
    transcript = SessionTranscript(
        kernel.workspace,
        session_id,
        clock=kernel.clock,
        transform=kernel.hooks.transform_memory_text,
    )
    said = [_said(message.get("timestamp")) for message in messages]
    done = transcript.offload(list(enumerate(messages, start=1)), verify=True, said=said)
    return done.appended


def _said(stamp: Any) -> float | None:
    """Seconds since the epoch of an ISO instant (:func:`from_java_session_log` writes UTC)."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
