"""The ``sqlite`` index backend: the conformance suite, plus what only a file database has."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import FileUpdate, IndexBackend, IndexEntry
from harnessmem.backends.sqlite import FILE_SHIFT, SCHEMA_VERSION, SQLiteIndex
from harnessmem.backends.sqlite import _schema as _sqlite_schema
from harnessmem.backends.sqlite import _writer as _sqlite_writer
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem.plugins import index_registry
from harnessmem.testing import IndexBackendSuite
from harnessmem.testing.index_suite import MEMORY, sync_text


class TestSQLiteIndexConformance(IndexBackendSuite):
    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[IndexBackend]:
        backend = SQLiteIndex.create({}, index_path=tmp_path / "memory_index.db")
        yield backend
        backend.close()

    def damage(self, index: IndexBackend) -> None:
        """Garbage in the FTS5 segments of the memory table, as a torn write leaves it."""
        assert isinstance(index, SQLiteIndex)
        with closing(sqlite3.connect(index.path, isolation_level=None)) as db:
            for block_id, block in db.execute("SELECT id, block FROM memory_fts_data").fetchall():
                if block_id > 10:  # past FTS5's averages (1) and structure (10) records
                    db.execute(
                        "UPDATE memory_fts_data SET block = ? WHERE id = ?",
                        (bytes(b ^ 0x5A for b in block), block_id),
                    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory_index.db"


def _open(path: Path, **options: object) -> SQLiteIndex:
    return SQLiteIndex.create(options, index_path=path)


def test_registered_as_the_sqlite_entry_point() -> None:
    assert index_registry().load("sqlite") is SQLiteIndex


def test_options_are_validated_with_their_dotted_path(db_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"index\.options\.max_terms"):
        _open(db_path, max_terms=0)
    with pytest.raises(ConfigError, match=r"index\.options\.nope"):
        _open(db_path, nope=1)
    with pytest.raises(ConfigError, match="needs a file"):
        SQLiteIndex.create({})


def test_missing_database_is_built_with_one_log_line(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="harnessmem.index")
    index = _open(db_path)
    index.close()
    assert [r.getMessage() for r in caplog.records] == [f"index {db_path} was missing; building it"]
    caplog.clear()
    _open(db_path).close()
    assert caplog.records == [], "an existing database at the right version is silent"


def test_other_schema_version_is_rebuilt(db_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    index = _open(db_path)
    sync_text(index, "MEMORY.md", MEMORY)
    index.close()
    with closing(sqlite3.connect(db_path)) as db, db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    caplog.set_level(logging.INFO, logger="harnessmem.index")
    index = _open(db_path)
    try:
        messages = [r.getMessage() for r in caplog.records]
        assert messages == [
            f"index {db_path} had schema version 0, expected {SCHEMA_VERSION}; rebuilt it"
        ]
        assert index.resets == 1
        assert index.files() == {}, "the harness re-syncs every file after a reset"
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.search("Alice")
    finally:
        index.close()


def test_a_foreign_database_is_replaced(db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as db, db:
        db.execute("CREATE TABLE unrelated(x)")
    index = _open(db_path)
    try:
        assert index.resets == 1
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.search("Alice")
    finally:
        index.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated-header"])
def test_corrupt_database_is_deleted_and_rebuilt(
    db_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    index = _open(db_path)
    sync_text(index, "MEMORY.md", MEMORY)
    index.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    if damage == "garbage":
        db_path.write_bytes(b"this is not a database at all " * 200)
    else:
        data = bytearray(db_path.read_bytes())
        data[:16] = b"not sqlite hdr!!"
        db_path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    index = _open(db_path)
    try:
        (record,) = caplog.records
        assert record.getMessage().startswith(f"index {db_path} was corrupt")
        assert "deleted it, it is rebuilt from the workspace files" in record.getMessage()
        assert index.resets == 1
        sync_text(index, "MEMORY.md", MEMORY)
        assert [h.path for h in index.search("Alice")] == ["MEMORY.md"]
    finally:
        index.close()


def test_database_deleted_while_open_is_recreated(db_path: Path) -> None:
    index = _open(db_path)
    try:
        sync_text(index, "MEMORY.md", MEMORY)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        assert index.search("Alice") == [], "a new, empty database: nothing to find yet"
        assert index.resets == 1
        assert db_path.exists()
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.search("Alice")
    finally:
        index.close()


def test_wal_journal_and_busy_timeout(db_path: Path) -> None:
    """Every connection the index takes from its pool (seen through SQLAlchemy's pool
    events) is in WAL mode with the busy timeout asked for."""
    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    seen: list[tuple[Any, ...]] = []

    def checkout(db: Any, _record: Any, _proxy: Any) -> None:
        pragmas = ("journal_mode", "busy_timeout", "page_size", "wal_autocheckpoint")
        seen.append(tuple(db.execute(f"PRAGMA {name}").fetchone()[0] for name in pragmas))

    event.listen(Pool, "checkout", checkout)
    try:
        with closing(_open(db_path, busy_timeout=3)) as index:
            sync_text(index, "MEMORY.md", MEMORY)
            assert index.search("Alice")
    finally:
        event.remove(Pool, "checkout", checkout)
    assert seen
    # 16 KB pages, and a checkpoint every 4 MB of WAL as with SQLite's defaults.
    assert set(seen) == {("wal", 3000, 16_384, (4 << 20) // 16_384)}


def test_an_append_writes_only_the_new_entries(db_path: Path) -> None:
    """Unchanged entries keep their rows: a daily-log append costs the new bullets."""
    index = _open(db_path)
    try:
        text = "".join(f"- fact {i}\n" for i in range(5))
        sync_text(index, "memory/2026-01-01.md", text)

        def rowids(query: str) -> list[int]:
            """The ids of the entries whose content the full-text table holds ``query`` for
            (rowid = entry id)."""
            found = db.execute(
                "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid",
                (f"content : {query}",),
            )
            return [row[0] for row in found]

        with closing(sqlite3.connect(db_path)) as db:
            (number,) = db.execute("SELECT file_no FROM files").fetchone()
            before = {i: rowids(str(i)) for i in range(5)}
            sync_text(index, "memory/2026-01-01.md", text + "- fact 5\n")
            after = {i: rowids(str(i)) for i in range(6)}
            assert len(rowids("fact")) == 6
        assert {i: after[i] for i in range(5)} == before, "each old entry kept its id"
        (new,) = after[5]
        assert new > max(ids[0] for ids in before.values())
        assert {ids[0] >> FILE_SHIFT for ids in after.values()} == {number}
    finally:
        index.close()


def test_reordered_entries_keep_rows_and_update_lines(db_path: Path) -> None:
    index = _open(db_path)
    try:
        sync_text(index, "MEMORY.md", "- alpha one\n- beta two\n")
        sync_text(index, "MEMORY.md", "- beta two\n\n- alpha one\n- gamma three\n")
        assert [h.start_line for h in index.search("alpha")] == [3]
        assert [h.start_line for h in index.search("beta")] == [1]
        assert [h.start_line for h in index.search("gamma")] == [4]
        assert index.stats().entries == 3
    finally:
        index.close()


def test_a_file_moving_between_sources_leaves_no_trace(db_path: Path) -> None:
    index = _open(db_path)
    try:
        sync_text(index, "x.md", "- platypus\n")
        index.sync_file("x.md", "other-hash", [], source="sessions")
        assert index.search("platypus") == []
        assert index.search("platypus", source="sessions") == []
    finally:
        index.close()


_SOURCES_TEXT = r"expected one of \('memory', 'sessions'\)"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda i: i.search("kyoto", source="notes"),
            ValueError,
            rf"^unknown index source 'notes'; {_SOURCES_TEXT}$",
        ),
        (
            lambda i: i.search("kyoto", limit=0, source="notes"),
            ValueError,
            "unknown index source 'notes'",
        ),
        (
            lambda i: i.search("kyoto", mode="fuzzy"),
            ValueError,
            r"^unknown search mode 'fuzzy'; expected 'any', 'all' or 'phrase'$",
        ),
        (lambda i: i.search(b"kyoto"), TypeError, r"^a query is a str, got bytes$"),
        (
            lambda i: i.sync_files([FileUpdate("a.md", "h", [], source="notes")]),
            ValueError,
            rf"^unknown index source 'notes'; {_SOURCES_TEXT}$",
        ),
    ],
    ids=["source", "source-before-limit", "mode", "query-type", "sync-source"],
)
def test_bad_arguments_are_refused(
    db_path: Path, call: Callable[[SQLiteIndex], object], error: type[Exception], message: str
) -> None:
    """The checks IndexBackend.search and sync_files make for every backend."""
    with closing(_open(db_path)) as index:
        with pytest.raises(error, match=message):
            call(index)
        assert index.files() == {}, "a refused sync writes nothing"


def test_a_limit_under_one_or_a_wordless_query_searches_nothing(db_path: Path) -> None:
    with closing(_open(db_path)) as index:
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.search("kyoto", limit=0) == []
        assert index.search("kyoto", limit=-5) == []
        assert index.search(None, limit=0) == [], "the query is not read"  # type: ignore[arg-type]
        assert index.search("?! ...", mode="phrase") == []
        sync_text(
            index, "memory/2026-01-01.md", "- Bo took the Zorblat train\n- Zorblat in spring\n"
        )
        # Stop words are dropped, except in phrases: "the" must then be there too.
        assert len(index.search("the zorblat", mode="all")) == 2
        assert [h.content for h in index.search("the zorblat", mode="phrase")] == [
            "- Bo took the Zorblat train"
        ]


def test_the_entry_before_ranks_a_reply_but_never_matches_alone(db_path: Path) -> None:
    """A reply ranks by the words of the entry before it; those words alone find nothing."""
    text = (
        "## Chat\n- Ann: where did you go hiking last weekend?\n- Bo: a lovely trail by the sea\n"
        "\n## Other\n- Bo: the trail shoes are worn out\n"
        "\n## Notes\n- buy stamps\n- water plants\n- call the plumber\n- renew the passport\n"
    )
    index = _open(db_path)
    flat = _open(db_path.with_name("flat.db"), neighbor_weight=0)  # the column, no lift
    try:
        sync_text(index, "memory/2026-01-01.md", text)
        assert [h.content for h in index.search("trail hiking weekend", limit=3)] == [
            "- Ann: where did you go hiking last weekend?",
            "- Bo: a lovely trail by the sea",
            "- Bo: the trail shoes are worn out",
        ]
        sync_text(flat, "memory/2026-01-01.md", text)
        reply = {
            query: next(h.score for h in flat.search(query) if "lovely" in h.content)
            for query in ("trail", "trail hiking weekend")
        }
        assert reply["trail hiking weekend"] > reply["trail"], reply
        assert [h.content for h in index.search("hiking")] == [
            "- Ann: where did you go hiking last weekend?"
        ]
    finally:
        index.close()
        flat.close()


def _terms_of(db_path: Path) -> set[str]:
    with closing(sqlite3.connect(db_path)) as db:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, memory_fts, row)")
        return {row[0] for row in db.execute("SELECT term FROM temp.v WHERE doc > 0")}


def test_entries_whose_neighbour_changed_are_indexed_anew(db_path: Path) -> None:
    """An edit that changes an entry's neighbour re-indexes it: no stale word is left.

    A contentless FTS5 table deletes a row by the text it was given; an entry kept with
    its old neighbour text would leave that text's words in the index for good.
    """
    index = _open(db_path)
    try:
        sync_text(index, "memory/2026-01-01.md", "- alpha one\n- bravo two\n")
        sync_text(index, "memory/2026-01-01.md", "- alpha one\n- zulu three\n- bravo two\n")
        assert "zulu" in _terms_of(db_path)
        assert index.search("bravo zulu")[0].content == "- bravo two"
        sync_text(index, "memory/2026-01-01.md", "- bravo two\n- alpha one\n")
        assert _terms_of(db_path) == {"alpha", "on", "bravo", "two"}  # porter: one -> on
        index.remove("memory/2026-01-01.md")
        assert _terms_of(db_path) == set()
    finally:
        index.close()


def test_long_queries_are_capped_to_the_rarest_terms(db_path: Path) -> None:
    index = _open(db_path, max_terms=3)
    try:
        common = "".join(f"- the usual thing {i}\n" for i in range(40))
        sync_text(index, "MEMORY.md", common + "- a zebra crossing\n")
        hits = index.search("usual thing zebra crossing usual thing more words here", limit=1)
        assert hits[0].content == "- a zebra crossing"
    finally:
        index.close()


def test_neighbours_lift_a_match_next_to_other_matches(db_path: Path) -> None:
    """Two equally good matches: the one next to another match ranks first.

    "ordered pasta again" is indexed with the entry before it, so bm25 alone ranks it
    below "pasta recipe card" (a longer entry); the lift from its neighbour puts it
    first. The notes give "pasta" a weight (a word in half the entries has none).
    """
    notes = "".join(
        f"- {note}\n"
        for note in ("car needs new tyres", "call the plumber", "buy stamps", "water plants")
    )
    text = (
        "## Trip\n- pasta for dinner\n- ordered pasta again\n\n## Other\n- pasta recipe card\n"
        f"\n## Notes\n{notes}- renew the passport\n"
    )
    index = _open(db_path)
    flat = _open(db_path.with_name("flat.db"), neighbor_weight=0)
    try:
        for backend in (index, flat):
            sync_text(backend, "memory/2026-01-01.md", text)
        assert [h.content for h in index.search("pasta dinner")][:2] == [
            "- pasta for dinner",
            "- ordered pasta again",
        ]
        hits = index.search("pasta", limit=3)
        assert {h.content for h in hits} == {h.content for h in flat.search("pasta", limit=3)}
        assert all("pasta" in h.content for h in hits), "neighbours never add non-matches"
        assert hits[-1].content == "- pasta recipe card"
        assert flat.search("pasta", limit=3)[-1].content == "- ordered pasta again"
    finally:
        index.close()
        flat.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from harnessmem.backends.sqlite import SQLiteIndex
    from harnessmem.testing.index_suite import sync_text

    index = SQLiteIndex.create({{}}, index_path=sys.argv[1])
    me = sys.argv[2]
    for round_ in range(4):
        for n in range(12):
            text = "".join(f"- {{me}} note {{n}} round {{round_}} item {{i}}\\n" for i in range(8))
            sync_text(index, f"memory/{{me}}-{{n}}.md", text)
            # both processes also rewrite the same shared file
            sync_text(index, "MEMORY.md", f"- shared by {{me}} round {{round_}} {{n}}\\n")
    index.close()
    """
)


