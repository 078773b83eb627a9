"""The audit log: one record per change, local and on S3, safe with several writers."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness, transfer
from harnessmem.audit import (
    AuditLog,
    AuditRecord,
    acting_as,
    parse_line,
    read_audit,
)
from harnessmem.cli import main
from harnessmem.testing import ScriptedModel
from harnessmem.testing.threads import run_at_once
from harnessmem.workspace import Workspace
from harnessmem.workspace.changes import FileChange

if TYPE_CHECKING:
    from conftest import HarnessFactory, WorkspaceTarget
    from harnessmem.testing import FakeClock

CHAT = [
    {"role": "user", "content": "My dog is called Rex and he is a beagle."},
    {"role": "assistant", "content": "Noted."},
]
DAY = 86_400.0
#: A fact that is forgotten in these tests: none of its words may be in the audit log.
SECRET = "The vault code is zebra-quartz-8841"


def records(harness: MemoryHarness, **filters: Any) -> list[AuditRecord]:
    return read_audit(harness.workspace, **filters)


def audit_bytes(workspace: Workspace) -> bytes:
    return b"".join(workspace.read_bytes(p) for p in workspace.list("audit"))


def only(harness: MemoryHarness, op: str) -> AuditRecord:
    """The one record of the workspace, which must be an ``op`` record."""
    found = records(harness)
    assert [r.op for r in found] == [op], found
    return found[0]


# -- one record per operation, local and S3 ------------------------------------------------------


def test_a_flush_writes_one_record_naming_its_session_and_the_log(
    open_harness: HarnessFactory,
) -> None:
    harness = open_harness(ScriptedModel("- Rex is a beagle"))
    result = harness.flush(CHAT, session_id="chat-1")
    record = only(harness, "flush")
    assert record.actor == "session:chat-1"
    assert record.session == "chat-1"
    assert [c.path for c in record.files] == [result.path]
    assert record.files[0].before is None  # the log was new
    assert record.files[0].after == _hash(harness, result.path)
    assert record.counts["facts"] == 1
    harness.flush(CHAT, session_id="chat-1")  # nothing new: no change, no record
    assert len(records(harness)) == 1


def test_a_save_writes_one_record_chained_to_the_next_change(
    open_harness: HarnessFactory,
) -> None:
    harness = open_harness()
    harness.save("- Rex is a beagle")
    harness.save("- Rex likes long walks")
    first, second = records(harness, ops=["save"])
    assert first.files[0].path == second.files[0].path == "MEMORY.md"
    assert first.files[0].after == second.files[0].before  # each change starts where one ended
    assert second.files[0].after == _hash(harness, "MEMORY.md")
    assert first.counts == {"facts": 1}
    harness.save("- Rex is a beagle")  # already there: no change
    assert len(records(harness)) == 2


def test_a_consolidation_writes_one_record(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel(["- Rex is a beagle", "## Facts\n- Rex is a beagle"]))
    harness.flush(CHAT, session_id="c")
    result = harness.consolidate()
    assert result.status == "consolidated", result
    record = records(harness, ops=["consolidate"])
    assert len(record) == 1
    paths = [c.path for c in record[0].files]
    assert "MEMORY.md" in paths
    assert not any(p.startswith("memory/.consolidation_state") for p in paths)  # bookkeeping
    assert [r.op for r in records(harness)] == ["flush", "consolidate"]


def test_an_edit_writes_one_record(open_harness: HarnessFactory) -> None:
    harness = open_harness()
    harness.save("- Rex is a beagle")
    harness.forget("beagle", replace_with="Rex is a basset hound")
    record = records(harness, ops=["edit"])
    assert len(record) == 1
    assert record[0].counts == {"replaced": 1}
    assert record[0].files[-1].after == _hash(harness, "MEMORY.md")


def test_a_forget_writes_one_record_that_holds_no_word_of_the_fact(
    open_harness: HarnessFactory,
) -> None:
    harness = open_harness(ScriptedModel(f"- {SECRET}"))
    harness.flush([{"role": "user", "content": SECRET}], session_id="s")
    harness.save(f"- {SECRET}")
    result = harness.forget("vault code", sessions=True)
    assert result.count == 2
    record = only_op(harness, "forget")
    assert record.counts == {"removed": 2}
    assert {c.path for c in record.files} >= {"MEMORY.md", result.paths[0]}
    logged = audit_bytes(harness.workspace).lower()
    for word in ("vault", "zebra", "quartz", "8841"):
        assert word.encode() not in logged


def only_op(harness: MemoryHarness, op: str) -> AuditRecord:
    found = records(harness, ops=[op])
    assert len(found) == 1, found
    return found[0]


def test_an_import_writes_one_record(
    open_harness: HarnessFactory, workspace_target: WorkspaceTarget, tmp_path: Path
) -> None:
    source = MemoryHarness.open(tmp_path / "source", maintenance={"enabled": False})
    with source:
        source.save("- Rex is a beagle")
        transfer.export_workspace(source.workspace, tmp_path / "a.tar.gz", clock=time.time)
    harness = open_harness()
    result = transfer.import_archive(harness, tmp_path / "a.tar.gz")
    record = only(harness, "import")
    assert sorted(c.path for c in record.files) == sorted(result.written)
    assert all(c.before is None for c in record.files)
    assert record.counts["files"] == len(result.written)


def test_archiving_a_daily_log_writes_one_record_with_the_same_hash(
    open_harness: HarnessFactory,
) -> None:
    harness = open_harness()
    harness.workspace.write_text("memory/2020-01-01.md", "- an old fact\n")
    report = harness.kernel.maintenance.tick("manual", steps=["archive"], force=True)
    assert report.step("archive").status == "done", report
    record = only(harness, "archive")
    assert record.actor == "maintenance"
    moved = {c.path: c for c in record.files}
    old, new = moved["memory/2020-01-01.md"], moved["memory/archive/2020-01-01.md"]
    assert old.after is None
    assert new.before is None
    assert old.before == new.after == _hash(harness, "memory/archive/2020-01-01.md")
    assert record.counts["archived"] == 1


def test_pruning_old_session_logs_writes_one_record(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    harness = open_harness()
    harness.workspace.write_text("sessions/old.log.jsonl", '{"seq": 1}\n')
    clock.advance(400 * DAY)  # past maintenance.session_retention_days (180)
    report = harness.kernel.maintenance.tick("manual", steps=["prune_sessions"], force=True)
    assert report.step("prune_sessions").counts["deleted"] == 1, report
    record = only(harness, "prune")
    assert [(c.path, c.after) for c in record.files] == [("sessions/old.log.jsonl", None)]
    assert record.files[0].before is not None


def test_a_reindex_that_finds_a_file_changed_by_hand_writes_one_record(
    open_harness: HarnessFactory,
) -> None:
    harness = open_harness()
    harness.workspace.write_text("MEMORY.md", "- written in an editor\n")
    harness.reindex()
    record = only(harness, "reindex")
    assert [(c.path, c.before, c.after) for c in record.files] == [
        ("MEMORY.md", None, _hash(harness, "MEMORY.md"))
    ]
    harness.reindex()  # nothing changed since: no record
    harness.reindex(full=True)  # a rebuild of the same content: none either
    assert len(records(harness)) == 1


def test_the_audit_log_is_pruned_after_its_retention(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    harness = open_harness(audit={"retention_days": 30})
    harness.save("- Rex is a beagle")
    old = harness.workspace.list("audit")
    clock.advance(45 * DAY)
    report = harness.kernel.maintenance.tick("manual", steps=["prune_audit"], force=True)
    assert report.step("prune_audit").counts == {"deleted": 1, "kept": 0}
    assert not set(old) & set(harness.workspace.list("audit"))
    record = only(harness, "prune")  # the pruning itself is recorded, in today's file
    assert [c.path for c in record.files] == old


def test_nothing_is_recorded_when_the_audit_log_is_off(open_harness: HarnessFactory) -> None:
    harness = open_harness(audit={"enabled": False})
    harness.save("- Rex is a beagle")
    assert harness.workspace.list("audit") == []


# -- who -----------------------------------------------------------------------------------------


def test_the_actor_is_who_asked(open_harness: HarnessFactory) -> None:
    harness = open_harness()
    harness.save("- one")
    with acting_as("mcp:claude"):
        harness.save("- two")
    harness.session("chat-9").call_tool("memory_save", {"text": "- three"})
    harness.kernel.tenant = "acme"
    harness.save("- four")
    found = records(harness)
    assert [(r.actor, r.session, r.tenant) for r in found] == [
        ("api", None, None),
        ("mcp:claude", None, None),
        ("session:chat-9", "chat-9", None),
        ("api", None, "acme"),
    ]


def test_the_cli_records_its_changes_as_cli_and_lists_them(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    runner = CliRunner()
    assert runner.invoke(main, ["save", "Rex is a beagle", "-w", ws]).exit_code == 0
    assert runner.invoke(main, ["save", "Rex likes walks", "-w", ws]).exit_code == 0
    shown = runner.invoke(main, ["audit", "-w", ws, "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert [(d["op"], d["actor"]) for d in data] == [("save", "cli"), ("save", "cli")]
    for args, count in (
        (["--op", "save"], 2),
        (["--op", "forget"], 0),
        (["--actor", "cli"], 2),
        (["--actor", "session"], 0),
        (["--since", "today"], 2),
        (["--until", "2000-01-01"], 0),
        (["--limit", "1"], 1),
    ):
        listed = runner.invoke(main, ["audit", "-w", ws, "--json", *args])
        assert listed.exit_code == 0, listed.output
        assert len(json.loads(listed.stdout)) == count, args
    table = runner.invoke(main, ["audit", "-w", ws])
    assert "MEMORY.md" in table.stdout
    assert "save" in table.stdout
    bad = runner.invoke(main, ["audit", "-w", ws, "--since", "soon"])
    assert bad.exit_code == 2


# -- safe writing --------------------------------------------------------------------------------


def test_a_failed_append_does_not_fail_the_change_and_is_retried(
    open_harness: HarnessFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = open_harness()
    real = Workspace.append_text
    down = {"audit": True}

    def append_text(self: Workspace, path: Any, text: str) -> None:
        if str(path).startswith("audit/") and down["audit"]:
            raise OSError("the disk is full")
        real(self, path, text)

    monkeypatch.setattr(Workspace, "append_text", append_text)
    with caplog.at_level(logging.WARNING, logger="harnessmem.audit"):
        saved = harness.save("- Rex is a beagle")
        harness.save("- Rex likes walks")
    assert saved.saved
    assert harness.kernel.audit.pending == 2
    assert harness.kernel.audit.failures == 2
    assert len([r for r in caplog.records if "the disk is full" in r.message]) == 1  # once
    down["audit"] = False
    harness.save("- Rex sleeps a lot")
    assert [r.counts["facts"] for r in records(harness)] == [1, 1, 1]
    assert harness.kernel.audit.pending == 0


def test_records_still_pending_are_written_when_the_harness_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = MemoryHarness.open(tmp_path / "ws", maintenance={"enabled": False})
    real = Workspace.append_text
    down = {"audit": True}

    def append_text(self: Workspace, path: Any, text: str) -> None:
        if str(path).startswith("audit/") and down["audit"]:
            raise OSError("the store is away")
        real(self, path, text)

    monkeypatch.setattr(Workspace, "append_text", append_text)
    harness.save("- Rex is a beagle")
    down["audit"] = False
    harness.close()
    assert [r.op for r in read_audit(Workspace.open(tmp_path / "ws"))] == ["save"]


def test_an_operation_that_fails_part_way_records_what_it_changed(
    open_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = open_harness()
    harness.workspace.write_text("memory/2020-01-01.md", "- a\n")
    harness.workspace.write_text("memory/2020-01-02.md", "- b\n")

    def broken(kernel: Any, now: float) -> Any:
        kernel.workspace.move("memory/2020-01-01.md", "memory/archive/2020-01-01.md")
        raise RuntimeError("the store went away")

    scheduler = harness.kernel.maintenance
    archive = replace(scheduler.steps[0], run=broken)
    monkeypatch.setattr(scheduler, "steps", (archive, *scheduler.steps[1:]))
    report = scheduler.tick("manual", steps=["archive"], force=True)
    assert report.step("archive").status == "failed"
    record = only(harness, "archive")
    assert record.error == "RuntimeError: the store went away"
    assert len(record.files) == 2


def test_four_processes_writing_at_once_lose_no_record(tmp_path: Path, run_together: Any) -> None:
    code = """
