"""A full disk tears no file: a failed write leaves every file as it was, a retry adds one copy.

Two ways to fill the disk:

- for real: a child process lowers its file size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored)
  to just past the file a component writes, so the kernel writes what fits and then fails
  the write with ``EFBIG``, as a full disk does with ``ENOSPC``. Each component that writes
  to the workspace runs once under the limit and once after it (the retry): memory_save
  (MEMORY.md), the flush (daily log), the session log, the usage ledger, eviction and
  consolidation's rewrite of MEMORY.md.
- injected, in this process: ``os.write`` writes what still fits and then raises
  ``ENOSPC``, or ``os.fsync`` raises it after the whole write, for each write primitive of a
  local workspace.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harnessmem.errors import WorkspaceError
from harnessmem.models.usage import UsageRecord
from harnessmem.workspace import Workspace

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="needs RLIMIT_FSIZE and /proc/self/fd"
)

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
DAILY = "memory/2027-01-15.md"
LEDGER = "usage/2027-01-15.jsonl"
SESSION_LOG = "sessions/chat-7.log.jsonl"
OLD_MEMORY = "## People\n" + "".join(
    f"- The user's colleague number {i} works in team {i % 7} (2027-01-10)\n" for i in range(60)
)
SAVED = [f"The user prefers window seats on flight number {i} to Porto" for i in range(40)]
# The first flush writes a long entry, the second a short one: the flush's state file, which
# holds the entry it is about to write, fits under the limit, and the daily log does not.
FACTS = [f"- The user's favourite dish number {i} is bacalhau" for i in range(60)]
MORE_FACTS = [f"- The user's neighbour number {i} has a dog" for i in range(8)]
ADDED_MEMORY = "- The user lives in Porto since the spring of 2027 (2027-01-15)\n"
LOGGED = "\n## Memory Flush — 2027-01-15T07:00:00Z · session old\n- The user lives in Porto\n"
EVICTED_CHARS = 150_000
SHELL = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}

# One scenario per component: set up (no limit), write under a file size limit just past
# the target file's size, lift the limit and write again. The workspace is snapshotted
# after each step (every file, hidden ones too, except the locks).
CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from harnessmem import MemoryHarness
    from harnessmem.backends.base import Completion, ModelBackend
    from harnessmem.memory.transcripts import SessionTranscript
    from harnessmem.models.usage import UsageLedger, UsageRecord

    root, scenario = sys.argv[1:3]
    NOW, OLD_MEMORY, SAVED = {now!r}, {old_memory!r}, {saved!r}
    FACTS, MORE_FACTS, ADDED_MEMORY = {facts!r}, {more_facts!r}, {added_memory!r}
    SHELL, EVICTED_CHARS = {shell!r}, {evicted_chars!r}
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by signal
    _, HARD = resource.getrlimit(resource.RLIMIT_FSIZE)

    def tree():
        found = {{}}
        for current, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".locks"]
            for name in files:
                path = os.path.join(current, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, root)] = f.read().decode("latin-1")
        return found

    report = {{}}

    def size(path):
        return os.path.getsize(os.path.join(root, path))

    def limited(limit, write):
        # No file may grow past ``limit`` bytes: a write is cut there, then fails (EFBIG).
        report["before"] = tree()
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, HARD))
        try:
            report["returned"] = write()
        except Exception as exc:
            report["error"] = f"{{type(exc).__name__}}: {{exc}}\\n{{getattr(exc, 'hint', '')}}"
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (HARD, HARD))
        report["failed"] = tree()

    class Model(ModelBackend):  # ScriptedModel's token counting would load tiktoken
        replies = []
        def complete(self, messages, *, purpose, max_tokens=None):
            return Completion(self.replies.pop(0), 0, 0, "disk-full-test")

    def harness():
        return MemoryHarness.open(
            root, model=Model(Model.Options()), clock=lambda: NOW,
            index={{"backend": "inmemory"}}, maintenance={{"enabled": False}},
            context={{"inject": "manual"}},
        )

    def said(text):
        return [{{"role": "user", "content": text}}, {{"role": "assistant", "content": "Noted!"}}]

    if scenario == "memory_save":
        with open(os.path.join(root, "MEMORY.md"), "w") as f:
            f.write(OLD_MEMORY)
        with harness() as h:
            text = "\\n".join("- " + fact for fact in SAVED)
            limited(size("MEMORY.md") + 200, lambda: list(h.save(text).entries))
            report["retried"] = list(h.save(text).entries)
    elif scenario == "daily_log":
        Model.replies = ["\\n".join(FACTS), "\\n".join(MORE_FACTS), "\\n".join(MORE_FACTS)]
        with harness() as h:
            h.flush(said("My favourite dishes are all bacalhau."), session_id="one")
            again = said("Each of my neighbours has a dog.")
            limited(size({daily!r}) + 200, lambda: h.flush(again, session_id="two").status)
            report["retried"] = h.flush(again, session_id="two").status
    elif scenario == "session_log":
        from harnessmem.workspace import Workspace
        transcript = SessionTranscript(Workspace.open(root), "chat-7", clock=lambda: NOW)
        said_all = [
            {{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{{i}} " + "x" * 2000}}
            for i in range(1, 5)
        ]
        entries = [(i, m) for i, m in enumerate(said_all, start=1)]
        transcript.offload(entries[:2])
        limited(size({session_log!r}) + 1000, lambda: transcript.offload(entries).appended)
        report["retried"] = transcript.offload(entries).appended
    elif scenario == "ledger":
        from harnessmem.workspace import Workspace
        ledger = UsageLedger(Workspace.open(root), clock=lambda: NOW)
        def call(n):
            return UsageRecord(NOW, "flush", f"model-{{n}}", "scripted", 1000 + n, 10 + n)
        for n in range(3):
            ledger.record(call(n))
        ledger.flush()
        for n in range(3, 6):
            ledger.record(call(n))
        limited(size({ledger!r}) + 100, ledger.flush)
        ledger.record(call(6))
        ledger.flush()
        report["calls"] = ledger.report().total.calls
    elif scenario == "eviction":
        lines = (f"line {{i:06d}} " + "y" * 50 + "\\n" for i in range(EVICTED_CHARS // 62 + 1))
        text = "".join(lines)[:EVICTED_CHARS]
        with harness() as h:
            session = h.session("chat-7")
            limited(10_000, lambda: session.after_tool(SHELL, text) == text)
            report["retried"] = session.after_tool(SHELL, text) != text
    elif scenario == "consolidation":
        os.makedirs(os.path.join(root, "memory"))
        with open(os.path.join(root, "MEMORY.md"), "w") as f:
            f.write(OLD_MEMORY)
        with open(os.path.join(root, {daily!r}), "w") as f:
            f.write({logged!r})
        Model.replies = [OLD_MEMORY + ADDED_MEMORY, OLD_MEMORY + ADDED_MEMORY]
        with harness() as h:
            limited(size("MEMORY.md") + 20, lambda: h.consolidate().status)
            report["retried"] = h.consolidate().status
    report["after"] = tree()
    print(json.dumps(report))
    """
).format(
    now=NOW,
    old_memory=OLD_MEMORY,
    saved=SAVED,
    facts=FACTS,
    more_facts=MORE_FACTS,
    added_memory=ADDED_MEMORY,
    shell=SHELL,
    evicted_chars=EVICTED_CHARS,
    daily=DAILY,
    session_log=SESSION_LOG,
    ledger=LEDGER,
    logged=LOGGED,
)
SCENARIOS = ("memory_save", "daily_log", "session_log", "ledger", "eviction", "consolidation")

