"""Conformance suite for :class:`harnessmem.workspace.Workspace` on any store.

The contract of a :class:`harnessmem.workspace.WorkspaceStore`: a store passes when a
workspace on it does (its primitives are only ever used through a workspace).

Subclass :class:`WorkspaceSuite` in a test module (its name must start with ``Test``)
and override one fixture, ``workspace``, which receives the suite's ``clock`` and must
return an empty workspace opened with ``clock=clock``::

    class TestMyStoreWorkspace(WorkspaceSuite):
        @pytest.fixture
        def workspace(self, clock):
            return Workspace.open("mystore://bucket/test-ws", {...}, clock=clock)

Tests that a store cannot run (symlinks exist only on local disks) skip with the reason.

The tests live by concern: paths in :mod:`~harnessmem.testing.workspace_paths`, leases in
:mod:`~harnessmem.testing.workspace_leases`; this module gathers them and adds the tests of
files.
"""

from __future__ import annotations

import threading
from itertools import pairwise
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.errors import PathNotAllowed
from harnessmem.testing._workspace_base import FUZZ
from harnessmem.testing.clock import FakeClock
from harnessmem.testing.workspace_leases import WorkspaceLeaseTests
from harnessmem.testing.workspace_paths import WorkspacePathTests
from harnessmem.workspace import ORIGINALS_DIR, Workspace
from harnessmem.workspace.store import store_class

__all__ = ["FakeClock", "WorkspaceSuite"]

#: Lone surrogates, which strategies for text leave out (``str`` can hold them).
_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


