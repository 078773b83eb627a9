"""Errors of the PostgreSQL index, and how server errors become harnessmem's.

SQLSTATEs are the server's codes for what went wrong; the few the backend acts on are
named here, so that the write, search and connection code agree on them.
"""

from __future__ import annotations

from harnessmem.errors import HarnessMemError
from harnessmem_postgres.options import mask_url

__all__ = [
    "LOCK_NOT_AVAILABLE",
    "MISSING",
    "QUERY_CANCELED",
    "IndexUnavailable",
    "WorkspaceGone",
    "sqlstate",
    "translate",
]

#: SQLSTATEs meaning our tables or our workspace row are gone: rebuild them and retry.
MISSING = frozenset({"42P01", "3F000", "23503"})
QUERY_CANCELED = "57014"
LOCK_NOT_AVAILABLE = "55P03"
_HINT = (
    "check index.options.url (or PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE) and that "
    "the server is running"
)


class IndexUnavailable(HarnessMemError, ConnectionError):
    """The PostgreSQL server could not be reached, or a lock could not be had in time."""


class WorkspaceGone(Exception):
    """The workspace row was deleted under us (another process dropped the workspace)."""


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a SQLAlchemy-wrapped driver error, else None."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None)


def translate(
    exc: BaseException, doing: str, *, workspace_id: str, url: str, lock_timeout: float
) -> BaseException:
    """``exc`` as what harnessmem raises: our own errors pass, connection failures map.

    ``doing`` says what failed ("writing files"); ``url`` is already masked.
    """
    if isinstance(exc, HarnessMemError):
        return exc
    if sqlstate(exc) == LOCK_NOT_AVAILABLE:
        return IndexUnavailable(
            f"postgres index {workspace_id!r} in {url}: {doing}: another writer "
            f"held the lock longer than index.options.lock_timeout ({lock_timeout:g}s)",
            hint="raise index.options.lock_timeout, or look for a stuck transaction in "
            "pg_stat_activity",
        )
    from sqlalchemy.exc import InterfaceError, OperationalError

    if isinstance(exc, OperationalError | InterfaceError):
        orig = getattr(exc, "orig", None)
        first = str(orig or exc).strip().splitlines()[0] if str(orig or exc).strip() else ""
        return IndexUnavailable(f"postgres index in {url}: {doing}: {mask_url(first)}", hint=_HINT)
    return exc