def test_two_processes_write_one_database(db_path: Path) -> None:
    """Two processes syncing at once (WAL + busy timeout): no error, nothing lost or doubled."""
    _open(db_path).close()
    script = _WRITER.format()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(db_path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "bravo")
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    index = _open(db_path)
    try:
        files = index.files()
        assert len(files) == 25
        assert index.stats().entries == 24 * 8 + 1
        for name in ("alpha", "bravo"):
            hits = index.search(f"{name} round 3 note 11", mode="all", limit=50)
            assert len(hits) == 8
        assert len(index.search("shared", limit=10)) == 1
    finally:
        index.close()


def test_an_unusable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HarnessMemError, match="cannot create the index folder") as caught:
        _open(blocker / "sub" / "memory_index.db")
    assert "workspace.index_path" in str(caught.value)
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(HarnessMemError, match="cannot open the index"):
        _open(folder)


_WORDS = [f"w{i}" for i in range(12)]
_ENTRY = st.tuples(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    st.sampled_from(["", "Trip", "Trip > Kyoto", "寿司 notes"]),
    st.sampled_from([None, "2026-01-02", "2026-03-04"]),
)
_VERSIONS = st.lists(
    st.tuples(st.lists(_ENTRY, max_size=150), st.sampled_from(["memory", "memory", "sessions"])),
    min_size=1,
    max_size=5,
)


