"""Issue 25, point 6: output a person reads (no Python reprs or dicts, no cut help)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from harnessmem.cli import main


def _ws(tmp_path: Path) -> str:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2026-11-30.md").write_text("- the otter swims\n")
    return str(root)


def test_maintain_describes_the_consolidation_in_words(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["maintain", "-w", _ws(tmp_path), "--force"])
    assert result.exit_code == 0, result.output
    assert "ConsolidationResult(" not in result.output
    assert "consolidate      done: consolidated 1 daily log into MEMORY.md: 0 -> " in result.output


def test_index_status_prints_fields_and_a_table_not_a_dict(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    assert CliRunner().invoke(main, ["index", "rebuild", "-w", ws]).exit_code == 0
    result = CliRunner().invoke(main, ["index", "status", "-w", ws])
    assert result.exit_code == 0, result.output
    assert "{" not in result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["files", "1"]
    assert ["memory", "1", "1"] in [line.split() for line in lines]


def test_top_level_help_does_not_cut_descriptions() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    commands = result.output.split("Commands:", 1)[1]
    assert "..." not in commands
    assert "…" not in commands
    assert "Run one maintenance tick now and print its report (for cron or a Kubernetes" in (
        " ".join(result.output.split())
    )