Tree = dict[str, bytes]


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every scenario's child, run in parallel; what each one reported."""
    children = {}
    for scenario in SCENARIOS:
        root = tmp_path_factory.mktemp(scenario) / "ws"
        root.mkdir()
        children[scenario] = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    reports = {}
    for scenario, child in children.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, f"{scenario}: {out}{err[-3000:]}"
        report = json.loads(out)
        for key in ("before", "failed", "after"):
            report[key] = {path: text.encode("latin-1") for path, text in report[key].items()}
        reports[scenario] = report
    return reports


def _added(report: dict[str, Any], path: str) -> str:
    """What the retry added to ``path``, which must still start with its old bytes."""
    before, after = report["before"][path], report["after"][path]
    assert after.startswith(before), f"{path}: the retry changed what was there"
    return after[len(before) :].decode("utf-8")


def _assert_failed_cleanly(report: dict[str, Any]) -> None:
    assert report["failed"] == report["before"], "a file changed in the failed write: " + ", ".join(
        sorted(
            path
            for path in report["before"].keys() | report["failed"].keys()
            if report["before"].get(path) != report["failed"].get(path)
        )
    )


def _assert_disk_error(report: dict[str, Any], path: str) -> None:
    assert f"{path!r}" in report["error"], "the write of that very file failed"
    assert "File too large" in report["error"]
    assert "the disk is full" in report["error"], "the hint names the cause"


