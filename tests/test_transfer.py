"""Export a workspace to one archive and import it elsewhere; import the Java harness's."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness, transfer
from harnessmem.cli import main
from harnessmem.errors import ArchiveError
from harnessmem.messages import normalize_messages
from harnessmem.settings import HarnessSettings, TransferSettings
from harnessmem.workspace import Workspace

JAVA = Path(__file__).parent / "data" / "java-workspace"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def files_of(workspace: Workspace) -> dict[str, bytes]:
    """The workspace's files but its audit log (which an export leaves behind: each
    workspace records its own changes)."""
    return {rel: workspace.read_bytes(rel) for rel in listed(workspace)}


def listed(workspace: Workspace) -> list[str]:
    return [rel for rel in workspace.list("") if not rel.startswith("audit/")]


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


# ------------------------------------------------------------------------------ hostile archives


def _bomb(path: Path, size: int, manifest: bytes) -> Path:
    """A gzipped tar of ``workspace/memory/bomb.md``, ``size`` zero bytes (a multiple of
    1 MiB), then ``harnessmem-export.json`` (``manifest``): about 1 kB per MiB.

    Made without compressing the zeros: after a full flush deflate starts afresh, so each
    MiB of zeros compresses to the same bytes, written again and again. The gzip wrapper
    (header, CRC-32 and length of the unpacked stream) is written here, so that any gzip
    reader takes the file.
    """
    import zlib

    def header(name: str, length: int) -> bytes:
        info = tarfile.TarInfo(name)
        info.size = length
        return info.tobuf(tarfile.GNU_FORMAT)

    mib = bytes(1024 * 1024)
    head = header("workspace/memory/bomb.md", size)
    tail = header(transfer.MANIFEST, len(manifest)) + manifest
    tail += bytes(-len(manifest) % 512) + bytes(1024)  # padding, then end of archive
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = zlib.crc32(head)
    with path.open("wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        out.write(deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH))
        unit = deflate.compress(mib) + deflate.flush(zlib.Z_FULL_FLUSH)
        for _ in range(size // len(mib)):
            out.write(unit)
            crc = zlib.crc32(mib, crc)
        out.write(deflate.compress(tail) + deflate.flush())
        crc = zlib.crc32(tail, crc)
        out.write((crc & 0xFFFFFFFF).to_bytes(4, "little"))
        out.write(((len(head) + size + len(tail)) & 0xFFFFFFFF).to_bytes(4, "little"))
    return path


#: Run in a child process: import the archive argv[1] into workspace argv[2] with the
#: command, then print the exit status and the process's peak resident memory in kB
#: (VmHWM: ru_maxrss would report the parent's, a fork keeps it across the exec).
_MEASURED_IMPORT = """
import sys
from harnessmem.cli import main
try:
    main(["import", sys.argv[1], "-w", sys.argv[2]])
    status = 0
except SystemExit as exit:
    status = exit.code
with open("/proc/self/status") as status_file:
    peak = next(line.split()[1] for line in status_file if line.startswith("VmHWM:"))
print("MEASURED", status, peak)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_tar_bomb_is_refused_without_unpacking_it(tmp_path: Path) -> None:
    """Issue 37 point 4: a 1 MB archive whose member unpacks to 1 GiB (honestly listed in
    its manifest, so only the limits can stop it) is refused from the member's header:
    the importing process peaks under 100 MB (it peaked at 1,057 MiB reading the member
    whole), and nothing is written."""
    gib = 1024**3
    listed = {"path": "memory/bomb.md", "size": gib, "sha256": "0" * 64}
    manifest = json.dumps({"format": transfer.FORMAT, "version": 1, "files": [listed]})
    archive = _bomb(tmp_path / "bomb.tar.gz", gib, manifest.encode())
    assert archive.stat().st_size < 2 * 1024 * 1024
    target = tmp_path / "target"
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED_IMPORT, str(archive), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    _, status, peak_kb = done.stdout.strip().splitlines()[-1].split()
    assert status == "4", done.stdout + done.stderr
    assert int(peak_kb) < 100 * 1024, f"peak {int(peak_kb) // 1024} MB"
    assert "transfer.max_import_ratio" in done.stderr
    assert done.stderr.count("error:") == 1
    assert not target.exists()


def test_an_archive_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    """The total limit is a setting (transfer.max_import_bytes): an honest archive that
    unpacks beyond it is refused, naming the setting; raised, it imports."""
    data = os.urandom(3 * 1024 * 1024)  # incompressible: the ratio stays under 2
    files = {"memory/notes.md": data}
    archive = _tar(
        tmp_path / "big.tar.gz",
        {"workspace/memory/notes.md": data, transfer.MANIFEST: _manifest(files)},
    )
    with pytest.raises(ArchiveError, match=r"over transfer\.max_import_bytes") as caught:
        transfer.read_archive(archive, limits=TransferSettings(max_import_bytes=1024 * 1024))
    assert "nothing was imported" in caught.value.message
    assert "HARNESSMEM_TRANSFER__MAX_IMPORT_BYTES" in (caught.value.hint or "")
    with harness_on(str(tmp_path / "small"), transfer={"max_import_bytes": 1024 * 1024}) as h:
        with pytest.raises(ArchiveError, match="max_import_bytes"):
            transfer.import_archive(h, archive)
        assert h.workspace.list("") == []
    refused = CliRunner().invoke(
        main,
        ["import", str(archive), "-w", str(tmp_path / "cli")],
        env={"HARNESSMEM_TRANSFER__MAX_IMPORT_BYTES": str(1024 * 1024)},
    )
    assert refused.exit_code == 4, refused.output
    assert "max_import_bytes (1.0 MiB)" in refused.output
    assert not (tmp_path / "cli").exists()
    with harness_on(str(tmp_path / "roomy")) as roomy:
        assert transfer.import_archive(roomy, archive).written == ["memory/notes.md"]
        assert roomy.workspace.read_bytes("memory/notes.md") == data


