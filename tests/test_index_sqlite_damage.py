"""A damaged ``sqlite`` index: damage SQLite's quick check misses is found, and healed for real.

A torn page inside an FTS5 shadow table (``memory_fts_data``) passes ``PRAGMA quick_check``;
these tests write such pages (garbage, flipped bits, zeros) and check that the next
process finds the damage, deletes the file, rebuilds it from the workspace files, says so
once, and that searching (the ``memory_search`` tool included) works afterwards.
"""

from __future__ import annotations

import logging
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.sqlite import SQLiteIndex

OPTIONS: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
FACTS = 40  # under the 50 hits a search returns at most
# FTS5's reserved blocks in ``*_data``: 1 the averages (row count, column sizes),
# 10 the structure record (which segments exist); segment blocks have larger ids.
_AVERAGES, _STRUCTURE = 1, 10


def _memory(n: int = FACTS) -> str:
    return "".join(f"- the lighthouse keeper {i} drinks tea at dawn\n" for i in range(n))


def _blocks(db: sqlite3.Connection) -> list[tuple[int, bytes]]:
    return db.execute("SELECT id, block FROM memory_fts_data ORDER BY id").fetchall()


def _garbage_in_segments(db: sqlite3.Connection) -> None:
    rng = random.Random(17)
    for block_id, block in _blocks(db):
        if block_id > _STRUCTURE:
            db.execute(
                "UPDATE memory_fts_data SET block = ? WHERE id = ?",
                (rng.randbytes(len(block)), block_id),
            )


def _flipped_bytes_in_segments(db: sqlite3.Connection) -> None:
    for block_id, block in _blocks(db):
        if block_id > _STRUCTURE:
            torn = bytearray(block)
            for k in range(4, len(torn), 7):
                torn[k] ^= 0x5A
            db.execute("UPDATE memory_fts_data SET block = ? WHERE id = ?", (bytes(torn), block_id))


def _zeroed(block_id: int) -> Callable[[sqlite3.Connection], None]:
    def damage(db: sqlite3.Connection) -> None:
        (block,) = db.execute(
            "SELECT block FROM memory_fts_data WHERE id = ?", (block_id,)
        ).fetchone()
        db.execute(
            "UPDATE memory_fts_data SET block = ? WHERE id = ?", (bytes(len(block)), block_id)
        )

    return damage


DAMAGE = {
    "garbage-segments": _garbage_in_segments,
    "flipped-bytes": _flipped_bytes_in_segments,
    # The variant that answered "No memories match", then IntegrityError after a save.
    "zeroed-structure": _zeroed(_STRUCTURE),
    "zeroed-averages": _zeroed(_AVERAGES),
}


def _damage(db_path: Path, how: str) -> None:
    """Damage a closed index the way a torn page would, behind SQLite's back."""
    with closing(sqlite3.connect(db_path)) as db, db:
        DAMAGE[how](db)
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",), "SQLite sees nothing"