def test_memory_save_leaves_memory_md_whole(disk_full: dict[str, dict[str, Any]]) -> None:
    """A save that did not fit leaves MEMORY.md as it was; the retry adds one entry."""
    report = disk_full["memory_save"]
    _assert_failed_cleanly(report)
    _assert_disk_error(report, "MEMORY.md")
    assert report["retried"] == SAVED
    added = _added(report, "MEMORY.md")
    assert re.fullmatch(r"\n## Memory Save — \S+\n(?:- [^\n]+\n)+", added), added[:300]
    assert added.count("\n- ") == len(SAVED)
    text = report["after"]["MEMORY.md"].decode()
    assert all(text.count(f"- {fact}\n") == 1 for fact in SAVED)


def test_a_flush_leaves_the_daily_log_whole(disk_full: dict[str, dict[str, Any]]) -> None:
    """A flush that did not fit leaves the daily log as it was; the retry adds one entry."""
    report = disk_full["daily_log"]
    # The flush puts its new mark on file as pending on the entry before it appends (a
    # crash between the two is resolved by looking for the entry in the log): that file
    # is new, every other one is as it was.
    state = json.loads(report["failed"].pop("memory/.flush_state/two.json"))
    assert state["pending"]["path"] == DAILY
    _assert_failed_cleanly(report)
    _assert_disk_error(report, DAILY)
    assert report["retried"] == "written"
    added = _added(report, DAILY)
    assert re.fullmatch(r"\n## Memory Flush — \S+ · session two\n(?:- [^\n]+\n)+", added), added
    text = report["after"][DAILY].decode()
    assert all(text.count(f"{fact}\n") == 1 for fact in FACTS + MORE_FACTS)


def test_an_offload_leaves_the_session_log_whole(disk_full: dict[str, dict[str, Any]]) -> None:
    """An offload that did not fit leaves the log as it was; the retry appends each line once
    and every line of the log parses."""
    report = disk_full["session_log"]
    _assert_failed_cleanly(report)
    _assert_disk_error(report, SESSION_LOG)
    assert report["retried"] == 2
    _added(report, SESSION_LOG)
    lines = report["after"][SESSION_LOG].decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["message"]["content"][:3] for r in records] == ["m1 ", "m2 ", "m3 ", "m4 "]


def test_the_usage_ledger_stays_whole(disk_full: dict[str, dict[str, Any]]) -> None:
    """A batch that did not fit leaves the ledger as it was (its calls are kept in memory,
    counted once); the next batch is written whole."""
    report = disk_full["ledger"]
    assert "error" not in report, "telemetry never fails the call it describes"
    _assert_failed_cleanly(report)
    lines = _added(report, LEDGER).splitlines()
    assert [UsageRecord.from_json(line) is not None for line in lines] == [True]
    assert report["calls"] == 7, "each call counted once, from the file or from memory"


def test_an_eviction_that_does_not_fit_keeps_the_result_and_writes_nothing(
    disk_full: dict[str, dict[str, Any]],
) -> None:
    """The evicted file did not fit: the result stays whole, no file (or temp file) is
    left; the retry writes the file once."""
    report = disk_full["eviction"]
    assert report["returned"] is True, "the result was kept whole"
    _assert_failed_cleanly(report)
    assert report["retried"] is True
    new = report["after"].keys() - report["before"].keys()
    [path] = new
    assert path.startswith("large_tool_results/chat-7/call_1-")
    assert len(report["after"][path]) == EVICTED_CHARS
    assert {p: report["after"][p] for p in report["before"]} == report["before"]


def test_a_consolidation_that_does_not_fit_leaves_memory_md_whole(
    disk_full: dict[str, dict[str, Any]],
) -> None:
    """The new MEMORY.md did not fit: the old one stays, byte for byte, and no temp file is
    left behind; the retry replaces it."""
    report = disk_full["consolidation"]
    assert report["failed"]["MEMORY.md"] == report["before"]["MEMORY.md"]
    assert not [p for p in report["failed"] if p.endswith(".harnessmem-tmp")]
    _assert_disk_error(report, "MEMORY.md")
    assert report["retried"] == "consolidated"
    assert report["after"]["MEMORY.md"].decode() == OLD_MEMORY + ADDED_MEMORY


# -- injected faults, in this process --------------------------------------------------------


