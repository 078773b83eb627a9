"""The statements of the PostgreSQL index, for one schema (see ``_schema`` for the tables).

Every value is a bind parameter; the only text formatted in is the quoted schema name
(validated as an identifier by the options model). Arrays travel as one parameter each
and are opened with ``unnest``, so a batch of files costs a fixed number of statements
whatever its size. Large inserts travel by binary ``COPY`` into a temporary table
(:data:`STAGING`) instead: a fraction of the cost of building and parsing the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["STAGING", "STAGING_COLUMNS", "Statements"]

#: The session's staging table of entry rows, and its columns in COPY order. Every insert
#: from it consumes the rows it reads (DELETE ... RETURNING), so it is empty between
#: statements; ON COMMIT DELETE ROWS and rollbacks keep it so across transactions.
STAGING = "pg_temp.harnessmem_entries_in"
STAGING_COLUMNS = (
    ("path", "text"),
    ("source", "text"),
    ("seq", "integer"),
    ("section", "integer"),
    ("first", "integer"),
    ("last", "integer"),
    ("content", "text"),
    ("context", "text"),
    ("day", "text"),
    ("doc", "text"),
    ("ctx", "text"),
    ("n", "integer"),
)

# The entry rows of ``r`` (the columns above) with their tsvector: content (weight A),
# headings (weight B, one to_tsvector per distinct heading, not per row), in ``n`` order
# so that ids follow the files' order as before.
_INSERT = """
WITH r AS ({rows}), c AS (
    SELECT r.ctx, setweight(to_tsvector(CAST(:cfg AS regconfig), r.ctx), 'B') AS tsv
    FROM r GROUP BY r.ctx
)
INSERT INTO {s}.entries (workspace_no, path, source, seq, section, start_line, end_line,
    content, context, date, tsv)
SELECT :ws, r.path, r.source, r.seq, r.section, r.first, r.last, r.content, r.context, r.day,
    setweight(to_tsvector(CAST(:cfg AS regconfig), r.doc), 'A') || c.tsv
FROM r JOIN c ON c.ctx = r.ctx
ORDER BY r.n
"""
_UNNEST = (
    "SELECT * FROM unnest(CAST(:paths AS text[]), CAST(:sources AS text[]), "
    "CAST(:seqs AS integer[]), CAST(:sections AS integer[]), CAST(:firsts AS integer[]), "
    "CAST(:lasts AS integer[]), CAST(:contents AS text[]), CAST(:contexts AS text[]), "
    "CAST(:dates AS text[]), CAST(:docs AS text[]), CAST(:ctxs AS text[])) WITH ORDINALITY "
    "AS u(" + ", ".join(name for name, _ in STAGING_COLUMNS) + ")"
)
_STAGED = f"DELETE FROM {STAGING} WHERE n <= :upto RETURNING *"

_SEARCH = """
WITH n AS MATERIALIZED (
    SELECT coalesce(sum(entries), 0)::float8 AS total FROM {s}.files
    WHERE workspace_no = :ws AND source = :source
), w AS MATERIALIZED (
    -- the idf of bm25; a cached df may exceed a total that shrank since, hence greatest()
    SELECT t.i, t.q, ln(1.0 + (greatest(n.total - t.df, 0) + 0.5) / (t.df + 0.5)) AS idf
    FROM (
        SELECT u.i, to_tsquery(CAST(:cfg AS regconfig), u.q) AS q, u.df::float8 AS df
        FROM unnest(CAST(:terms AS text[]), CAST(:dfs AS integer[])) WITH ORDINALITY
            AS u(q, df, i)
    ) AS t CROSS JOIN n
    WHERE numnode(t.q) > 0
), hits AS (
    SELECT e.id, e.path, e.seq, e.section, e.start_line, e.end_line, e.content, e.context,
        e.date,
        ({score}) AS score
    FROM {s}.entries e
    WHERE e.workspace_no = :ws AND e.source = :source
        AND e.tsv @@ to_tsquery(CAST(:cfg AS regconfig), :query){prefix}{dates}
    ORDER BY score DESC, e.id
    LIMIT :pool
)
SELECT g.generation, h.id, h.path, h.seq, h.section, h.start_line, h.end_line, h.content,
    h.context, h.date, h.score
