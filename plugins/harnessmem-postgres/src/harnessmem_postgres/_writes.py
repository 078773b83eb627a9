"""Writing the PostgreSQL index: batches of files, removals, clearing a workspace.

A batch of files is one transaction. A writer takes the workspace's advisory lock in
shared mode (``clear`` takes it exclusively) and one advisory lock per file path, in a
fixed order, so concurrent syncs of one file by several replicas run one after the
other: the second finds the content hash already stored and only records its change
token. Unchanged entries keep their rows (an append inserts only the new bullets).

Inserting (the cost of a rebuild): the tsvector is computed by the server in one
``INSERT ... SELECT`` per batch, each distinct heading once. Fewer than :data:`BULK`
rows travel as arrays in that statement; more go first by binary ``COPY`` into the
session's staging table (see ``_sql.STAGING``), unless the role may not create temporary
tables. The GIN index has a pending list (migration 2), which searches scan in full. Each
write bounds it at :data:`PENDING` for its transaction, so a small write appends to it
cheaply and leaves it short; a large insert raises the bound to :data:`PENDING_BULK`, so
that its words are merged into the index in bulk (a rebuild costs a third of what one
tree descent per word did), then inserts its last :data:`TAIL` rows under the low bound
again: an insert into an overlong list makes the inserting session merge all of it. So a
large write leaves no pending list behind, and needs no ownership of the index (which
``gin_clean_pending_list`` would). All of it happens in the batch's transaction: a failed
batch leaves the previous rows, and the staging table empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessmem.backends import FileUpdate, IndexEntry
from harnessmem_postgres._rows import StoredEntry, diff_entries
from harnessmem_postgres._schema import advisory_key
from harnessmem_postgres._sql import STAGING_COLUMNS, Statements
from harnessmem_postgres._text import clean, document_text

__all__ = [
    "BULK",
    "PENDING",
    "PENDING_BULK",
    "TAIL",
    "Target",
    "all_current",
    "clear_workspace",
    "remove_file",
    "write_batch",
]

BULK = 1_000  # rows from which an insert goes by COPY and merges into GIN in bulk
PENDING = "64kB"  # the GIN pending list a write may leave (the smallest PostgreSQL allows)
PENDING_BULK = "4MB"  # ... and may grow to during a large insert
TAIL = 64  # rows of a large insert inserted under PENDING again, to flush the list

_Added = tuple[str, str, int, IndexEntry]  # path, source, seq, entry
_Row = tuple[str, str, int, int, int, int, str, str, str | None, str, str, int]


@dataclass(frozen=True)
class Target:
    """Where writes go: the schema's statements, the workspace and how long to wait."""

    sql: Statements
    schema: str
    workspace_no: int
    config: str
    lock_timeout: str  # as PostgreSQL reads it: "30000ms"
    staging: bool = True  # may create the temporary staging table (else arrays only)

    def lock_workspace(self, conn: Any, *, exclusive: bool = False) -> None:
        """The transaction's first statement: the workspace lock (see ``_sql``)."""
        key = advisory_key("workspace", self.schema, self.workspace_no)
        params = {"lock_timeout": self.lock_timeout, "key": key}
        if exclusive:
            conn.execute(self.sql.lock_workspace, params)
        else:
            conn.execute(self.sql.lock_workspace_shared, {**params, "pending": PENDING})

    def lock_paths(self, conn: Any, paths: Sequence[str]) -> None:
        """The advisory locks of ``paths``, in a fixed order (no two writers deadlock)."""
        keys = sorted({advisory_key("file", self.schema, self.workspace_no, p) for p in paths})
        conn.execute(self.sql.lock_paths, {"keys": keys})