class WorkspaceSuite(WorkspacePathTests, WorkspaceLeaseTests):
    """The contract every workspace store meets; override the ``workspace`` fixture."""

    __harnessmem_suite__: ClassVar[bool] = True

    # Files.
    def test_roundtrip_bytes_and_text(self, workspace: Workspace) -> None:
        """Bytes and UTF-8 text come back exactly, nested folders are created.

        If this fails: check write_bytes/read_bytes of the store and UTF-8 en/decoding.
        """
        blob = bytes(range(256)) * 3
        workspace.write_bytes("a/b/c/blob.bin", blob)
        workspace.write_text("memory/2026-11-30.md", "## Flush — 12:00 · 日本語 🧠\n- ok\n")
        workspace.write_text("empty.md", "")
        assert workspace.read_bytes("a/b/c/blob.bin") == blob
        assert workspace.read_text("memory/2026-11-30.md") == "## Flush — 12:00 · 日本語 🧠\n- ok\n"
        assert workspace.read_text("empty.md") == ""

    def test_text_writes_store_what_utf8_can_hold(self, workspace: Workspace) -> None:
        """A lone surrogate never makes a text write fail: it is stored as U+FFFD.

        ``os.listdir`` gives ``report-\\udcff.txt`` for a file name that is not UTF-8, and
        a JSON ``"\\ud800"`` escape gives a lone surrogate too; a surrogate pair is stored
        as the character it encodes; everything else is kept. If this fails: a ``*_text``
        write encodes with plain ``str.encode("utf-8")`` instead of the shared encoder.
        """
        name = "report-\udcff.txt"
        workspace.write_text("w.md", f"{name} \ud83d\ude00 ok")
        workspace.append_text("a.md", f"- {name}\n")
        workspace.append_text("a.md", "- \ud800 next\n")
        assert workspace.create_text("c.md", name)
        workspace.update_text("u.md", lambda text: text + name, append=True)
        assert workspace.read_bytes("w.md") == "report-\ufffd.txt 😀 ok".encode()
        assert workspace.read_text("a.md") == "- report-\ufffd.txt\n- \ufffd next\n"
        assert workspace.read_text("c.md") == workspace.read_text("u.md") == "report-\ufffd.txt"

    @given(text=st.text(st.characters() | _SURROGATES, max_size=40))
    @settings(FUZZ, max_examples=40)
    def test_any_str_can_be_written(self, workspace: Workspace, text: str) -> None:
        """Every ``str`` (surrogates included) is written; what UTF-8 can hold is kept.

        If this fails: see test_text_writes_store_what_utf8_can_hold.
        """
        workspace.write_text("any.md", text)
        stored = workspace.read_text("any.md")
        assert not any("\ud800" <= c <= "\udfff" for c in stored)
        paired = any(
            "\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff" for a, b in pairwise(text)
        )
        if not paired:  # each surrogate became one U+FFFD, the rest is as it was
            assert stored == "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)

    def test_text_that_is_not_utf8_is_read_tolerantly(self, workspace: Workspace) -> None:
        """Latin-1 bytes read as U+FFFD, UTF-16/32 and UTF-8 files with a BOM as their text.

        If this fails: read_text / read_snapshot decode strictly as UTF-8 (one byte from
        another editor then disables every reader of the file).
        """
        text = "# Memory\n- Lives in São Paulo\n"
        workspace.write_bytes("latin.md", text.encode("latin-1"))
        encoded = {
            "utf-16": text.encode("utf-16"),  # the platform's order, with its BOM
            "utf-16-be": b"\xfe\xff" + text.encode("utf-16-be"),
            "utf-32": text.encode("utf-32"),
            "utf-8-sig": text.encode("utf-8-sig"),
        }
        for codec, data in encoded.items():
            workspace.write_bytes(f"{codec}.md", data)
            assert workspace.read_text(f"{codec}.md") == text, codec
        assert workspace.read_text("latin.md") == text.replace("ã", "\ufffd")
        snapshot = workspace.read_snapshot("latin.md")
        assert snapshot.text == text.replace("ã", "\ufffd")
        assert snapshot.original == text.encode("latin-1")
        workspace.write_text("clean.md", text)
        assert workspace.read_snapshot("clean.md").original is None

    def test_rewriting_a_file_that_is_not_utf8_keeps_its_bytes(self, workspace: Workspace) -> None:
        """The first update of a non-UTF-8 file copies its bytes to memory/.history/ first.

        If this fails: update_text replaced the user's bytes (U+FFFD in place of the
        Latin-1 letter) with no copy of the original left anywhere.
        """
        original = "- S\xe3o Paulo\n".encode("latin-1")
        for path, append in (("MEMORY.md", True), ("memory/2026-11-30.md", False)):
            workspace.write_bytes(path, original)
            workspace.update_text(path, lambda text: text + "- new\n", append=append)
            assert workspace.read_text(path) == "- S\ufffdo Paulo\n- new\n"
        kept = workspace.list(ORIGINALS_DIR)
        assert len(kept) == 2, kept
        assert all(workspace.read_bytes(path) == original for path in kept)
        assert any("MEMORY.md" in path for path in kept)
        # From then on the file is UTF-8: no further copy.
        workspace.update_text("MEMORY.md", lambda text: text + "- more\n", append=True)
        assert len(workspace.list(ORIGINALS_DIR)) == 2

    def test_read_range(self, workspace: Workspace) -> None:
        """read_range gives the bytes asked for, fewer at the end, none past it.

        If this fails: the store's ranged read (a Range GET on S3) is off by one.
        """
        workspace.write_bytes("r.bin", bytes(range(100)))
        assert workspace.read_range("r.bin", 0, 10) == bytes(range(10))
        assert workspace.read_range("r.bin", 95, 200) == bytes(range(95, 100))
        assert workspace.read_range("r.bin", 100, 110) == b""
        assert workspace.read_range("r.bin", 5, 5) == b""
        with pytest.raises(FileNotFoundError):
            workspace.read_range("missing.bin", 0, 10)

    def test_overwrite_is_atomic(self, workspace: Workspace) -> None:
        """A reader racing with overwrites sees the old or the new content, never a mix.

        If this fails: writes are not temp + rename (local) or a single PUT (object stores).
        """
        old, new = b"A" * 200_000, b"B" * 100_000
        workspace.write_bytes("state.json", old)
        seen: set[bytes] = set()
        done = threading.Event()

        def read_until_done() -> None:
            while not done.is_set():
                seen.add(workspace.read_bytes("state.json"))

        reader = threading.Thread(target=read_until_done)
        reader.start()
        try:
            for i in range(20):
                workspace.write_bytes("state.json", new if i % 2 == 0 else old)
        finally:
            done.set()
            reader.join()
        assert seen <= {old, new}
        assert workspace.read_bytes("state.json") == old
        assert workspace.list() == ["state.json"], "temp files were left behind"

    def test_append_keeps_order_and_creates(self, workspace: Workspace) -> None:
        """Appends create the file and keep their order.

        If this fails: check append_text on a missing file and the read-modify-write path.
        """
        for i in range(5):
            workspace.append_text("memory/log.md", f"- entry {i}\n")
        expected = "".join(f"- entry {i}\n" for i in range(5))
        assert workspace.read_text("memory/log.md") == expected

    def test_concurrent_appends_from_threads(self, workspace: Workspace) -> None:
        """8 threads x 25 appends: all 200 lines present once, intact, per-thread in order.

        If this fails: appends are not serialised (lock, conditional PUT or lease) or a
        conditional write that lost its race is not retried.
        """
        threads, per_thread = 8, 25

        def worker(t: int) -> None:
            for i in range(per_thread):
                workspace.append_text("shared.log", f"thread-{t}-entry-{i:03d}-{'x' * 40}\n")

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        lines = workspace.read_text("shared.log").splitlines()
        expected = {
            f"thread-{t}-entry-{i:03d}-{'x' * 40}"
            for t in range(threads)
            for i in range(per_thread)
        }
        assert len(lines) == threads * per_thread
        assert set(lines) == expected
        for t in range(threads):
            mine = [line for line in lines if line.startswith(f"thread-{t}-")]
            assert mine == sorted(mine), f"thread {t}'s appends were reordered"

    def test_update_text_is_a_compare_and_swap(self, workspace: Workspace, clock: Any) -> None:
        """update_text never loses a concurrent update, and redoes one that was overtaken.

        If this fails: the conditional write (put_if) does not refuse a stale version, or
        update_text does not read again and call ``change`` again after a refusal.
        """
        other = self._reopen(workspace, clock)
        stale = workspace.read_snapshot("counter.txt")
        assert (stale.text, stale.version) == ("", None)
        other.write_text("counter.txt", "1")  # another replica writes after our read
        calls: list[str] = []

        def increment(text: str) -> str:
            calls.append(text)
            return str(int(text or "0") + 1)

        written = workspace.update_text("counter.txt", increment, current=stale)
        assert written is not None
        assert calls == ["", "1"], "the overtaken write was redone on the newer text"
        assert workspace.read_text("counter.txt") == written.text == "2"
        assert workspace.update_text("counter.txt", lambda text: None) is None

        def add_one(_: int) -> None:
            for _ in range(10):
                workspace.update_text("counter.txt", lambda text: str(int(text) + 1))

        pool = [threading.Thread(target=add_one, args=(i,)) for i in range(4)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert workspace.read_text("counter.txt") == "42"

    def test_create_text_only_when_absent(self, workspace: Workspace, clock: Any) -> None:
        """create_text writes a missing file once; every later create is refused.

        If this fails: the store's exclusive create (``If-None-Match: *``) is not honoured.
        """
        assert workspace.create_text("results/a.txt", "first")
        assert not self._reopen(workspace, clock).create_text("results/a.txt", "second")
        assert workspace.read_text("results/a.txt") == "first"

    def test_scan_agrees_with_list_and_info(self, workspace: Workspace) -> None:
        """scan() lists what list() does, each with what info() says about it.

        If this fails: the listing's sizes, times or change tokens disagree with info().
        """
        for path in ("MEMORY.md", "memory/a.md", "memory/archive/b.md"):
            workspace.write_text(path, path * 3)
        scanned = workspace.scan("memory")
        assert [f.path for f in scanned] == workspace.list("memory")
        for found in scanned:
            info = workspace.info(found.path)
            assert (found.size, found.etag_or_hash) == (info.size, info.etag_or_hash)
        assert [f.path for f in workspace.scan("memory", recursive=False)] == ["memory/a.md"]
        assert workspace.scan("nothing/here") == []

    def test_versions_are_the_change_tokens_the_store_claims(self, workspace: Workspace) -> None:
        """A store with ``versions_are_tokens`` gives, with each read or written version,
        the change token info() reports, so an index following a write needs no request.

        If this fails: read_versioned or put_if returns versions that are not info()'s
        tokens (set ``versions_are_tokens = False``, or return the storage's own ETag).
        """
        if not type(workspace.store).versions_are_tokens:
            pytest.skip("the store does not declare versions_are_tokens")
        workspace.write_text("v.md", "one")
        read = workspace.read_snapshot("v.md")
        assert read.token == workspace.info("v.md").etag_or_hash
        written = workspace.update_text("v.md", lambda text: text + " two", current=read)
        assert written is not None
        assert written.token == workspace.info("v.md").etag_or_hash != read.token

    def test_the_url_finds_the_same_store_again(self, workspace: Workspace) -> None:
        """Opening ``workspace.url`` again (as another process or replica does) gets the
        same store class, one that claims the URL's protocol.

        If this fails: the store's ``url`` names a protocol that none of its entry points
        in ``harnessmem.storage`` registers, or its ``protocols`` leaves that one out.
        """
        assert store_class(workspace.url) is type(workspace.store)

    def test_missing_file_raises_file_not_found(self, workspace: Workspace) -> None:
        """Reading, inspecting or moving a missing file raises FileNotFoundError naming it.

        If this fails: the store's not-found error was wrapped as WorkspaceError or swallowed.
        """
        for call in (
            lambda: workspace.read_bytes("nope/missing.md"),
            lambda: workspace.read_text("nope/missing.md"),
            lambda: workspace.info("nope/missing.md"),
            lambda: workspace.move("nope/missing.md", "elsewhere.md"),
            lambda: workspace.delete("nope/missing.md", missing_ok=False),
        ):
            with pytest.raises(FileNotFoundError, match=r"missing\.md"):
                call()
        workspace.delete("nope/missing.md")  # missing_ok by default
        assert not workspace.exists("nope/missing.md")
        assert not workspace.exists("elsewhere.md")

    def test_list_nested_prefix_files_only(self, workspace: Workspace) -> None:
        """list() gives sorted relative file paths; prefix is a folder; no dirs, no locks.

        If this fails: check directory entries/markers, prefix matching ("memory" must not
        match "memoryx/"), recursion depth and that .locks/ is hidden.
        """
        for path in ("MEMORY.md", "memory/b.md", "memory/a.md", "memory/archive/old.md"):
            workspace.write_text(path, path)
        workspace.write_text("memoryx/z.md", "z")
        with workspace.lock("maintenance"):
            workspace.append_text("memory/a.md", "more")
            assert workspace.list() == [
                "MEMORY.md",
                "memory/a.md",
                "memory/archive/old.md",
                "memory/b.md",
                "memoryx/z.md",
            ]
        assert workspace.list("memory") == workspace.list("memory/")
        assert workspace.list("memory") == ["memory/a.md", "memory/archive/old.md", "memory/b.md"]
        assert workspace.list("memory", recursive=False) == ["memory/a.md", "memory/b.md"]
        assert workspace.list(recursive=False) == ["MEMORY.md"]
        assert workspace.list("does/not/exist") == []
        with pytest.raises(PathNotAllowed):
            workspace.list("../")

    def test_exists_info_delete_move(self, workspace: Workspace) -> None:
        """exists/info/delete/move agree with each other; move replaces its target.

        If this fails: check which of the four disagrees with what was written.
        """
        workspace.write_text("a.md", "12345")
        first = workspace.info("a.md")
        assert (first.path, first.size) == ("a.md", 5)
        assert first.modified is None or first.modified > 0
        assert first.etag_or_hash
        workspace.write_text("a.md", "67890")
        assert workspace.info("a.md").etag_or_hash != first.etag_or_hash
        workspace.write_text("b.md", "old target")
        workspace.move("a.md", "b.md")
        assert not workspace.exists("a.md")
        assert workspace.read_text("b.md") == "67890"
        workspace.move("b.md", "deep/er/c.md")
        assert workspace.list() == ["deep/er/c.md"]
        workspace.delete("deep/er/c.md")
        assert not workspace.exists("deep/er/c.md")
        assert workspace.list() == []
        assert not workspace.exists("deep/er"), "exists() is for files, not folders"
