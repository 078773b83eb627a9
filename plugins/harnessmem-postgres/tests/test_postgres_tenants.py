"""Many tenants on one PostgreSQL database: siblings, a ``HarnessPool``, two processes.

The same contract as the core's ``tests/test_tenancy.py`` and ``tests/test_pool.py`` on the
SQLite file: every tenant sees only its own memory, and a full reindex or a rebuild of one
leaves the others' results unchanged.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from harnessmem import HarnessPool, MemoryHarness

pytestmark = pytest.mark.postgres

OPTIONS: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}


def _index(pg_url: str, pg_schema: str) -> dict[str, Any]:
    return {"backend": "postgres", "options": {"url": pg_url, "schema": pg_schema}}


def _fact(tenant: str) -> str:
    return f"- {tenant} keeps the spare key in tin-{tenant}; the shared word is heliotrope"


def test_siblings_on_one_database_keep_apart(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    index = _index(pg_url, pg_schema)
    opened = {
        name: MemoryHarness.open(tmp_path / "agents" / name, index=index, **OPTIONS)
        for name in ("alice", "bob")
    }
    try:
        for name, harness in opened.items():
            harness.save(_fact(name))
            harness.workspace.write_text("memory/2026-03-01.md", f"- {name} only: walrus code\n")
        for name, harness in opened.items():
            contents = [h.content for h in harness.search("heliotrope walrus spare key", 50)]
            assert len(contents) == 2
            assert all(name in text for text in contents), contents
        before = [h.content for h in opened["bob"].search("heliotrope walrus", 50)]
        assert opened["alice"].reindex(full=True).indexed == 2
        assert [h.content for h in opened["bob"].search("heliotrope walrus", 50)] == before
        assert opened["bob"].reindex().indexed == 0, "bob's rows were never touched"
        stats = opened["alice"].kernel.index.stats()
        assert (stats.files, stats.entries) == (2, 2)
    finally:
        for harness in opened.values():
            harness.close()


def test_a_pool_of_200_tenants_with_20_open(
    pg_url: str, pg_schema: str, pg_sql: Any, tmp_path: Path
) -> None:
    template = str(tmp_path / "agents" / "{tenant}")
    names = [f"tenant-{n:03d}" for n in range(200)]
    # Named, so that the server can tell this test's connections; two at most, one pool.
    tag = f"tenants-{uuid.uuid4().hex[:12]}"
    index = _index(pg_url, pg_schema)
    index["options"].update(application_name=tag, pool_size=2, max_overflow=0)
    with HarnessPool(template, max_open=20, index=index, **OPTIONS) as pool:
        for name in names:
            pool.harness(name).save(_fact(name))
            assert len(pool) <= 20
        for name in reversed(names):
            harness = pool.harness(name)
            assert [h.content for h in harness.search("heliotrope spare key", 50)] == [_fact(name)]
            assert len(pool) <= 20
        # Every tenant on the pool's one engine: 20 open tenants, at most its 2 connections.
        statement = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        assert 1 <= pg_sql(statement, tag)[0][0] <= 2


_SERVE = textwrap.dedent(
    """
    import sys
    from harnessmem import HarnessPool
    template, first, url, schema = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    index = {"backend": "postgres", "options": {"url": url, "schema": schema}}
    options = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    with HarnessPool(template, max_open=3, index=index, **options) as pool:
        for round_ in range(4):
            for n in range(first, first + 6):
                harness = pool.harness(f"t{n}")
                harness.save(f"- tenant t{n} fact {round_} mentions pelican{n}x{round_}")
                assert harness.search(f"pelican{n}x{round_}"), (n, round_)
    print("served")
    """
)


def test_two_processes_serving_different_tenants_on_one_database(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    template = str(tmp_path / "agents" / "{tenant}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SERVE, template, str(first), pg_url, pg_schema],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (0, 6)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        assert "served" in out
    with HarnessPool(template, max_open=4, index=_index(pg_url, pg_schema), **OPTIONS) as pool:
        for n in range(12):
            hits = pool.harness(f"t{n}").search("tenant fact mentions", 50)
            assert len(hits) == 4, (n, [h.content for h in hits])
            assert all(f"tenant t{n} fact" in h.content for h in hits)
