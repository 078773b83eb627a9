"""The ``harnessmem index``, ``search`` and ``get`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem.cli import main


@pytest.fixture
def workspace(tmp_path: Path) -> str:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n- Alice prefers aisle seats.\n")
    (root / "memory" / "2026-11-30.md").write_text("- the otter swims\n- the beaver builds\n")
    (root / "AGENTS.md").write_text("not for the agent\n")
    return str(root)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_index_rebuild_and_status(workspace: str) -> None:
    code, out, _ = _run("index", "rebuild", "-w", workspace)
    assert code == 0
    assert "2 indexed (3 entries)" in out
    code, out, _ = _run("index", "rebuild", "-w", workspace, "--json")
    data = json.loads(out)
    assert (data["files"], data["entries"], data["result"]["full"]) == (2, 3, True)
    code, out, _ = _run("index", "status", "-w", workspace, "--json")
    assert json.loads(out)["sources"] == {"memory": {"files": 2, "entries": 3}}


def test_search_prints_hits_or_json(workspace: str) -> None:
    code, out, _ = _run("search", "otter", "-w", workspace)
    assert code == 0
    assert '1 memory for "otter", best first:' in out
    assert "[1] memory/2026-11-30.md:1 · 2026-11-30\n- the otter swims" in out
    code, out, _ = _run("search", "aisle seats", "-w", workspace, "--json", "--mode", "phrase")
    (hit,) = json.loads(out)
    assert (hit["path"], hit["start_line"], hit["end_line"]) == ("MEMORY.md", 2, 2)
    code, out, _ = _run("search", '"(unbalanced AND', "-w", workspace)
    assert code == 0
    assert out.startswith("No memories match")


def test_get_prints_lines_and_refuses_other_files(workspace: str) -> None:
    code, out, _ = _run("get", "memory/2026-11-30.md", "-w", workspace, "-s", "2")
    assert (code, out) == (0, "- the beaver builds\n")
    code, out, _ = _run("get", "MEMORY.md", "-w", workspace, "--json", "-n", "1")
    assert json.loads(out)["text"] == "# Memory\n"
    code, _, err = _run("get", "AGENTS.md", "-w", workspace)
    assert code == 4
    assert "not a memory file" in err
    code, _, err = _run("get", "memory/missing.md", "-w", workspace)
    assert code == 4
    assert "does not exist" in err