import json, sys
from harnessmem.audit import AuditLog, AuditRecord
from harnessmem.workspace import Workspace
from harnessmem.workspace.changes import FileChange
log = AuditLog(Workspace.open(sys.argv[1]), clock=lambda: 1_800_000_000.0)
print("ready", flush=True)
sys.stdin.readline()
ids = []
for n in range(40):
    record = AuditRecord(log.new_id(), 1_800_000_000.0, "save", f"writer-{sys.argv[2]}",
                         files=(FileChange("MEMORY.md", None, "%032x" % n),))
    assert log.append(record)
    ids.append(record.id)
print(json.dumps(ids))
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "core")}
    ws = str(tmp_path / "ws")
    written = run_together(code, [[ws, str(n)] for n in range(4)], envs=[env] * 4)
    found = read_audit(Workspace.open(ws))
    assert sorted(r.id for r in found) == sorted(i for ids in written for i in ids)
    assert len(found) == 160


@pytest.mark.s3
def test_four_writers_at_once_on_s3_lose_no_record(
    s3_workspace_url: str, s3_storage_options: dict[str, Any]
) -> None:
    logs = [
        AuditLog(Workspace.open(s3_workspace_url, s3_storage_options), clock=lambda: 1.8e9)
        for _ in range(4)
    ]
    ids: list[str] = []

    def write(log: AuditLog, who: int) -> None:
        for _ in range(10):
            record = AuditRecord(log.new_id(), 1.8e9, "save", f"writer-{who}")
            assert log.append(record)
            ids.append(record.id)

    errors = run_at_once([lambda log=log, n=n: write(log, n) for n, log in enumerate(logs)])
    assert not errors
    found = read_audit(Workspace.open(s3_workspace_url, s3_storage_options))
    assert sorted(r.id for r in found) == sorted(ids)
    assert len(found) == 40