def test_a_member_larger_than_its_manifest_entry_is_refused(tmp_path: Path) -> None:
    """A member whose header says more bytes than the manifest is refused on the sizes."""
    listed = {"memory/a.md": b"- a\n"}
    archive = _tar(
        tmp_path / "lying.tar.gz",
        {"workspace/memory/a.md": b"- a\n" * 1000, transfer.MANIFEST: _manifest(listed)},
    )
    with pytest.raises(ArchiveError, match="does not match its manifest entry"):
        transfer.read_archive(archive)


def _plain(files: dict[str, bytes]) -> dict[str, bytes]:
    """The members of an archive holding ``files``, with a manifest that lists them."""
    return {**{f"workspace/{rel}": data for rel, data in files.items()},
            transfer.MANIFEST: _manifest(files)}  # fmt: skip


LONG = "x" * 300


@pytest.mark.parametrize(
    ("files", "phrase"),
    [
        (
            {"memory/2026-01-01.md": b"- a\n", "memory/2026-01-01.md/notes.md": b"- b\n"},
            "is a file, and the archive also puts",
        ),
        ({"memory/2026-01-01.md": b"- a\n", f"memory/{LONG}.md": b"- b\n"}, "bytes long"),
        ({"memory/2026-01-01.md": b"- a\n", f"{LONG}/notes.md": b"- b\n"}, "bytes long"),
        # 230 bytes: a name the file system holds, but not the temp name written first
        ({"memory/2026-01-01.md": b"- a\n", f"memory/{'y' * 227}.md": b"- b\n"}, "bytes long"),
    ],
    ids=["file-then-child", "long-file-name", "long-folder-name", "long-with-temp-name"],
)
def test_an_archive_a_rerun_could_not_finish_is_refused_before_writing(
    tmp_path: Path, files: dict[str, bytes], phrase: str
) -> None:
    """Issue 37 point 5: a file and a path under it, or a part too long for the file
    system, failed half-way (the files before it written) and the same on every rerun.
    Now every path is checked against the workspace's rules and the store's limits first:
    one error, and nothing written, every time."""
    archive = _tar(tmp_path / "crafted.tar.gz", _plain(files))
    target = tmp_path / "target"
    for _ in range(2):
        result = invoke("import", str(archive), "-w", str(target))
        assert result.exit_code == 4, result.output
        assert phrase in result.output
        assert result.output.count("error:") == 1
        # The file before the bad one in the order of writing is not written either.
        assert not (target / "memory" / "2026-01-01.md").exists()
        assert not (target / "MEMORY.md").exists()


def test_an_archive_that_clashes_with_the_workspace_s_folders_is_refused(tmp_path: Path) -> None:
    """A path under a file the workspace holds, or a file where it has a folder: refused
    before anything is written."""
    with harness_on(str(tmp_path / "ws")) as harness:
        harness.workspace.write_text("notes", "- a file\n")
        harness.workspace.write_text("memory/2026-01-01.md/kept.md", "- under a folder\n")
        before = files_of(harness.workspace)
        for files in (
            {"memory/2026-01-02.md": b"- c\n", "notes/x.md": b"- d\n"},
            {"memory/2026-01-02.md": b"- c\n", "memory/2026-01-01.md": b"- e\n"},
        ):
            archive = _tar(tmp_path / "clash.tar.gz", _plain(files))
            with pytest.raises(ArchiveError, match="nothing was imported") as caught:
                transfer.import_archive(harness, archive)
            assert "workspace" in caught.value.message
            assert files_of(harness.workspace) == before


def test_each_store_refuses_the_names_it_cannot_hold(
    tmp_path: Path, s3_workspace_url: str, s3_storage_options: Any
) -> None:
    """The limits are the store's: a 300-byte file name is too long for a local folder but
    a fine S3 key; a 1,100-byte key is too long for S3. Refused before anything is written."""
    deep = "/".join(["d" * 99] * 11)  # 1,099 bytes in parts of 99
    wide = {"memory/2026-01-01.md": b"- a\n", f"memory/{LONG}.md": b"- b\n"}
    tall = {"memory/2026-01-01.md": b"- a\n", f"{deep}/notes.md": b"- c\n"}
    with harness_on(s3_workspace_url, s3_storage_options) as remote:
        written = transfer.import_archive(remote, _tar(tmp_path / "wide.tar.gz", _plain(wide)))
        assert written.written == sorted(wide)
        with pytest.raises(ArchiveError, match="S3 keys hold at most 1024"):
            transfer.import_archive(remote, _tar(tmp_path / "tall.tar.gz", _plain(tall)))
        assert listed(remote.workspace) == sorted(wide)
    with harness_on(str(tmp_path / "local")) as local:
        with pytest.raises(ArchiveError, match="bytes long"):
            transfer.import_archive(local, tmp_path / "wide.tar.gz")
        assert local.workspace.list("") == []
