"""Fixtures: the PostgreSQL server at 127.0.0.1:5432, a throwaway schema, a workspace id per test.

The server is found once per session: ``POSTGRES_TEST_URL`` when set, else the users
``postgres`` and ``root`` on database ``test`` at 127.0.0.1:5432 (trust auth, as on the
development and CI machines). When none answers, every test here skips and says why.
Each session works in its own schema (dropped at the end); each test in its own
workspace id, so tests never see one another's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

CANDIDATES = [
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
]


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as a libpq connection URI (for psycopg.connect)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _find_server() -> tuple[str | None, str]:
    import psycopg

    given = os.environ.get("POSTGRES_TEST_URL")
    problems = []
    for url in [given] if given else CANDIDATES:
        try:
            with psycopg.connect(libpq_url(url), connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            problems.append(f"{url}: {str(exc).strip().splitlines()[0]}")
            continue
        return url, ""
    return None, "; ".join(problems)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A SQLAlchemy URL of a PostgreSQL server that answers; skips the test when none does."""
    url, why = _find_server()
    if url is None:
        pytest.skip(f"no PostgreSQL server answered ({why}); set POSTGRES_TEST_URL to test")
    return url


@pytest.fixture(scope="session")
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema for this test session, dropped with everything in it at the end."""
    import psycopg

    name = f"hm_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def pg_options(pg_url: str, pg_schema: str) -> dict[str, Any]:
    """Options of a postgres index on a workspace id no other test uses."""
    return {"url": pg_url, "schema": pg_schema, "workspace_id": f"test-{uuid.uuid4().hex}"}


@pytest.fixture
def fresh_schema(pg_url: str) -> Iterator[str]:
    """A schema of its own for one test (migrations, foreign tables), dropped afterwards."""
    import psycopg

    name = f"hm_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def pg_sql(pg_url: str) -> Any:
    """Run one statement on the test server in its own autocommit connection; rows back."""
    import psycopg

    def run(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
            cursor = conn.execute(statement, params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    return run