FROM {s}.workspaces g LEFT JOIN hits h ON true
WHERE g.workspace_no = :ws
"""

# One term's share of a row's score: its idf times ts_rank_cd of the row for it (0 when
# the term has no lexeme in the configuration, so no row of w). The statement spells out
# one per term: a sum over w run for every matching row costs a subplan each (a fifth of
# the statement's time at 20,000 entries); these subqueries run once per statement.
_TERM_SCORE = (
    "coalesce((SELECT idf FROM w WHERE i = {i}) * "
    "ts_rank_cd(CAST(:weights AS float4[]), e.tsv, (SELECT q FROM w WHERE i = {i})), 0)"
)

_PREFIX = "\n        AND starts_with(e.path, :prefix)"
# Dates are ISO days (text sorts as the days do); an undated entry (NULL) matches neither.
_DATES = "\n        AND left(e.date, 10) >= :since AND left(e.date, 10) <= :until"

_FREQUENCIES = """
SELECT (
    SELECT count(*) FROM (
        SELECT 1 FROM {s}.entries e
        WHERE e.workspace_no = :ws AND e.source = :source
            AND e.tsv @@ to_tsquery(CAST(:cfg AS regconfig), u.q)
        LIMIT :df_cap
    ) AS x
)
FROM unnest(CAST(:terms AS text[])) WITH ORDINALITY AS u(q, n)
ORDER BY u.n
"""


@dataclass(frozen=True)
class Statements:
    """The SQL of one schema, built once per backend (SQLAlchemy caches compiled text)."""

    current: Any
    lock_workspace_shared: Any
    lock_workspace: Any
    lock_paths: Any
    stored_files: Any
    stored_entries: Any
    upsert_files: Any
    set_tokens: Any
    delete_entries: Any
    move_entries: Any
    insert_entries: Any
    insert_staged: Any
    create_staging: str
    copy_staging: str
    pending_limit: Any
    remove_file: Any
    clear: Any
    bump_generation: Any
    files: Any
    stats: Any
    frequencies: Any
    schema: str
    _searches: dict[tuple[int, bool, bool], Any] = field(
        default_factory=dict, compare=False, repr=False
    )

    def search(self, terms: int, *, prefix: bool = False, dated: bool = False) -> Any:
        """The ranking statement for ``terms`` scored terms (``:terms`` and ``:dfs`` hold
        that many), with the path-prefix and dates conditions when asked (built once each)."""
        key = (terms, prefix, dated)
        statement = self._searches.get(key)
        if statement is None:
            from sqlalchemy import text

            score = " + ".join(_TERM_SCORE.format(i=i) for i in range(1, terms + 1)) or "0"
            statement = self._searches[key] = text(
                _SEARCH.format(
                    s=self.schema,
                    score=score,
                    prefix=_PREFIX if prefix else "",
                    dates=_DATES if dated else "",
                )
            )
        return statement

    @classmethod
    def build(cls, schema: str) -> Statements:
        """Statements for the (already quoted) ``schema``."""
        from sqlalchemy import text

        def sql(template: str, **extra: str) -> Any:
            return text(template.format(s=schema, **extra))

        return cls(
            current=sql(
                "SELECT path, content_hash, source, change_token FROM {s}.files "
                "WHERE workspace_no = :ws AND path = ANY(CAST(:paths AS text[]))"
            ),
            # The first statement of every write transaction: set_config first, so the lock
            # waits are bounded by lock_timeout, and writes by no search's statement_timeout.
            # Writers also bound the GIN pending list (see ``_writes``).
            lock_workspace_shared=sql(
                "SELECT set_config('statement_timeout', '0', true), "
                "set_config('lock_timeout', :lock_timeout, true), "
                "set_config('gin_pending_list_limit', :pending, true), "
                "pg_advisory_xact_lock_shared(:key)"
            ),
            lock_workspace=sql(
                "SELECT set_config('statement_timeout', '0', true), "
                "set_config('lock_timeout', :lock_timeout, true), "
                "pg_advisory_xact_lock(:key)"
            ),
            # Keys arrive sorted: every writer locks in one order, so none deadlocks.
            lock_paths=sql(
                "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(CAST(:keys AS bigint[])) "
                "WITH ORDINALITY AS u(k, n)"
            ),
            stored_files=sql(
                "SELECT path, content_hash, source FROM {s}.files "
                "WHERE workspace_no = :ws AND path = ANY(CAST(:paths AS text[]))"
            ),
            stored_entries=sql(
                "SELECT id, path, content, context, seq, section, start_line, end_line, date "
                "FROM {s}.entries WHERE workspace_no = :ws "
                "AND path = ANY(CAST(:paths AS text[]))"
            ),
            upsert_files=sql(
                "INSERT INTO {s}.files "
                "(workspace_no, path, source, content_hash, change_token, entries, indexed_at) "
                "SELECT :ws, u.path, u.source, u.hash, u.token, u.n, now() "
                "FROM unnest(CAST(:paths AS text[]), CAST(:sources AS text[]), "
                "CAST(:hashes AS text[]), CAST(:tokens AS text[]), CAST(:counts AS integer[])) "
                "AS u(path, source, hash, token, n) "
                "ON CONFLICT (workspace_no, path) DO UPDATE SET source = EXCLUDED.source, "
                "content_hash = EXCLUDED.content_hash, change_token = EXCLUDED.change_token, "
                "entries = EXCLUDED.entries, indexed_at = EXCLUDED.indexed_at"
            ),
            set_tokens=sql(
                "UPDATE {s}.files f SET change_token = u.token "
                "FROM unnest(CAST(:paths AS text[]), CAST(:tokens AS text[])) AS u(path, token) "
                "WHERE f.workspace_no = :ws AND f.path = u.path"
            ),
            delete_entries=sql("DELETE FROM {s}.entries WHERE id = ANY(CAST(:ids AS bigint[]))"),
            move_entries=sql(
                "UPDATE {s}.entries e SET seq = u.seq, section = u.section, "
                "start_line = u.first, end_line = u.last, date = u.day "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:seqs AS integer[]), "
                "CAST(:sections AS integer[]), CAST(:firsts AS integer[]), "
                "CAST(:lasts AS integer[]), CAST(:dates AS text[])) "
                "AS u(id, seq, section, first, last, day) WHERE e.id = u.id"
            ),
            insert_entries=sql(_INSERT, rows=_UNNEST),
            insert_staged=sql(_INSERT, rows=_STAGED),
            create_staging=(
                f"CREATE TEMP TABLE IF NOT EXISTS {STAGING.removeprefix('pg_temp.')} ("
                + ", ".join(f"{name} {kind}" for name, kind in STAGING_COLUMNS)
                + ") ON COMMIT DELETE ROWS"
            ),
            copy_staging=(
                f"COPY {STAGING} ("
                + ", ".join(name for name, _ in STAGING_COLUMNS)
                + ") FROM STDIN (FORMAT BINARY)"
            ),
            pending_limit=sql("SELECT set_config('gin_pending_list_limit', :pending, true)"),
            remove_file=sql(
                "DELETE FROM {s}.files WHERE workspace_no = :ws AND path = :path RETURNING 1"
            ),
            clear=sql("DELETE FROM {s}.files WHERE workspace_no = :ws"),
            bump_generation=sql(
                "UPDATE {s}.workspaces SET generation = generation + 1 "
                "WHERE workspace_no = :ws RETURNING generation"
            ),
            files=sql(
                "SELECT path, source, content_hash, change_token, entries FROM {s}.files "
                "WHERE workspace_no = :ws"
            ),
            stats=sql(
                "SELECT source, count(*), coalesce(sum(entries), 0) FROM {s}.files "
                "WHERE workspace_no = :ws GROUP BY source"
            ),
            frequencies=sql(_FREQUENCIES),
            schema=schema,
        )