def _found_damaged(db_path: Path) -> bool:
    """Whether a new index opened on a copy of ``db_path`` (and its WAL) finds it damaged
    and starts it anew; the file itself is left as it is."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / db_path.name
        for suffix in ("", "-wal"):
            if Path(f"{db_path}{suffix}").exists():
                shutil.copyfile(f"{db_path}{suffix}", f"{copy}{suffix}")
        with closing(SQLiteIndex.create({}, index_path=copy)) as index:
            return index.resets > 0


def _build(root: Path) -> Path:
    with MemoryHarness.open(root, **OPTIONS) as harness:
        harness.workspace.write_text("MEMORY.md", _memory())
        assert len(harness.search("lighthouse keeper", limit=FACTS)) == FACTS
        return harness.kernel.index_path


def _damage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "was corrupt" in r.getMessage()]


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_fts5_damage_is_found_at_open_and_rebuilt_from_the_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """A new harness finds it, rebuilds from MEMORY.md, searches fully, and warns once.

    If this fails with DatabaseError, IntegrityError or TypeError from a search, the damage
    went unnoticed at open (see ``_sqlite_engine.index_damage``); with fewer hits than
    FACTS, the index was emptied but not re-synced from the workspace files.
    """
    db_path = _build(tmp_path / "ws")
    _damage(db_path, how)
    assert _found_damaged(db_path)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="harnessmem.index")
    for _ in range(2):  # the second open finds a sound index: no second warning
        with MemoryHarness.open(tmp_path / "ws", **OPTIONS) as harness:
            assert len(harness.search("lighthouse keeper", limit=FACTS)) == FACTS
            answer = harness.session("s").call_tool("memory_search", {"query": "keeper 7"})
            assert "MEMORY.md" in answer
            assert "keeper 7 drinks" in answer
            harness.save("- the lighthouse has a red door")
            assert [h.path for h in harness.search("red door")] == ["MEMORY.md"]
    (warning,) = _damage_warnings(caplog)
    assert warning.startswith(f"index {db_path} was corrupt (memory_fts")
    assert "deleted it, it is rebuilt from the workspace files" in warning
    caplog.clear()
    assert not _found_damaged(db_path)
    assert not _damage_warnings(caplog)


_SEARCHER = textwrap.dedent(
    """
    import logging, sys
    from harnessmem import MemoryHarness

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    options = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    with MemoryHarness.open(sys.argv[1], **options) as harness:
        print(len(harness.search("lighthouse keeper", limit=50)))
        print(harness.session("s").call_tool("memory_search", {"query": "keeper 37"}))
    """
)


def test_each_new_process_searches_a_healed_index(tmp_path: Path) -> None:
    """Real processes, as reported: the first heals and says so, the second just works."""
    db_path = _build(tmp_path / "ws")
    _damage(db_path, "garbage-segments")
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", _SEARCHER, str(tmp_path / "ws")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done)
    for done in outputs:
        assert done.stdout.splitlines()[0] == str(FACTS)
        assert "keeper 37 drinks" in done.stdout
    assert outputs[0].stderr.count("was corrupt") == 1
    assert "was corrupt" not in outputs[1].stderr


def test_damage_while_open_is_found_by_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Zeroed structure under a running harness: the save's IntegrityError is checked, the
    index rebuilt, the save kept, and every fact found again."""
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    with MemoryHarness.open(tmp_path / "ws", **OPTIONS) as harness:
        harness.workspace.write_text("MEMORY.md", _memory())
        assert len(harness.search("lighthouse keeper", limit=FACTS)) == FACTS
        with closing(sqlite3.connect(harness.kernel.index_path)) as db, db:
            _zeroed(_STRUCTURE)(db)
        harness.save("- the lighthouse has a red door")
        assert [h.path for h in harness.search("red door")] == ["MEMORY.md"]
        assert len(harness.search("lighthouse keeper", limit=FACTS)) == FACTS
    assert len(_damage_warnings(caplog)) == 1


def test_a_constraint_failure_on_a_sound_index_is_raised_not_healed(tmp_path: Path) -> None:
    """An IntegrityError only hints at damage: a sound file is kept and the error raised."""
    db_path = tmp_path / "memory_index.db"
    index = SQLiteIndex.create({}, index_path=db_path)
    try:
        index.sync_file("MEMORY.md", "h1", [])
        before = index.resets
        # A constraint that fails every new file, as a UNIQUE conflict would.
        with closing(sqlite3.connect(db_path)) as db, db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON files BEGIN "
                "SELECT RAISE(ABORT, 'UNIQUE constraint failed: files.file_no'); END"
            )
        with pytest.raises(Exception, match=r"files\.file_no") as info:
            index.sync_file("memory/2026-01-01.md", "h2", [])
        assert isinstance(getattr(info.value, "orig", info.value), sqlite3.IntegrityError)
        assert index.resets == before
        assert list(index.files()) == ["MEMORY.md"], "the file is the one it was"
    finally:
        index.close()


def test_a_busy_index_is_not_taken_for_a_damaged_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Damage met by a search is confirmed with the write lock; when another writer holds
    it, the search raises (and nothing is deleted) instead of reporting damage. Once the
    lock is free, the next search heals it."""
    db_path = _build(tmp_path / "ws")
    _damage(db_path, "garbage-segments")
    options = {**OPTIONS, "index": {"options": {"check_on_open": False, "busy_timeout": 0}}}
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        assert harness.reindex().indexed == 0  # opens the index; no segment is read
        damaged = db_path.read_bytes()
        with closing(sqlite3.connect(db_path, isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")
            with pytest.raises(Exception, match="locked") as info:
                harness.search("lighthouse keeper", limit=FACTS)
            assert "cannot open" not in str(info.value), "the search ran, and met the damage"
            assert db_path.read_bytes() == damaged
            assert not _damage_warnings(caplog)
            writer.execute("ROLLBACK")
        assert len(harness.search("lighthouse keeper", limit=FACTS)) == FACTS
    assert len(_damage_warnings(caplog)) == 1


def test_without_the_open_check_the_search_error_heals_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``check_on_open = false``: the first search meets "malformed", the checks confirm it,
    and that same search answers from the rebuilt index."""
    db_path = _build(tmp_path / "ws")
    _damage(db_path, "garbage-segments")
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    options = {**OPTIONS, "index": {"options": {"check_on_open": False}}}
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        assert not _damage_warnings(caplog), "nothing looked for at open"
        assert len(harness.search("lighthouse keeper", limit=50)) == FACTS
    (warning,) = _damage_warnings(caplog)
    assert "FTS5 integrity-check" in warning
