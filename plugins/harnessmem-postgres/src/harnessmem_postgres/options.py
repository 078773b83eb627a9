"""Options of the ``postgres`` index backend (``[index.options]``) and where values come from."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import ConfigDict, Field, field_validator

from harnessmem.backends import RankingOptions

__all__ = [
    "DEFAULT_URL",
    "PostgresIndexOptions",
    "mask_url",
    "workspace_key",
    "workspace_url",
]

#: The URL used when ``url`` is unset: every part from libpq's environment and defaults.
DEFAULT_URL = "postgresql+psycopg://"
_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}
_PASSWORD_IN_URL = re.compile(r"(://[^:/?#@\s]*:)[^@/?#\s]*@")


class PostgresIndexOptions(RankingOptions):
    """Options of the ``postgres`` index backend; see the plugin's README for examples."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    url: str | None = Field(
        None,
        description=(
            "SQLAlchemy URL, postgresql+psycopg://user@host:5432/database (postgresql:// is "
            "read as psycopg). Parts left out come from libpq's environment: PGHOST, PGPORT, "
            "PGUSER, PGPASSWORD, PGDATABASE, PGPASSFILE, PGSERVICE, PGSSLMODE. Unset: all of "
            "them do."
        ),
    )
    workspace_id: str | None = Field(
        None,
        min_length=1,
        max_length=1_000,
        description=(
            "Names this workspace's rows, so that many workspaces share one database. Unset: "
            "the workspace URL (credentials removed). Replicas that reach one store by "
            "different URLs (a share mounted at different paths) must set the same value."
        ),
    )
    db_schema: str = Field(
        "harnessmem",
        alias="schema",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="PostgreSQL schema holding the index tables (created when missing).",
    )
    text_search_config: str = Field(
        "english",
        max_length=127,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$",
        description=(
            "Text search configuration: 'english' stems English; 'simple' only lowercases "
            "(for other or mixed languages); any configuration of the database works."
        ),
    )
    pool_size: int = Field(5, ge=1, le=1_000, description="Connections kept open.")
    max_overflow: int = Field(
        10, ge=0, le=1_000, description="Connections opened beyond pool_size under load."
    )
    pool_timeout: float = Field(
        30.0, gt=0, description="Seconds to wait for a free connection before failing."
    )
    pool_recycle: float | None = Field(
        1_800.0,
        gt=0,
        description="Seconds after which a connection is replaced (unset: never).",
    )
    pool_pre_ping: bool = Field(
        False,
        description=(
            "Ping each pooled connection before use. Off: a dropped connection fails one "
            "statement, which is retried on a fresh connection, saving a round trip a call."
        ),
    )
    connect_timeout: int = Field(
        10, ge=1, le=3_600, description="Seconds to wait for the server when connecting."
    )
    lock_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds a write waits for another replica writing the same file.",
    )
    scrub_on_forget: bool = Field(
        True,
        description=(
            "When a fact is forgotten, rewrite the entries table (VACUUM FULL) so its text "
            "leaves the table's files; every workspace's searches wait for the rewrite. "
            "Off: the rows are gone from searches at once, their bytes stay in free space "
            "until PostgreSQL reuses it."
        ),
    )
    application_name: str = Field(
        "harnessmem",
        max_length=63,
        description="Shown in pg_stat_activity (unless the URL sets application_name).",
    )

    @field_validator("url")
    @classmethod
    def _psycopg_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(value.strip())
        except ArgumentError:
            raise ValueError(
                "not a SQLAlchemy URL; expected postgresql+psycopg://user@host:5432/database"
            ) from None
        if url.drivername not in _DRIVERS:
            raise ValueError(
                f"the postgres index speaks psycopg 3: use a postgresql+psycopg:// URL, "
                f"not {url.drivername}://"
            )
        return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def mask_url(url: str | None) -> str:
    """``url`` with any password replaced by ``***`` (for logs, errors and stats)."""
    return _PASSWORD_IN_URL.sub(r"\1***@", url or DEFAULT_URL)


def workspace_key(options: PostgresIndexOptions, context: dict[str, Any]) -> str | None:
    """The workspace id: ``workspace_id`` of the context (what ``scoped`` gives), else the
    option, else the workspace URL without credentials."""
    given = context.get("workspace_id")
    return given or options.workspace_id or workspace_url(context)


def workspace_url(context: dict[str, Any]) -> str | None:
    """The URL of the context's workspace without credentials; None without a workspace."""
    url = getattr(context.get("workspace"), "url", None)
    if not url:
        return None
    text = str(url)
    if "://" not in text:
        return text
    parts = urlsplit(text)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
