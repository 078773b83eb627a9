"""Forgetting a fact takes its text out of the PostgreSQL index's files, not only its rows.

The test reads the relation files in the server's data directory, so it runs only on the
server's machine, with the right to read them (root or the postgres user), and as a
superuser role (``CHECKPOINT`` writes the dirty pages to those files first); it skips,
saying which is missing, elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harnessmem.backends import IndexEntry
from harnessmem_postgres import PostgresIndex

SECRET = "walrus-7731-quartz"

# Every file of the schema's tables: heaps, their TOAST tables, and the indexes of both.
_RELATIONS = """
WITH tables AS (
    SELECT c.oid, c.reltoastrelid FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind = 'r'),
heaps AS (
    SELECT oid FROM tables UNION SELECT reltoastrelid FROM tables WHERE reltoastrelid <> 0)
SELECT pg_relation_filepath(oid) FROM heaps
UNION SELECT pg_relation_filepath(indexrelid) FROM pg_index
WHERE indrelid IN (SELECT oid FROM heaps)
"""


def _stored_bytes(pg_sql: Callable[..., list[Any]], schema: str) -> bytes:
    """The bytes of the schema's relation files on disk, after a checkpoint."""
    try:
        pg_sql("CHECKPOINT")
    except Exception as exc:  # psycopg.errors.InsufficientPrivilege
        pytest.skip(f"CHECKPOINT needs a superuser role: {exc}")
    data = Path(pg_sql("SHOW data_directory")[0][0])
    found = b""
    for (relative,) in pg_sql(_RELATIONS, schema):
        base = data / relative
        try:
            for part in sorted(base.parent.glob(f"{base.name}*")):
                found += part.read_bytes()
        except OSError as exc:
            pytest.skip(f"cannot read the server's files under {data}: {exc}")
    if not found:
        pytest.skip(f"no relation files of schema {schema} under {data} (another machine?)")
    return found


def _index(pg_url: str, schema: str, **options: Any) -> PostgresIndex:
    return PostgresIndex.create(
        {"url": pg_url, "schema": schema, "workspace_id": "scrub", **options}
    )


def _entry(path: str, text: str) -> list[IndexEntry]:
    return [IndexEntry(path, 1, 1, f"- {text}")]


def test_scrub_takes_a_removed_entrys_text_out_of_the_table_files(
    pg_url: str, fresh_schema: str, pg_sql: Callable[..., list[Any]]
) -> None:
    index = _index(pg_url, fresh_schema)
    try:
        index.sync_file("memory/a.md", "h1", _entry("memory/a.md", f"The code is {SECRET}."))
        index.sync_file("memory/b.md", "h2", _entry("memory/b.md", "The harbour sky is blue."))
        index.remove("memory/a.md")
        assert index.search(SECRET) == []
        # The DELETE took the row out of searches, not out of the heap and the GIN index.
        assert SECRET.encode() in _stored_bytes(pg_sql, fresh_schema)
        assert index.scrub() is True
        stored = _stored_bytes(pg_sql, fresh_schema)
        assert SECRET.encode() not in stored
        assert b"walrus" not in stored, "the lexeme left the full-text index too"
        assert b"The harbour sky is blue." in stored, "live rows are kept"
        assert [hit.path for hit in index.search("harbour sky")] == ["memory/b.md"]
    finally:
        index.close()


def test_scrub_on_forget_off_leaves_the_tables_alone(
    pg_url: str, fresh_schema: str, pg_sql: Callable[..., list[Any]]
) -> None:
    index = _index(pg_url, fresh_schema, scrub_on_forget=False)
    try:
        index.sync_file("memory/a.md", "h1", _entry("memory/a.md", f"The code is {SECRET}."))
        before = pg_sql(f"SELECT pg_relation_filenode('\"{fresh_schema}\".entries')")
        index.remove("memory/a.md")
        assert index.scrub() is False
        assert pg_sql(f"SELECT pg_relation_filenode('\"{fresh_schema}\".entries')") == before
    finally:
        index.close()


def test_forget_through_the_harness_scrubs_the_postgres_index(
    pg_url: str, fresh_schema: str, pg_sql: Callable[..., list[Any]], tmp_path: Path
) -> None:
    from harnessmem import MemoryHarness

    options = {"url": pg_url, "schema": fresh_schema, "workspace_id": "forget"}
    with MemoryHarness.open(
        tmp_path / "ws",
        index={"backend": "postgres", "options": options},
        maintenance={"enabled": False},
        plugins={"autoload": False},
    ) as harness:
        harness.workspace.write_text(
            "MEMORY.md",
            f"# Memory\n\n- The vault code is {SECRET}.\n- The harbour sky is blue.\n",
        )
        harness.reindex()
        assert harness.search(SECRET)
        result = harness.forget(SECRET)
        assert result.count == 1
        assert result.index_scrubbed
        assert not harness.search(SECRET)
        assert harness.search("harbour sky")
    assert SECRET.encode() not in _stored_bytes(pg_sql, fresh_schema)
