"""Tables of the PostgreSQL index and the migrations that build them.

Everything lives in one PostgreSQL schema (``index.options.schema``, default
``harnessmem``), shared by every workspace that uses the database:

- ``schema_version(version, description, applied_at)``: one row per applied migration;
- ``workspaces(workspace_no, key, url, text_search_config, generation, created_at)``: one
  row per workspace id; ``generation`` grows whenever a workspace's index is emptied, so
  that other replicas notice and hand every file again;
- ``files(workspace_no, path, source, content_hash, change_token, entries, indexed_at)``:
  what is indexed of each file, at which content hash (shared by all replicas);
- ``entries(id, workspace_no, path, source, seq, section, start_line, end_line, content,
  context, date, tsv)``: the chunks, with ``tsv`` = content (weight A) and headings
  (weight B) as a ``tsvector``, under a GIN index whose pending list every writer keeps
  small (``gin_pending_list_limit``; see ``_writes``).

Migrations run at start-up in one transaction under an advisory lock, so replicas
starting together apply each exactly once; a database whose schema is newer than this
package knows is refused rather than touched (a rolling upgrade must not be undone by an
old replica).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from harnessmem.errors import ConfigError, HarnessMemError

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Attached",
    "Migration",
    "advisory_key",
    "attach_workspace",
    "can_stage",
    "check_text_search_config",
    "migrate",
    "quote_ident",
    "stems",
]

logger = logging.getLogger("harnessmem.index")


@dataclass(frozen=True)
class Migration:
    """One step of the schema; ``statements`` use ``{s}`` for the quoted schema name."""

    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "workspaces, files and entries with a GIN index over the tsvector",
        (
            "CREATE TABLE {s}.workspaces ("
            " workspace_no serial PRIMARY KEY,"
            " key text NOT NULL UNIQUE,"
            " url text,"
            " text_search_config text NOT NULL,"
            " generation bigint NOT NULL DEFAULT 0,"
            " created_at timestamptz NOT NULL DEFAULT now())",
            "CREATE TABLE {s}.files ("
            " workspace_no integer NOT NULL"
            "  REFERENCES {s}.workspaces(workspace_no) ON DELETE CASCADE,"
            " path text NOT NULL,"
            " source text NOT NULL,"
            " content_hash text NOT NULL,"
            " change_token text,"
            " entries integer NOT NULL,"
            " indexed_at timestamptz NOT NULL DEFAULT now(),"
            " PRIMARY KEY (workspace_no, path))",
            "CREATE TABLE {s}.entries ("
            " id bigserial PRIMARY KEY,"
            " workspace_no integer NOT NULL,"
            " path text NOT NULL,"
            " source text NOT NULL,"
            " seq integer NOT NULL,"
            " section integer NOT NULL,"
            " start_line integer NOT NULL,"
            " end_line integer NOT NULL,"
            " content text NOT NULL,"
            " context text NOT NULL,"
            " date text,"
            " tsv tsvector NOT NULL,"
            " FOREIGN KEY (workspace_no, path)"
            "  REFERENCES {s}.files(workspace_no, path) ON DELETE CASCADE)",
            "CREATE INDEX entries_file ON {s}.entries (workspace_no, path)",
            # No pending list: inserts merge into the index at once. Searches far outnumber
            # writes here, and a pending list of a few MB must be scanned by every search.
            "CREATE INDEX entries_tsv ON {s}.entries USING gin (tsv) WITH (fastupdate = off)",
        ),
    ),
    Migration(
        2,
        "a GIN pending list, so that large writes merge into the index in bulk",
        # Inserted one by one, every new entry costs a descent of the GIN tree per word:
        # a rebuild took five times a raw bulk insert. Writers keep the list below 64 kB
        # (searches scan it) and flush it themselves after a large insert (``_writes``).
        # No index-level gin_pending_list_limit: it would override the writers' setting.
        ("ALTER INDEX {s}.entries_tsv SET (fastupdate = on)",),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier (options are validated; this is the guard)."""
    return '"' + name.replace('"', '""') + '"'


