"""Connections of the PostgreSQL index: the SQLAlchemy engine and its pooled sessions.

Reads run in autocommit (no BEGIN/COMMIT round trips) under a per-session
``statement_timeout`` that is set only when it changes; writes run in a transaction whose
first statement sets its own timeouts (see ``_sql.Statements.lock_workspace_shared``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harnessmem_postgres.options import DEFAULT_URL, PostgresIndexOptions

__all__ = ["create_engine", "reading"]


def create_engine(opts: PostgresIndexOptions) -> Any:
    """The engine of ``opts``: its pool, connect timeout, application name, no NOTICEs."""
    from sqlalchemy import create_engine as sqlalchemy_engine
    from sqlalchemy.engine import make_url

    url = make_url(opts.url or DEFAULT_URL)
    connect_args: dict[str, Any] = {"connect_timeout": opts.connect_timeout}
    if "application_name" not in url.query:
        connect_args["application_name"] = opts.application_name
    # NOTICEs (a query of stop words only, a word too long to index) are not problems.
    given = url.query.get("options")
    extra = "-c client_min_messages=warning"
    connect_args["options"] = f"{given} {extra}" if isinstance(given, str) else extra
    return sqlalchemy_engine(
        url,
        pool_size=opts.pool_size,
        max_overflow=opts.max_overflow,
        pool_timeout=opts.pool_timeout,
        pool_recycle=-1 if opts.pool_recycle is None else opts.pool_recycle,
        pool_pre_ping=opts.pool_pre_ping,
        connect_args=connect_args,
    )


@contextmanager
def reading(engine: Any, timeout: float | None = None) -> Iterator[Any]:
    """A pooled connection in autocommit for reads.

    Each statement is bounded by ``timeout`` (None: no bound) through the session's
    ``statement_timeout``, set only when the connection's current value differs.
    """
    wanted = 0 if timeout is None else max(1, math.ceil(timeout * 1000))
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        info = conn.connection.info
        if info.get("statement_timeout") != wanted:
            info.pop("statement_timeout", None)
            conn.exec_driver_sql(f"SET statement_timeout = {int(wanted)}")
            info["statement_timeout"] = wanted
        yield conn
