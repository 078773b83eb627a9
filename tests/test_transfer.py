"""Export a workspace to one archive and import it elsewhere; import the Java harness's."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness, transfer
from harnessmem.cli import main
from harnessmem.errors import ArchiveError
from harnessmem.messages import normalize_messages
from harnessmem.settings import HarnessSettings
from harnessmem.workspace import Workspace

JAVA = Path(__file__).parent / "data" / "java-workspace"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def files_of(workspace: Workspace) -> dict[str, bytes]:
    return {rel: workspace.read_bytes(rel) for rel in workspace.list("")}


def harness_on(url: str, options: dict[str, Any] | None = None, **sections: Any) -> MemoryHarness:
    settings = HarnessSettings.load(
        workspace={"url": url, "storage_options": options or {}},
        maintenance={"enabled": False},
        **sections,
    )
    return MemoryHarness(settings)


@pytest.fixture
def example_workspace(tmp_path: Path) -> Path:
    """The shipped example conversation replayed into a local workspace."""
    root = tmp_path / "source" / "workspace"
    result = invoke("replay", "--example", "-w", str(root))
    assert result.exit_code == 0, result.output
    return root


def test_an_export_imported_elsewhere_holds_the_same_files_and_finds_the_same_memories(
    example_workspace: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "agent.tar.gz"
    with harness_on(str(example_workspace)) as source:
        exported = transfer.export_workspace(source.workspace, archive, clock=source.kernel.clock)
        before = files_of(source.workspace)
        hits = [(h.path, h.content) for h in source.search("staging database")]
    assert exported.files == len(before) > 10
    assert not any(rel.startswith(".locks") for rel in before)
    with harness_on(str(tmp_path / "copy")) as copy:
        result = transfer.import_archive(copy, archive)
        assert files_of(copy.workspace) == before  # byte for byte, history and state included
        assert [(h.path, h.content) for h in copy.search("staging database")] == hits
        assert hits
        assert sorted(result.written) == sorted(before)
        again = transfer.import_archive(copy, archive)
    assert again.written == []
    assert len(again.unchanged) == len(before)


@pytest.mark.s3
def test_round_trip_between_a_local_folder_and_s3(
    example_workspace: Path, tmp_path: Path, s3_workspace_url: str, s3_storage_options: Any
) -> None:
    to_s3, back = tmp_path / "to-s3.tar.gz", tmp_path / "back.tar.gz"
    with harness_on(str(example_workspace)) as local:
        transfer.export_workspace(local.workspace, to_s3, clock=local.kernel.clock)
        original = files_of(local.workspace)
    with harness_on(s3_workspace_url, s3_storage_options) as remote:
        transfer.import_archive(remote, to_s3)
        assert files_of(remote.workspace) == original
        assert remote.search("Brest timeout")
        transfer.export_workspace(remote.workspace, back, clock=remote.kernel.clock)
    with harness_on(str(tmp_path / "home")) as home:
        transfer.import_archive(home, back)
        assert files_of(home.workspace) == original


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _manifest(files: dict[str, bytes], **changes: Any) -> bytes:
    import hashlib

    listed = [
        {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for rel, data in files.items()
    ]
    body = {"format": "harnessmem-export", "version": 1, "files": listed, **changes}
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("members", "phrase"),
    [
        ({"workspace/MEMORY.md": b"- a\n"}, "has no harnessmem-export.json"),
        ({"harnessmem-export.json": b"{not json"}, "is not JSON"),
        ({"harnessmem-export.json": _manifest({}, version=9)}, "version 9"),
        (
            {
                "workspace/MEMORY.md": b"- tampered\n",
                "harnessmem-export.json": _manifest({"MEMORY.md": b"- original\n"}),
            },
            "does not match its manifest",
        ),
        (
            {
                "workspace/../escape.md": b"- out\n",
                "harnessmem-export.json": _manifest({"../escape.md": b"- out\n"}),
            },
            "not allowed",
        ),
        (
            {
                "workspace/.locks/x.lease": b"{}",
                "harnessmem-export.json": _manifest({".locks/x.lease": b"{}"}),
            },
            "not allowed",
        ),
        (
            {
                "workspace/MEMORY.md": b"- a\n",
                "workspace/extra.md": b"- smuggled\n",
                "harnessmem-export.json": _manifest({"MEMORY.md": b"- a\n"}),
            },
            "outside its manifest",
        ),
    ],
)
def test_a_bad_archive_gets_one_error_and_creates_nothing(
    tmp_path: Path, members: dict[str, bytes], phrase: str
) -> None:
    archive = _tar(tmp_path / "bad.tar.gz", members)
    target = tmp_path / "target" / "workspace"
    result = invoke("import", str(archive), "-w", str(target))
    assert result.exit_code == 4, result.output
    assert phrase in result.output
    assert result.output.count("error:") == 1
    assert not (tmp_path / "target").exists()


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x00\x01 not an archive")
    with pytest.raises(ArchiveError, match="not a readable archive"):
        transfer.read_archive(junk)


def test_an_import_never_overwrites_different_memory(
    example_workspace: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "agent.tar.gz"
    with harness_on(str(example_workspace)) as source:
        transfer.export_workspace(source.workspace, archive, clock=source.kernel.clock)
    with harness_on(str(tmp_path / "busy")) as busy:
        busy.workspace.write_text("MEMORY.md", "- Somebody else's memory.\n")
        with pytest.raises(ArchiveError, match="already holds 1 of these files") as caught:
            transfer.import_archive(busy, archive)
        assert "MEMORY.md" in caught.value.message
        assert busy.workspace.list("") == ["MEMORY.md"]  # nothing else was written
        assert busy.workspace.read_text("MEMORY.md") == "- Somebody else's memory.\n"


def test_an_interrupted_import_is_finished_by_running_it_again(
    example_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "agent.tar.gz"
    with harness_on(str(example_workspace)) as source:
        transfer.export_workspace(source.workspace, archive, clock=source.kernel.clock)
        original = files_of(source.workspace)
    with harness_on(str(tmp_path / "copy")) as copy:
        real = Workspace.write_bytes
        count = {"n": 0}

        def failing(self: Workspace, path: Any, data: bytes) -> None:
            count["n"] += 1
            if count["n"] == 5:
                raise OSError("disk full")
            real(self, path, data)

        monkeypatch.setattr(Workspace, "write_bytes", failing)
        with pytest.raises(OSError, match="disk full"):
            transfer.import_archive(copy, archive)
        monkeypatch.setattr(Workspace, "write_bytes", real)
        half = files_of(copy.workspace)
        assert 0 < len(half) < len(original)
        assert "MEMORY.md" not in half  # written last
        assert all(original[rel] == data for rel, data in half.items())
        transfer.import_archive(copy, archive)
        assert files_of(copy.workspace) == original


def test_a_failed_export_leaves_no_archive_and_no_temporary_file(
    example_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with harness_on(str(example_workspace)) as source:
        real = Workspace.read_bytes
        count = {"n": 0}

        def failing(self: Workspace, path: Any, **kwargs: Any) -> bytes:
            count["n"] += 1
            if count["n"] == 4:
                raise OSError("connection reset")
            return real(self, path, **kwargs)

        monkeypatch.setattr(Workspace, "read_bytes", failing)
        with pytest.raises(OSError, match="connection reset"):
            transfer.export_workspace(source.workspace, out / "a.tar.gz", clock=source.kernel.clock)
    assert list(out.iterdir()) == []


def test_export_refuses_to_replace_a_file_unless_forced(
    example_workspace: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_text("precious")
    refused = invoke("export", str(archive), "-w", str(example_workspace))
    assert refused.exit_code == 4
    assert "already exists" in refused.output
    assert archive.read_text() == "precious"
    forced = invoke("export", str(archive), "-w", str(example_workspace), "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["files"] > 10
    assert tarfile.is_tarfile(archive)


def test_export_of_a_folder_that_is_no_workspace_creates_nothing(tmp_path: Path) -> None:
    result = invoke("export", str(tmp_path / "a.tar.gz"), "-w", str(tmp_path / "nothing"))
    assert result.exit_code == 5, result.output
    assert not (tmp_path / "nothing").exists()
    assert not (tmp_path / "a.tar.gz").exists()


# ------------------------------------------------------------------------------ Java


def test_a_java_session_log_reads_as_openai_messages() -> None:
    lines = (JAVA / "agents/helpdesk/sessions/s-0412.log.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    messages = normalize_messages(records)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "user",
    ]
    call = messages[1]["tool_calls"][0]
    assert call["id"] == "call_k1"
    assert json.loads(call["function"]["arguments"]) == {"device": "kiosk-2"}
    assert messages[2]["tool_call_id"] == "call_k1"
    assert messages[0]["timestamp"] == "2026-03-02T09:14:05.500000Z"
    assert messages[-1]["content"] == "[image]"


def test_a_java_workspace_is_imported_and_searchable(tmp_path: Path) -> None:
    target = tmp_path / "ws"
    result = invoke("import", str(JAVA), "--from", "java", "-w", str(target), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["sessions"] == 1
    assert report["messages"] == 6
    assert report["messages_new"] == 6
    assert report["bad_lines"] == ["agents/helpdesk/sessions/s-0412.log.jsonl:7"]
    assert {"AGENTS.md", "knowledge/", "README.md"} <= set(report["skipped"])
    again = invoke("import", str(JAVA), "--from", "java", "-w", str(target), "--json")
    assert again.exit_code == 0, again.output
    repeat = json.loads(again.output[again.output.index("{") :])
    assert repeat["messages_new"] == 0
    assert repeat["written"] == []
    with harness_on(str(target)) as harness:
        ws = harness.workspace
        assert ws.read_bytes("MEMORY.md") == (JAVA / "MEMORY.md").read_bytes()
        assert ws.exists("memory/2026-03-02.md")
        assert ws.exists("memory/archive/2026-02-10.md")
        assert not ws.exists("AGENTS.md")
        kiosk = harness.search("kiosk cards 2019")
        assert kiosk
        assert kiosk[0].path == "memory/2026-03-02.md"
        assert kiosk[0].date == "2026-03-02"
        assert harness.search("catalogue server restarts")[0].path == "MEMORY.md"
        said = harness.search("rejecting old cards", source="sessions")
        assert said
        assert said[0].path == "sessions/s-0412.log.jsonl"
        log = ws.read_text("sessions/s-0412.log.jsonl")
        assert "sk-proj-" not in log
        assert "[REDACTED]" in log
        evicted = harness.get("large_tool_results/helpdesk/call_k1-5f0c3a9d2e7b4411")
        assert "issue year before 2019" in evicted
        # the Java watermark (a bare instant) reads as "logs modified before it are done"
        assert harness.consolidate().status != "failed"
        curated = ws.read_bytes("MEMORY.md")
    # the curated MEMORY.md now differs from the Java one: a new import must not replace it
    late = invoke("import", str(JAVA), "--from", "java", "-w", str(target))
    assert late.exit_code == 4
    assert "MEMORY.md" in late.output
    assert (target / "MEMORY.md").read_bytes() == curated


def test_a_java_workspace_with_several_users_needs_one_named(tmp_path: Path) -> None:
    root = tmp_path / "java"
    for user in ("alice", "bob"):
        shutil.copytree(JAVA, root / user, ignore=shutil.ignore_patterns("large_tool_results"))
    (root / "bob" / "MEMORY.md").write_text("- Bob keeps his own notes.\n")
    target = tmp_path / "ws"
    refused = invoke("import", str(root), "--from", "java", "-w", str(target))
    assert refused.exit_code == 4
    assert "2 users (alice, bob)" in refused.output
    assert "--user" in refused.output
    assert not target.exists()
    chosen = invoke("import", str(root), "--from", "java", "--user", "bob", "-w", str(target))
    assert chosen.exit_code == 0, chosen.output
    assert (target / "MEMORY.md").read_text() == "- Bob keeps his own notes.\n"
    missing = invoke("import", str(root), "--from", "java", "--user", "../bob", "-w", str(target))
    assert missing.exit_code == 4
    assert "no memory of user" in missing.output


def test_a_folder_without_java_memory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArchiveError, match="holds no Java harness memory"):
        transfer.read_java_workspace(tmp_path / "empty")
    assert invoke("import", str(tmp_path / "empty"), "--user", "x").exit_code == 2