def all_current(conn: Any, target: Target, batch: Sequence[FileUpdate]) -> bool:
    """Whether every update is stored already (hash, source, token): no lock needed."""
    rows = conn.execute(
        target.sql.current,
        {"ws": target.workspace_no, "paths": [u.path for u in batch]},
    ).all()
    stored = {row[0]: tuple(row[1:]) for row in rows}
    return all(stored.get(u.path) == (u.content_hash, u.source, u.change_token) for u in batch)


def write_batch(conn: Any, target: Target, batch: Sequence[FileUpdate]) -> list[bool]:
    """Apply ``batch`` in ``conn``'s transaction; which files changed."""
    target.lock_workspace(conn)
    target.lock_paths(conn, [u.path for u in batch])
    changed: list[bool] = []
    # A path twice in one batch: apply in rounds, each path once per round.
    start = 0
    while start < len(batch):
        seen: set[str] = set()
        end = start
        while end < len(batch) and batch[end].path not in seen:
            seen.add(batch[end].path)
            end += 1
        changed += _write_round(conn, target, batch[start:end])
        start = end
    return changed


def _write_round(conn: Any, target: Target, batch: Sequence[FileUpdate]) -> list[bool]:
    sql, ws = target.sql, target.workspace_no
    paths = [u.path for u in batch]
    stored = {
        row[0]: (row[1], row[2])
        for row in conn.execute(sql.stored_files, {"ws": ws, "paths": paths})
    }
    same = [u for u in batch if stored.get(u.path) == (u.content_hash, u.source)]
    todo = [u for u in batch if stored.get(u.path) != (u.content_hash, u.source)]
    if same:
        conn.execute(
            sql.set_tokens,
            {
                "ws": ws,
                "paths": [u.path for u in same],
                "tokens": [u.change_token for u in same],
            },
        )
    if not todo:
        return [False] * len(batch)
    rows: dict[str, list[StoredEntry]] = {u.path: [] for u in todo}
    held = [u.path for u in todo if u.path in stored]
    if held:
        for row in conn.execute(sql.stored_entries, {"ws": ws, "paths": held}):
            rows[row[1]].append(StoredEntry(row[0], *row[2:]))
    gone: list[int] = []
    moved: list[tuple[int, int, int, int, int, str | None]] = []
    added: list[_Added] = []
    for update in todo:
        entries = [_cleaned(entry) for entry in update.entries]
        old_source = stored.get(update.path, (None, update.source))[1]
        if old_source != update.source:  # moved between sources: every row anew
            gone += [row.id for row in rows[update.path]]
            added += [(update.path, update.source, seq, e) for seq, e in enumerate(entries)]
            continue
        diff = diff_entries(rows[update.path], entries)
        gone += diff.gone
        moved += diff.moved
        added += [(update.path, update.source, seq, e) for seq, e in diff.added]
    conn.execute(
        sql.upsert_files,
        {
            "ws": ws,
            "paths": [u.path for u in todo],
            "sources": [u.source for u in todo],
            "hashes": [u.content_hash for u in todo],
            "tokens": [u.change_token for u in todo],
            "counts": [len(u.entries) for u in todo],
        },
    )
    if gone:
        conn.execute(sql.delete_entries, {"ids": gone})
    if moved:
        columns = list(zip(*moved, strict=True))
        conn.execute(
            sql.move_entries,
            dict(
                zip(
                    ("ids", "seqs", "sections", "firsts", "lasts", "dates"),
                    map(list, columns),
                    strict=True,
                )
            ),
        )
    if added:
        _insert(conn, target, added)
    done = {u.path for u in todo}
    return [u.path in done for u in batch]


def _cleaned(entry: IndexEntry) -> IndexEntry:
    """``entry`` with text PostgreSQL can store (itself when it is already so)."""
    content, context = clean(entry.content), clean(entry.context)
    if content is entry.content and context is entry.context:
        return entry
    return entry._replace(content=content, context=context)