class FullDisk:
    """``os.write`` and ``os.fsync`` of files under ``root`` (locks aside) as on a full disk.

    ``free`` bytes still fit (None: no limit): a write gets what fits and is told so (a
    short write), and the next one fails with ENOSPC, as the kernel does. ``fsync_fails``
    makes fsync fail with ENOSPC after the data was written (delayed allocation, NFS).
    """

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = str(root.resolve()) + os.sep
        self.free: int | None = None
        self.fsync_fails = False
        self._write, self._fsync = os.write, os.fsync
        monkeypatch.setattr(os, "write", self.write)
        monkeypatch.setattr(os, "fsync", self.fsync)

    def _ours(self, fd: int) -> bool:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        return path.startswith(self.root) and f"{os.sep}.locks{os.sep}" not in path

    def write(self, fd: int, data: Any) -> int:
        if self.free is None or not self._ours(fd):
            return self._write(fd, data)
        if self.free == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self._write(fd, bytes(data)[: self.free])
        self.free -= written
        return written

    def fsync(self, fd: int) -> None:
        if self.fsync_fails and self._ours(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._fsync(fd)

    def heal(self) -> None:
        self.free, self.fsync_fails = None, False


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.open(tmp_path / "ws")
    ws.write_text("MEMORY.md", OLD_MEMORY)
    ws.write_text(DAILY, LOGGED)
    return ws


@pytest.fixture
def full_disk(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    assert workspace.local_root is not None
    return FullDisk(workspace.local_root, monkeypatch)


def _tree(workspace: Workspace) -> Tree:
    """Every file of the workspace (temp files too), the locks aside."""
    assert workspace.local_root is not None
    return {
        str(path.relative_to(workspace.local_root)): path.read_bytes()
        for path in workspace.local_root.rglob("*")
        if path.is_file() and ".locks" not in path.parts
    }


ENTRY = "".join(f"- The user's cousin number {i} lives in Braga\n" for i in range(20))
# Each write primitive of a local workspace: the call, the file and what it holds after one
# successful call.
WRITES: dict[str, tuple[Callable[[Workspace], object], str, Callable[[str], str]]] = {
    "append_text": (lambda ws: ws.append_text(DAILY, ENTRY), DAILY, lambda old: old + ENTRY),
    "append_text, new file": (
        lambda ws: ws.append_text("memory/2027-01-16.md", ENTRY),
        "memory/2027-01-16.md",
        lambda old: ENTRY,
    ),
    "update_text, append": (
        lambda ws: ws.update_text("MEMORY.md", lambda text: text + ENTRY, append=True),
        "MEMORY.md",
        lambda old: old + ENTRY,
    ),
    "update_text, replace": (
        lambda ws: ws.update_text("MEMORY.md", lambda text: ENTRY + text),
        "MEMORY.md",
        lambda old: ENTRY + old,
    ),
    "write_text": (lambda ws: ws.write_text("MEMORY.md", ENTRY), "MEMORY.md", lambda old: ENTRY),
    "create_text": (
        lambda ws: ws.create_text("large_tool_results/s/c-1.txt", ENTRY),
        "large_tool_results/s/c-1.txt",
        lambda old: ENTRY,
    ),
}


@pytest.mark.parametrize("fault", ["short write", "fsync"])
@pytest.mark.parametrize("name", list(WRITES))
def test_a_write_that_fails_on_a_full_disk_changes_nothing(
    workspace: Workspace, full_disk: FullDisk, name: str, fault: str
) -> None:
    """The failed write leaves every file byte for byte as it was (a new file is not made);
    once there is room, the same call leaves exactly one copy of what it writes."""
    write, path, expected = WRITES[name]
    before = _tree(workspace)
    old = before.get(path, b"").decode()
    if fault == "short write":
        full_disk.free = len(ENTRY) // 2
    else:
        full_disk.fsync_fails = True
    with pytest.raises(WorkspaceError, match="No space left on device") as caught:
        write(workspace)
    assert _tree(workspace) == before
    assert "the disk is full" in (caught.value.hint or "")
    full_disk.heal()
    write(workspace)
    assert workspace.read_text(path) == expected(old)
    assert _tree(workspace) == {**before, path: expected(old).encode()}


def test_an_append_that_cannot_be_cut_back_says_where_the_file_is_torn(
    workspace: Workspace, full_disk: FullDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting the partial write back failed too (an I/O error): the error says so, and
    the hint gives the size to truncate the file to."""
    size = len(LOGGED.encode())
    full_disk.free = 10

    def ftruncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    with pytest.raises(WorkspaceError, match="cutting the partial write back failed") as caught:
        workspace.append_text(DAILY, ENTRY)
    assert f"after byte {size}" in str(caught.value)
    assert f"truncate the file to {size} bytes" in (caught.value.hint or "")
    assert workspace.read_bytes(DAILY) == (LOGGED + ENTRY[:10]).encode()