def advisory_key(*parts: str | int) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (stable across processes)."""
    data = "\x1f".join(map(str, ("harnessmem", *parts))).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def migrate(conn: Any, schema: str, where: str) -> None:
    """Create ``schema`` and apply the missing migrations, in ``conn``'s transaction.

    An advisory lock makes replicas starting together wait for one another, so each
    migration runs once; a schema newer than :data:`LATEST_VERSION` raises. ``where``
    (the masked URL) is for messages.
    """
    from sqlalchemy import text

    s = quote_ident(schema)
    conn.execute(
        text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_key("migrate", schema)}
    )
    # Not CREATE SCHEMA IF NOT EXISTS: that needs the CREATE privilege even when it exists.
    exists = conn.execute(
        text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
    ).first()
    if exists is None:
        conn.exec_driver_sql(f"CREATE SCHEMA {s}")
    conn.exec_driver_sql(
        f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer PRIMARY KEY, "
        "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    current = int(
        conn.exec_driver_sql(
            f"SELECT coalesce(max(version), 0) FROM {s}.schema_version"
        ).scalar_one()
    )
    latest = MIGRATIONS[-1].version
    if current > latest:
        raise HarnessMemError(
            f"the index schema {schema} in {where} is at version {current}, newer than this "
            f"harnessmem-postgres knows ({latest})",
            hint="upgrade harnessmem-postgres on this replica, or set index.options.schema to "
            "another schema",
        )
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        for statement in migration.statements:
            conn.exec_driver_sql(statement.format(s=s))
        conn.execute(
            text(f"INSERT INTO {s}.schema_version (version, description) VALUES (:v, :d)"),
            {"v": migration.version, "d": migration.description},
        )
        logger.info(
            "index schema %s in %s migrated to version %d: %s",
            schema,
            where,
            migration.version,
            migration.description,
        )


def check_text_search_config(conn: Any, name: str) -> None:
    """Raise ConfigError, listing the configurations there are, when ``name`` is not one."""
    from sqlalchemy import text

    known = conn.execute(
        text(
            "SELECT EXISTS (SELECT 1 FROM pg_ts_config c "
            "JOIN pg_namespace n ON n.oid = c.cfgnamespace "
            "WHERE n.nspname || '.' || c.cfgname = :name "
            "OR (c.cfgname = :name AND pg_ts_config_is_visible(c.oid)))"
        ),
        {"name": name},
    ).scalar_one()
    if not known:
        names = conn.execute(text("SELECT cfgname FROM pg_ts_config ORDER BY 1")).scalars()
        raise ConfigError(
            f"index.options.text_search_config: the database has no text search "
            f"configuration {name!r}",
            hint=f"choose one of: {', '.join(names)}",
        )


def stems(conn: Any, config: str) -> bool:
    """Whether ``config`` stems English (``running`` and ``runs`` index alike)."""
    from sqlalchemy import text

    return bool(
        conn.execute(
            text(
                "SELECT to_tsvector(CAST(:cfg AS regconfig), 'running') = "
                "to_tsvector(CAST(:cfg AS regconfig), 'runs')"
            ),
            {"cfg": config},
        ).scalar_one()
    )


@dataclass(frozen=True)
class Attached:
    """A workspace row: its number and generation; ``emptied_from`` the config it had when
    it was emptied for being built with another one (else None)."""

    number: int
    generation: int
    emptied_from: str | None = None


def attach_workspace(
    conn: Any, schema: str, key: str, url: str | None, config: str, lock_timeout: str
) -> Attached:
    """Find or create the row of workspace ``key``; empty it if built with another config."""
    from sqlalchemy import text

    s = quote_ident(schema)
    conn.execute(
        text(
            f"INSERT INTO {s}.workspaces (key, url, text_search_config) "
            "VALUES (:key, :url, :config) ON CONFLICT (key) DO NOTHING"
        ),
        {"key": key, "url": url, "config": config},
    )
    select = text(
        f"SELECT workspace_no, text_search_config, generation FROM {s}.workspaces WHERE key = :key"
    )
    number, stored, generation = conn.execute(select, {"key": key}).one()
    if stored == config:
        return Attached(int(number), int(generation))
    conn.execute(
        text("SELECT set_config('lock_timeout', :lock_timeout, true), pg_advisory_xact_lock(:key)"),
        {"lock_timeout": lock_timeout, "key": advisory_key("workspace", schema, number)},
    )
    number, stored, generation = conn.execute(select, {"key": key}).one()
    if stored == config:  # another replica emptied it meanwhile
        return Attached(int(number), int(generation))
    conn.execute(text(f"DELETE FROM {s}.files WHERE workspace_no = :ws"), {"ws": number})
    generation = conn.execute(
        text(
            f"UPDATE {s}.workspaces SET text_search_config = :config, "
            "generation = generation + 1 WHERE workspace_no = :ws RETURNING generation"
        ),
        {"config": config, "ws": number},
    ).scalar_one()
    return Attached(int(number), int(generation), emptied_from=stored)


def can_stage(conn: Any) -> bool:
    """Whether this role may create temporary tables (for COPY; see ``_writes``).

    PUBLIC has the right by default; a database that revokes it gets array inserts.
    """
    from sqlalchemy import text

    return bool(
        conn.execute(
            text("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
        ).scalar_one()
    )