def test_a_writer_killed_mid_append_tears_no_record(tmp_path: Path) -> None:
    """A process SIGKILLed while it appends large records: every record on file is whole
    (or, when the kill cut one, it is dropped and the next writer's record still reads)."""
    ws = tmp_path / "ws"
    code = """
import sys
from harnessmem.audit import AuditLog, AuditRecord
from harnessmem.workspace import Workspace
from harnessmem.workspace.changes import FileChange
log = AuditLog(Workspace.open(sys.argv[1]), clock=lambda: 1_800_000_000.0)
files = tuple(FileChange(f"memory/{n:04d}-{'x' * 60}.md", "%032x" % n, None) for n in range(400))
print("go", flush=True)
while True:
    log.append(AuditRecord(log.new_id(), 1_800_000_000.0, "prune", "maintenance", files=files))
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "core")}
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(ws)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "go"
    path = next((ws / "audit").glob("*.jsonl"), None) if (ws / "audit").exists() else None
    deadline = time.monotonic() + 30
    while (path is None or path.stat().st_size < 2_000_000) and time.monotonic() < deadline:
        time.sleep(0.01)
        if path is None and (ws / "audit").exists():
            path = next((ws / "audit").glob("*.jsonl"), None)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert path is not None
    log = AuditLog(Workspace.open(ws), clock=lambda: 1_800_000_000.0)
    after = AuditRecord(log.new_id(), 1_800_000_000.0, "save", "cli")
    assert log.append(after)
    raw = path.read_text()
    found = read_audit(Workspace.open(ws))
    assert found[-1].id == after.id
    assert all(len(r.files) == 400 for r in found[:-1])  # none cut short
    started = raw.count('{"id":')
    assert started - 1 <= len(found) <= started  # at most the record being written is lost


def test_a_torn_record_is_skipped_and_the_record_appended_after_it_reads(
    tmp_path: Path,
) -> None:
    ws = Workspace.open(tmp_path / "ws")
    log = AuditLog(ws, clock=lambda: 1_800_000_000.0)
    first = AuditRecord(log.new_id(), 1.8e9, "save", "cli", (FileChange("MEMORY.md", None, "a"),))
    log.append(first)
    torn = AuditRecord(log.new_id(), 1.8e9, "save", "cli").to_json()
    path = ws.list("audit")[0]
    ws.append_text(path, torn[: len(torn) // 2])  # a power cut mid-append
    last = AuditRecord(log.new_id(), 1.8e9, "flush", "session:x")
    log.append(last)
    assert [r.id for r in read_audit(ws)] == [first.id, last.id]
    assert parse_line("") is None
    assert parse_line("not json") is None
    assert parse_line(torn[:10]) is None


def test_an_export_leaves_the_audit_log_behind(tmp_path: Path) -> None:
    with MemoryHarness.open(tmp_path / "ws", maintenance={"enabled": False}) as harness:
        harness.save("- Rex is a beagle")
        assert harness.workspace.list("audit")
        result = transfer.export_workspace(harness.workspace, tmp_path / "a.tgz", clock=time.time)
    assert result.files == 1  # MEMORY.md only


def test_the_inspector_lists_the_changes(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from harnessmem.inspector.app import create_app

    with MemoryHarness.open(tmp_path / "ws", maintenance={"enabled": False}) as harness:
        harness.save("- Rex is a beagle")
        with acting_as("mcp:claude"):
            harness.forget("beagle")
        client = TestClient(create_app(harness), base_url="http://127.0.0.1")
        page = client.get("/audit")
        assert page.status_code == 200
        for shown in ("forget", "mcp:claude", "MEMORY.md"):
            assert shown in page.text
        assert "beagle" not in page.text
        filtered = client.get("/audit", params={"op": "save"})
        assert "mcp:claude" not in filtered.text
        by_actor = client.get("/audit", params={"actor": "mcp"})
        assert "mcp:claude" in by_actor.text
        assert "<td>save" not in by_actor.text


def _hash(harness: MemoryHarness, path: str) -> str:
    from harnessmem.encoding import content_hash

    return content_hash(harness.workspace.read_bytes(path))