def _insert(conn: Any, target: Target, added: Sequence[_Added]) -> None:
    contexts: dict[str, str] = {}

    def context_text(context: str) -> str:
        found = contexts.get(context)
        if found is None:
            found = contexts[context] = document_text(context)
        return found

    rows: list[_Row] = [
        (
            path,
            source,
            seq,
            e.section,
            e.start_line,
            e.end_line,
            e.content,
            e.context,
            e.date,
            document_text(e.content),
            context_text(e.context),
            n,
        )
        for n, (path, source, seq, e) in enumerate(added, 1)
    ]
    if len(rows) < BULK:
        _insert_arrays(conn, target, rows)
        return
    split = len(rows) - TAIL
    conn.execute(target.sql.pending_limit, {"pending": PENDING_BULK})
    if target.staging:
        _copy(conn, target, rows)
        _insert_staged(conn, target, split)
        conn.execute(target.sql.pending_limit, {"pending": PENDING})
        _insert_staged(conn, target, len(rows))
    else:
        _insert_arrays(conn, target, rows[:split])
        conn.execute(target.sql.pending_limit, {"pending": PENDING})
        _insert_arrays(conn, target, rows[split:])


def _insert_arrays(conn: Any, target: Target, rows: Sequence[_Row]) -> None:
    """Insert ``rows`` sent as one array per column (no round trip besides the statement)."""
    names = ["paths", "sources", "seqs", "sections", "firsts", "lasts", "contents"]
    names += ["contexts", "dates", "docs", "ctxs"]
    # The last column, the row number, is unnest's ordinality there.
    columns = list(zip(*rows, strict=True))[: len(names)]
    params: dict[str, Any] = {"ws": target.workspace_no, "cfg": target.config}
    params.update({name: list(column) for name, column in zip(names, columns, strict=True)})
    conn.execute(target.sql.insert_entries, params)


def _copy(conn: Any, target: Target, rows: Sequence[_Row]) -> None:
    """Put ``rows`` in the (empty) staging table by binary COPY, in this transaction.

    SQLAlchemy has no COPY, so this one statement goes to psycopg directly; its errors
    are raised as SQLAlchemy's would be (a lost connection invalidated, so that the
    caller's retry and error mapping treat it like any other statement's).
    """
    import psycopg
    from sqlalchemy.exc import DBAPIError

    conn.exec_driver_sql(target.sql.create_staging)
    driver = conn.connection.driver_connection
    try:
        with driver.cursor() as cursor, cursor.copy(target.sql.copy_staging) as copy:
            copy.set_types([kind for _, kind in STAGING_COLUMNS])
            for row in rows:
                copy.write_row(row)
    except psycopg.Error as exc:
        lost = bool(conn.dialect.is_disconnect(exc, driver, None))
        if lost:
            conn.invalidate(exc)
        raise DBAPIError.instance(
            target.sql.copy_staging, None, exc, psycopg.Error, connection_invalidated=lost
        ) from exc


def _insert_staged(conn: Any, target: Target, upto: int) -> None:
    """Insert (and take out of the staging table) the staged rows numbered up to ``upto``."""
    conn.execute(
        target.sql.insert_staged,
        {"ws": target.workspace_no, "cfg": target.config, "upto": upto},
    )


def remove_file(conn: Any, target: Target, path: str) -> bool:
    """Forget ``path`` (its entries go with it); whether it was indexed."""
    target.lock_workspace(conn)
    target.lock_paths(conn, [path])
    row = conn.execute(target.sql.remove_file, {"ws": target.workspace_no, "path": path}).first()
    return row is not None


def clear_workspace(conn: Any, target: Target) -> int | None:
    """Forget every file of the workspace; its new generation (None: the row is gone)."""
    target.lock_workspace(conn, exclusive=True)
    conn.execute(target.sql.clear, {"ws": target.workspace_no})
    generation = conn.execute(
        target.sql.bump_generation, {"ws": target.workspace_no}
    ).scalar_one_or_none()
    return None if generation is None else int(generation)
