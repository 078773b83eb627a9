"""Sibling workspaces sharing the default index file see only their own memory.

``./agents/alice`` and ``./agents/bob`` both index into ``./agents/memory_index.db`` (the
default: beside the workspace). Every read path of one (search, the agent tools, status,
the CLI) returns only its memory; a full reindex, a prune or a self-rebuild of one leaves
the other's results as they were; and other processes, opening one tenant or serving
different tenants on the same file at once, lose nothing and leak nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main

OPTIONS: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
TENANTS = ("alice", "bob")


def _facts(tenant: str) -> str:
    return (
        f"- {tenant} keeps the spare key under the blue flowerpot\n"
        f"- {tenant}'s staging password hint is {tenant}-lighthouse\n"
        f"- {tenant} flies to Kyoto in March\n"
    )


def _session_log(tenant: str) -> str:
    lines = [
        {"role": "user", "content": f"{tenant} asks where the staging server lives"},
        {"role": "assistant", "content": f"the staging server of {tenant} is rack 7"},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[dict[str, MemoryHarness]]:
    """alice and bob, siblings under one folder, each with memory and a session log."""
    opened = {}
    for tenant in TENANTS:
        harness = MemoryHarness.open(tmp_path / "agents" / tenant, **OPTIONS)
        harness.save(_facts(tenant))
        harness.workspace.write_text("memory/2026-03-01.md", f"- {tenant} only: walrus code\n")
        harness.workspace.write_text(f"sessions/{tenant}-chat.log.jsonl", _session_log(tenant))
        harness.reindex()
        opened[tenant] = harness
    yield opened
    for harness in opened.values():
        harness.close()


def _results(harness: MemoryHarness) -> dict[str, list[tuple[str, int, str]]]:
    """What each read path returns for queries that match both tenants' memory."""
    found = {}
    for query in ("spare key flowerpot", "staging password hint", "walrus code", "Kyoto"):
        found[query] = [(h.path, h.start_line, h.content) for h in harness.search(query, 50)]
    found["sessions"] = [
        (h.path, h.start_line, h.content)
        for h in harness.search("staging server", 50, source="sessions")
    ]
    return found


def _assert_only(tenant: str, results: dict[str, list[tuple[str, int, str]]]) -> None:
    other = next(t for t in TENANTS if t != tenant)
    assert all(hits for hits in results.values()), results
    for hits in results.values():
        for path, _line, content in hits:
            assert other not in content, (tenant, content)
            assert other not in path, (tenant, path)


def test_the_siblings_share_one_index_file(agents: dict[str, MemoryHarness]) -> None:
    assert agents["alice"].kernel.index_path == agents["bob"].kernel.index_path
    assert agents["alice"].kernel.index.workspace_id == agents["alice"].workspace.url
    assert agents["alice"].kernel.index.workspace_id != agents["bob"].kernel.index.workspace_id


def test_every_read_path_returns_only_its_own_memory(agents: dict[str, MemoryHarness]) -> None:
    for tenant, harness in agents.items():
        _assert_only(tenant, _results(harness))
        session = harness.session("chat")
        for tool, args in (
            ("memory_search", {"query": "staging password hint"}),
            ("memory_search", {"query": "walrus"}),
            ("session_search", {"query": "staging server"}),
        ):
            text = session.call_tool(tool, args)
            other = next(t for t in TENANTS if t != tenant)
            assert tenant in text, (tool, text)
            assert other not in text, (tool, text)
        text = session.call_tool("memory_get", {"path": "memory/2026-03-01.md"})
        assert f"{tenant} only" in text
        stats = harness.kernel.index.stats()
        assert (stats.files, stats.entries) == (3, 6), "MEMORY.md, one daily log, one session"


