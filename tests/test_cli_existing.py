"""Issue 25, point 4: read commands on a folder that holds no workspace say so, suggest a
near name, and create nothing (locally or on S3); a misspelt backend creates nothing either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tests.conftest import WorkspaceTarget

from harnessmem.cli import main

READS = [["search", "staging"], ["get", "MEMORY.md"], ["status"], ["index", "status"], ["usage"]]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_on_a_mistyped_folder_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    assert invoke("save", "Staging is on port 5433", "-w", "demo/workspace").exit_code == 0
    before = sorted(p for p in tmp_path.rglob("*") if ".cache" not in p.parts)
    result = invoke(*command, "-w", "demo/workpsace")
    assert result.exit_code == 5, result.output
    assert "demo/workpsace does not exist; nothing was created" in result.stderr
    assert "did you mean 'demo/workspace'?" in result.stderr
    assert sorted(p for p in tmp_path.rglob("*") if ".cache" not in p.parts) == before


def test_an_unrelated_folder_is_not_a_workspace(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print()\n")
    result = invoke("status", "-w", "src")
    assert result.exit_code == 5
    assert "src holds no harnessmem workspace" in result.stderr
    assert "harnessmem init" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_bad_backend_creates_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSMEM_INDEX__BACKEND", "sqlit")
    for command in (["save", "a fact"], ["status"], ["consolidate"]):
        result = invoke(*command, "-w", "fresh")
        assert result.exit_code == 3, result.output
        assert "did you mean 'sqlite'" in result.stderr
    assert not (tmp_path / "fresh").exists()
    assert not (tmp_path / "memory_index.db").exists()


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_reads_on_a_missing_workspace_create_nothing_local_and_s3(
    workspace_target: WorkspaceTarget,
    tmp_path: Path,
    command: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options: dict[str, Any] = workspace_target.storage_options
    monkeypatch.setenv("HARNESSMEM_WORKSPACE__STORAGE_OPTIONS", json.dumps(options))
    result = invoke(*command, "-w", workspace_target.url)
    assert result.exit_code == 5, result.output
    assert "nothing was created" in result.stderr
    assert workspace_target.stored_bytes(tmp_path) == {}
    assert not [p for p in tmp_path.rglob("*") if p.name != ".cache"], "no folder either"
    # Once a write made it, the same read works.
    assert invoke("save", "Staging is on port 5433", "-w", workspace_target.url).exit_code == 0
    assert invoke(*command, "-w", workspace_target.url).exit_code in (0, 4)


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_reads_accept_a_freshly_initialised_workspace_local_and_s3(
    workspace_target: WorkspaceTarget, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options: dict[str, Any] = workspace_target.storage_options
    monkeypatch.setenv("HARNESSMEM_WORKSPACE__STORAGE_OPTIONS", json.dumps(options))
    created = invoke("init", "agent", "-w", workspace_target.url)
    assert created.exit_code == 0, created.output
    result = invoke(*command, "-w", workspace_target.url)
    # get MEMORY.md: no such file yet (4), but a workspace: not "nothing was created" (5).
    assert result.exit_code == (4 if command[0] == "get" else 0), result.output
    assert "nothing was created" not in result.stderr
