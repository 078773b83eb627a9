"""Import of a workspace the AgentScope Java harness wrote (see the package doc)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ArchiveError
from harnessmem.layout import (
    ARCHIVE_DIR,
    CONSOLIDATION_STATE,
    MEMORY_DIR,
    MEMORY_FILE,
    is_daily_log,
    session_log_path,
)
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.messages import MessageFormatError, from_java_session_log
from harnessmem.transfer.plan import ImportResult, plan_writes, sha256_of, write_order

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness
    from harnessmem.kernel import Kernel

__all__ = ["JavaWorkspace", "import_java_workspace", "read_java_workspace"]


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
    found = (
        root
        if isinstance(root, JavaWorkspace)
        else read_java_workspace(root, user=user, eviction_path=harness.settings.eviction.path)
    )
    digests = {rel: sha256_of(data) for rel, data in found.files.items()}
    write, same = plan_writes(harness.workspace, digests, found.source)
    with harness.kernel.audit.change("import") as change:
        result = _write_java(harness, found, write, same)
        change.count("files", len(result.written))
        change.count("messages", result.messages_new)
    return result


def _write_java(
    harness: MemoryHarness, found: JavaWorkspace, write: list[str], same: list[str]
) -> ImportResult:
    for rel in write_order(write):
        harness.workspace.write_bytes(rel, found.files[rel])
    result = ImportResult(
        found.source,
        written=sorted(write),
        unchanged=sorted(same),
        skipped=list(found.skipped),
        bad_lines=list(found.bad_lines),
    )
    for sid, messages in found.conversations.items():
        new = _offload(harness.kernel, sid, messages)
        result.sessions += 1
        result.messages += len(messages)
        result.messages_new += new
        if new:
            result.written.append(session_log_path(sid))
    if write or result.messages_new:
        harness.reindex()
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