def test_status_and_cli_count_one_workspace(agents: dict[str, MemoryHarness]) -> None:
    paths = {tenant: str(h.workspace.local_root) for tenant, h in agents.items()}
    for harness in agents.values():
        harness.close()
    for tenant, root in paths.items():
        result = CliRunner().invoke(main, ["index", "status", "-w", root, "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert (data["files"], data["entries"]) == (3, 6)
        assert data["workspace_id"].endswith(f"/agents/{tenant}")
        result = CliRunner().invoke(main, ["search", "walrus", "-w", root, "--json"])
        assert result.exit_code == 0, result.output
        assert tenant in result.stdout
        assert next(t for t in TENANTS if t != tenant) not in result.stdout


def test_a_full_reindex_of_one_leaves_the_other(agents: dict[str, MemoryHarness]) -> None:
    before = _results(agents["bob"])
    rebuilt = agents["alice"].reindex(full=True)
    assert rebuilt.indexed == 3
    assert _results(agents["bob"]) == before
    assert agents["bob"].reindex().indexed == 0, "bob's rows were never touched"
    _assert_only("alice", _results(agents["alice"]))


def test_a_prune_of_one_leaves_the_other(tmp_path: Path) -> None:
    old = time.time() - 400 * 86_400
    opened = {}
    try:
        for tenant in TENANTS:
            harness = MemoryHarness.open(
                tmp_path / "agents" / tenant,
                maintenance={"enabled": False, "session_retention_days": 30},
                plugins={"autoload": False},
            )
            harness.workspace.write_text(f"sessions/{tenant}.log.jsonl", _session_log(tenant))
            log = harness.workspace.local_path(f"sessions/{tenant}.log.jsonl")
            assert log is not None
            os.utime(log, (old, old))
            opened[tenant] = harness
        before = [h.content for h in opened["bob"].search("staging", source="sessions")]
        assert before
        assert opened["alice"].search("staging", source="sessions")
        report = opened["alice"].maintain(force=True)
        assert report.step("prune_sessions").counts["deleted"] == 1, report
        assert opened["alice"].search("staging", source="sessions") == []
        assert [h.content for h in opened["bob"].search("staging", source="sessions")] == before
    finally:
        for harness in opened.values():
            harness.close()


def test_a_self_rebuild_of_one_leaves_the_other(agents: dict[str, MemoryHarness]) -> None:
    before = _results(agents["bob"])
    path = agents["alice"].kernel.index_path
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for block_id, block in db.execute("SELECT id, block FROM memory_fts_data").fetchall():
            if block_id > 10:
                flipped = bytes(b ^ 0x5A for b in block)
                db.execute("UPDATE memory_fts_data SET block = ? WHERE id = ?", (flipped, block_id))
    resets = agents["alice"].kernel.index.resets
    _assert_only("alice", _results(agents["alice"]))
    assert agents["alice"].kernel.index.resets > resets, "alice's search found the damage"
    assert _results(agents["bob"]) == before


def test_an_index_instance_of_another_workspace_is_refused(tmp_path: Path) -> None:
    from harnessmem.errors import ConfigError

    with MemoryHarness.open(tmp_path / "agents" / "alice", **OPTIONS) as alice:
        bob = MemoryHarness.open(tmp_path / "agents" / "bob", index=alice.kernel.index, **OPTIONS)
        with bob, pytest.raises(ConfigError, match="serves workspace"):
            bob.search("anything")


# -- other processes ------------------------------------------------------------------------------

_OPEN_ONE = textwrap.dedent(
    """
    import json, sys
    from harnessmem import MemoryHarness
    with MemoryHarness.open(sys.argv[1], maintenance={"enabled": False},
                            plugins={"autoload": False}) as harness:
        hits = harness.search("staging password hint walrus Kyoto", 50)
        hits += harness.search("staging server", 50, source="sessions")
        print(json.dumps([h.content for h in hits]))
    """
)


def test_a_second_process_opening_alice_sees_only_alice(
    agents: dict[str, MemoryHarness],
) -> None:
    root = str(agents["alice"].workspace.local_root)
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_ONE, root], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    contents = json.loads(done.stdout)
    assert len(contents) >= 5
    assert all("bob" not in text for text in contents)
    assert any("alice-lighthouse" in text for text in contents)


_SERVE = textwrap.dedent(
    """
    import sys
    from harnessmem import HarnessPool
    template, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    facts = int(sys.argv[4])
    options = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    with HarnessPool(template, max_open=5, **options) as pool:
        for round_ in range(facts):
            for n in range(first, first + count):
                harness = pool.harness(f"t{n}")
                harness.save(f"- tenant t{n} fact {round_} mentions the word pelican{n}x{round_}")
                assert harness.search(f"pelican{n}x{round_}"), (n, round_)
    print("served", count)
    """
)


def serve_concurrently(template: str) -> None:
    """Two processes, each a pool serving 8 tenants of its own, 5 facts each, at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SERVE, template, str(first), "8", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (0, 8)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        assert "served 8" in out


def check_served(template: str) -> None:
    """Every fact of every tenant is found by its tenant, and by no other."""
    from harnessmem import HarnessPool

    with HarnessPool(template, max_open=4, **OPTIONS) as pool:
        for n in range(16):
            harness = pool.harness(f"t{n}")
            hits = harness.search("tenant fact mentions word", 50)
            assert len(hits) == 5, (n, [h.content for h in hits])
            assert all(f"tenant t{n} fact" in h.content for h in hits)
            for other in (n - 1, n + 1):
                assert harness.search(f"pelican{other}x0") == [], (n, other)


def test_two_processes_serving_different_tenants_on_one_sqlite_file(tmp_path: Path) -> None:
    template = str(tmp_path / "agents" / "{tenant}")
    serve_concurrently(template)
    assert (tmp_path / "agents" / "memory_index.db").exists()
    check_served(template)