def _entries(path: str, rows: list[tuple[str, str, str | None]]) -> list[IndexEntry]:
    return [
        IndexEntry(path, 2 * n + 1, 2 * n + 1 + n % 2, f"- {text}", context, date, n // 7)
        for n, (text, context, date) in enumerate(rows)
    ]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(versions=_VERSIONS)
def test_entry_blocks_follow_every_version_of_a_file(tmp_path: Path, versions: Any) -> None:
    """Appends, edits, reorders and source moves across 64-entry blocks leave exactly the
    new entries, in blocks and in the full-text table (each word's hits are counted)."""
    index = _open(tmp_path / f"blocks-{uuid.uuid4().hex}.db")
    try:
        for number, (rows, source) in enumerate(versions):
            entries = _entries("memory/a.md", rows)
            index.sync_file("memory/a.md", f"h{number}", entries, source=source)
            assert index.stats().entries == len(entries)
            # Every entry holds one of the words: together the searches read back all.
            for word in _WORDS:
                hits = index.search(word, limit=500, source=source, mode="all")
                expected = [e for e in entries if word in e.content.split()]
                assert sorted(
                    (h.start_line, h.end_line, h.content, h.context, h.date) for h in hits
                ) == sorted(
                    (e.start_line, e.end_line, e.content, e.context, e.date) for e in expected
                )
                other = "sessions" if source == "memory" else "memory"
                assert index.search(word, limit=5, source=other) == []
        assert index.remove("memory/a.md")
        with closing(sqlite3.connect(index.path)) as db:
            assert db.execute("SELECT count(*) FROM entry_blocks").fetchone() == (0,)
    finally:
        index.close()


def test_a_file_out_of_entry_ids_moves_to_a_new_number(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose edits used up its id range is stored anew under a fresh file number.

    The one test here that patches private modules: a file's range holds 4.2 million entry
    ids (FILE_SHIFT), too many to use up through the public API in a test."""
    monkeypatch.setattr(_sqlite_schema, "FILE_SPAN", 128)
    monkeypatch.setattr(_sqlite_writer, "FILE_SPAN", 128)
    index = _open(db_path)
    try:
        first = _entries("MEMORY.md", [(f"w{n % 12} alpha", "", None) for n in range(100)])
        index.sync_file("MEMORY.md", "h1", first)
        second = _entries("MEMORY.md", [(f"w{n % 12} beta", "", None) for n in range(100)])
        index.sync_file("MEMORY.md", "h2", second)
        assert index.search("alpha") == []
        assert len(index.search("beta", limit=200)) == 100
        with closing(sqlite3.connect(db_path)) as db:
            ids = db.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'beta'")
            numbers = {row[0] >> FILE_SHIFT for row in ids}
            assert numbers == {db.execute("SELECT file_no FROM files").fetchone()[0]} != {1}
    finally:
        index.close()


def test_path_prefix_over_one_or_several_files(db_path: Path) -> None:
    """One file is searched as a rowid range, several as a set of file numbers."""
    index = _open(db_path)
    try:
        for day in ("2026-01-01", "2026-01-02", "2027-01-01"):
            sync_text(index, f"memory/{day}.md", f"- lantern {day}\n- other\n")
        by_prefix = {
            prefix: sorted(h.path for h in index.search("lantern", path_prefix=prefix))
            for prefix in ("memory/2026-01-02", "memory/2026-", "memory/", "memory/2028")
        }
        assert by_prefix == {
            "memory/2026-01-02": ["memory/2026-01-02.md"],
            "memory/2026-": ["memory/2026-01-01.md", "memory/2026-01-02.md"],
            "memory/": ["memory/2026-01-01.md", "memory/2026-01-02.md", "memory/2027-01-01.md"],
            "memory/2028": [],
        }
    finally:
        index.close()


def _tables(db_path: Path) -> set[str]:
    with closing(sqlite3.connect(db_path)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}


def test_many_workspaces_in_one_file_keep_apart(db_path: Path) -> None:
    """Past the first group of workspaces (one FTS5 table each 16), nothing crosses over."""
    root = _open(db_path)
    views: list[SQLiteIndex] = []
    per_table = None  # workspaces in the first group: found when the second table appears
    try:
        while per_table is None or len(views) < 2 * per_table + 3:
            n = len(views)
            view = root.scoped(f"ws-{n}")
            views.append(view)
            sync_text(view, "MEMORY.md", f"- the shared heron note of ws{n}\n- only ws{n}x here\n")
            if per_table is None and "memory_fts_1" in _tables(db_path):
                per_table = n
            assert n < 1000, "no second FTS5 table after 1,000 workspaces"
        assert per_table > 1
        count = len(views)
        for n, view in enumerate(views):
            assert [h.content for h in view.search("heron")] == [
                f"- the shared heron note of ws{n}"
            ]
            assert view.search(f"ws{(n + 1) % count}x") == []
        assert {"memory_fts", "memory_fts_1", "memory_fts_2"} <= _tables(db_path)
        group_mate, first = views[per_table + 1], views[0]
        views[per_table].clear()
        assert views[per_table].search("heron") == []
        assert len(group_mate.search("heron")) == 1
        assert len(first.search("heron")) == 1
        for view in views[2 * per_table :]:  # alone in their group: delete-all
            view.clear()
            assert view.files() == {}
        assert len(views[2 * per_table - 1].search("heron")) == 1
    finally:
        for view in views:
            view.close()
        root.close()


def test_a_batch_of_files_of_every_shape_is_one_fts5_segment(db_path: Path) -> None:
    """Files with headings, without, and of one entry go to FTS5 in the order of their ids:
    a lower rowid after a higher one would make FTS5 write an extra segment."""

    def entries(path: str, texts: list[str], context: str = "") -> list[IndexEntry]:
        return [IndexEntry(path, n, n, f"- {t}", context, None, 0) for n, t in enumerate(texts)]

    index = _open(db_path)
    try:
        index.sync_files(
            [
                FileUpdate("memory/a.md", "a", entries("memory/a.md", ["oak", "elm"], "Trees")),
                FileUpdate("memory/b.md", "b", entries("memory/b.md", ["fir"])),
                FileUpdate("memory/c.md", "c", entries("memory/c.md", ["ash", "yew"])),
                FileUpdate("memory/d.md", "d", entries("memory/d.md", ["oak tree", "pine"])),
            ]
        )
        with closing(sqlite3.connect(db_path)) as db:
            segments = db.execute("SELECT count(DISTINCT segid) FROM memory_fts_idx").fetchone()
        assert segments == (1,)
        assert [h.path for h in index.search("oak")] == ["memory/a.md", "memory/d.md"]
        assert sorted(h.content for h in index.search("fir ash yew")) == ["- ash", "- fir", "- yew"]
        assert _terms_of(db_path) == {"oak", "elm", "tree", "fir", "ash", "yew", "pine"}
    finally:
        index.close()
