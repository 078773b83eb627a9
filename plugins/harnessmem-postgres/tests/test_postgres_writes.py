"""Writes of the ``postgres`` index (``_writes``): the COPY path of large inserts, the GIN
pending list, and what a write that fails half way leaves behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

from harnessmem.backends import FileUpdate
from harnessmem.index import chunk_markdown
from harnessmem_postgres import PostgresIndex, _writes

Sql = Callable[..., list[tuple[Any, ...]]]

pytestmark = pytest.mark.postgres

ROWS = (
    'SELECT id, path, seq, section, start_line, end_line, content, context, date, tsv::text FROM "{s}".entries '  # noqa: E501
    "WHERE workspace_no = %s ORDER BY id"
)


def log_text(n: int, tag: str = "", *, boom_at: int | None = None) -> str:
    """A daily log of ``n`` bullets under a few headings, some not ASCII."""
    lines = []
    for i in range(n):
        if i % 400 == 0:
            lines.append(f"## Memory Flush — 2026-05-{i // 400 + 1:02d} · séance {i // 400}")
        if i == boom_at:
            lines.append("- boom")
        elif i % 97 == 0:
            lines.append(f"- 我喜欢寿司 {tag} café number {i}")
        else:
            lines.append(f"- fact {i} {tag}: the heron waded past stone {i % 13}")
    return "\n".join(lines) + "\n"


def update(path: str, text: str, token: str | None = None) -> FileUpdate:
    return FileUpdate(path, f"hash-{hash(text)}", chunk_markdown(path, text), "memory", token)


@pytest.fixture
def open_index(pg_url: str, fresh_schema: str) -> Iterator[Callable[..., PostgresIndex]]:
    """Open postgres indexes on a schema of this test's own; closed at the end."""
    opened: list[PostgresIndex] = []

    def open_one(workspace_id: str = "w", *, staging: bool = True) -> PostgresIndex:
        backend = PostgresIndex.create(
            {"url": pg_url, "schema": fresh_schema, "workspace_id": workspace_id}
        )
        backend._staging = staging  # as for a role without the TEMPORARY privilege
        opened.append(backend)
        return backend

    yield open_one
    for backend in opened:
        backend.close()


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row counts of every COPY into the staging table."""
    seen: list[int] = []
    copy = _writes._copy

    def counting(conn: Any, target: Any, rows: Any) -> None:
        seen.append(len(rows))
        copy(conn, target, rows)

    monkeypatch.setattr(_writes, "_copy", counting)
    return seen


def test_a_large_insert_by_copy_stores_what_the_array_insert_stores(
    open_index: Callable[..., PostgresIndex], fresh_schema: str, pg_sql: Sql, copies: list[int]
) -> None:
    """Both paths must give the same rows, tsvector included, with ids in file order."""
    text = log_text(_writes.BULK + 300)
    n = len(chunk_markdown("memory/2026-05-01.md", text))
    staged, arrays = open_index("staged"), open_index("arrays", staging=False)
    for backend in (staged, arrays):
        assert backend.sync_files([update("memory/2026-05-01.md", text)]) == [True]
    assert copies == [n], "the staged backend went by COPY, the other did not"
    rows = {
        backend: pg_sql(ROWS.format(s=fresh_schema), backend._workspace_no)
        for backend in (staged, arrays)
    }
    assert [row[1:] for row in rows[staged]] == [row[1:] for row in rows[arrays]]
    assert [row[2] for row in rows[staged]] == list(range(n)), "ids follow the file"
    # A small file goes as arrays either way: the same text must index the same.
    small = open_index("small")
    small.sync_files([update("memory/2026-05-01.md", log_text(120))])
    few = pg_sql(ROWS.format(s=fresh_schema), small._workspace_no)
    assert [row[1:] for row in few] == [row[1:] for row in rows[staged][: len(few)]]
    assert [h.start_line for h in staged.search("寿司", limit=3)] == [
        h.start_line for h in arrays.search("寿司", limit=3)
    ]
    assert staged.search("cafe heron", limit=5) == arrays.search("cafe heron", limit=5)


def test_a_large_insert_leaves_the_gin_pending_list_short(
    open_index: Callable[..., PostgresIndex], fresh_schema: str, pg_sql: Sql
) -> None:
    """Searches scan the pending list: a large write must merge it, not leave megabytes."""
    backend = open_index()
    text = log_text(3 * _writes.BULK)
    backend.sync_files([update("memory/2026-05-01.md", text)])
    pages = pg_sql(f"SELECT gin_clean_pending_list('\"{fresh_schema}\".entries_tsv')")[0][0]
    assert pages <= 8, f"{pages} pages pending (at most 64 kB was expected)"
    assert backend.stats().entries == len(chunk_markdown("memory/2026-05-01.md", text))


@pytest.mark.parametrize("staging", [True, False], ids=["copy", "arrays"])
@pytest.mark.parametrize("size", [40, 3 * _writes.BULK], ids=["small", "large"])
def test_a_sync_that_fails_half_way_leaves_the_previous_state(
    open_index: Callable[..., PostgresIndex],
    fresh_schema: str,
    pg_sql: Sql,
    staging: bool,
    size: int,
) -> None:
    backend = open_index(staging=staging)
    one, two = "memory/2026-05-01.md", "memory/2026-05-02.md"
    assert backend.sync_files([update(one, log_text(size, "old")), update(two, "- kept\n")])
    before_files = backend.files()
    before_rows = pg_sql(ROWS.format(s=fresh_schema), backend._workspace_no)
    s = f'"{fresh_schema}"'
    pg_sql(
        f"CREATE FUNCTION {s}.boom() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'boom at row %%', NEW.seq; END $$"
    )
    pg_sql(
        f"CREATE TRIGGER boom BEFORE INSERT ON {s}.entries FOR EACH ROW "
        f"WHEN (NEW.content = '- boom') EXECUTE FUNCTION {s}.boom()"
    )
    # Two thirds in: the rows before it are already inserted when the statement fails.
    broken = log_text(size, "new", boom_at=size * 2 // 3)
    with pytest.raises(DBAPIError, match="boom at row"):
        backend.sync_files([update(two, "- replaced\n"), update(one, broken)])
    assert backend.files() == before_files
    assert pg_sql(ROWS.format(s=fresh_schema), backend._workspace_no) == before_rows
    assert backend.search("new") == []
    assert [h.content for h in backend.search("kept")] == ["- kept"]

    pg_sql(f"DROP TRIGGER boom ON {s}.entries")
    assert backend.sync_files([update(one, broken)]) == [True]
    assert backend.stats().entries == len(chunk_markdown(one, broken)) + 1, "nothing left over"


def test_a_connection_lost_during_copy_is_retried_on_a_fresh_one(
    open_index: Callable[..., PostgresIndex], fresh_schema: str, copies: list[int]
) -> None:
    """COPY goes to psycopg directly; a lost connection must still be retried once."""
    backend = open_index()
    s = f'"{fresh_schema}"'
    # The pool's one session gets a staging table that ends the session on the first row.
    with backend._engine.begin() as conn:
        conn.exec_driver_sql(backend._sql.create_staging)
        conn.exec_driver_sql(
            f"CREATE FUNCTION {s}.hang_up() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER hang_up BEFORE INSERT ON pg_temp.harnessmem_entries_in "
            f"FOR EACH ROW EXECUTE FUNCTION {s}.hang_up()"
        )
    assert backend._engine.pool.checkedin() == 1
    text = log_text(_writes.BULK + 10)
    assert backend.sync_files([update("memory/2026-05-01.md", text)]) == [True]
    assert len(copies) == 2, "the first COPY failed, the retry's went through"
    assert backend.stats().entries == len(chunk_markdown("memory/2026-05-01.md", text))
