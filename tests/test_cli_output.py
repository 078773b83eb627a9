"""Issue 25, point 6: output a person reads (no Python reprs or dicts, no cut help)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from harnessmem import HarnessSettings
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
    size = next(line.split(None, 1)[1] for line in lines if line.startswith("size"))
    assert re.fullmatch(r"\d+\.\d KB", size), "a size a person reads, not a byte count"


@pytest.mark.parametrize("group", [[], ["index"], ["config"]], ids=["main", "index", "config"])
def test_no_command_list_cuts_descriptions(group: list[str]) -> None:
    result = CliRunner().invoke(main, [*group, "--help"], terminal_width=80)
    assert result.exit_code == 0
    commands = result.output.split("Commands:", 1)[1]
    assert "..." not in commands
    assert "…" not in commands
    listed = " ".join(commands.split())
    command = main.get_command(click.Context(main), group[0]) if group else main
    assert isinstance(command, click.Group)
    for name, sub in command.commands.items():
        first = " ".join((sub.help or "").split("\n\n", 1)[0].split())
        assert f"{name} {first}" in listed


def test_top_level_help_does_not_cut_descriptions() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "Run one maintenance tick now and print its report (for cron or a Kubernetes" in (
        " ".join(result.output.split())
    )


# -- config show: a table that fits, secrets hidden in every form -----------------------------


def _config_show(tmp_path: Path, *args: str, width: int = 100) -> Result:
    config = tmp_path / "harnessmem.toml"
    config.write_text('[model]\nname = "openai/gpt-4o-mini"\noptions = {api_key = "sk-secret"}\n')
    env = {"COLUMNS": str(width)}
    return CliRunner().invoke(main, ["config", "show", "-c", str(config), *args], env=env)


def test_config_show_piped_fits_the_width_and_wraps_long_values(tmp_path: Path) -> None:
    result = _config_show(tmp_path)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100, "no column padded to the longest value"
    assert lines[0].split() == ["setting", "value", "source"]
    first = next(i for i, line in enumerate(lines) if line.startswith("eviction.excluded_tools"))
    assert lines[first].endswith("default")
    value_column = lines[0].index("value")
    wrapped = [lines[first]]
    for line in lines[first + 1 :]:
        if line[:value_column].strip():
            break
        wrapped.append(line)
    assert len(wrapped) > 1, "the long list wraps under its column"
    text = " ".join(line[value_column:].replace("default", "").strip() for line in wrapped)
    assert json.loads(text) == list(HarnessSettings().eviction.excluded_tools)


def test_config_show_hides_secrets_in_json_too(tmp_path: Path) -> None:
    table = _config_show(tmp_path)
    data = _config_show(tmp_path, "--json")
    assert data.exit_code == 0, data.output
    assert "sk-secret" not in table.output
    assert "sk-secret" not in data.output
    rows = {row["setting"]: row["value"] for row in json.loads(data.output)}
    assert rows["model.options"] == {"api_key": "***"}


def _on_a_terminal(*args: str, columns: int) -> str:
    """What ``harnessmem ARGS`` prints to a terminal ``columns`` wide (a pseudo-terminal),
    without its colours."""
    fcntl = pytest.importorskip("fcntl", reason="a pseudo-terminal needs POSIX")
    import struct
    import termios

    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [sys.executable, "-m", "harnessmem.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65_536)
            except OSError:  # EIO: the program ended and closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert process.wait(timeout=60) == 0, b"".join(chunks)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_config_show_on_a_terminal_is_a_rich_table_within_its_width(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text('[model]\nname = "openai/gpt-4o-mini"\noptions = {api_key = "sk-secret"}\n')
    output = _on_a_terminal("config", "show", "-c", str(config), columns=80)
    assert "harnessmem settings" in output
    assert "┃ setting" in output
    assert max(len(line) for line in output.splitlines()) <= 80
    assert "sk-secret" not in output


def test_a_plain_table_cuts_a_long_word_after_a_dot_or_colon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, ``config show`` wraps a value too long for its column after a dot or colon
    (not at the column's edge); columns are two spaces apart, with no padding at the end."""
    monkeypatch.chdir(tmp_path)  # the source column names the file as given: c.toml
    Path("c.toml").write_text(
        '[model]\nname = "harnessmem.backends.extractive:ExtractiveBackend"\n'
    )
    # Every other setting from its default: no variable of the test set-up widens a column.
    env = {"COLUMNS": "80", **dict.fromkeys(k for k in os.environ if k.startswith("HARNESSMEM_"))}
    result = CliRunner().invoke(main, ["config", "show", "-c", "c.toml"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(line == line.rstrip() and len(line) <= 80 for line in lines)
    names = [line.split()[0] for line in lines[1:] if line[:1].strip()]
    assert lines[0].index("value") == max(len(name) for name in names) + 2
    column = lines[0].index("value")
    row = next(i for i, line in enumerate(lines) if line.startswith("model.name "))
    assert lines[row][column:].split("  ")[0] == '"harnessmem.backends.extractive:'
    assert lines[row + 1] == " " * column + 'ExtractiveBackend"'


# -- replay: shifted dates said, and the same everywhere ------------------------------------------


def test_replay_says_it_moved_the_dates_and_the_session_log_agrees_with_the_daily_logs(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    result = CliRunner().invoke(main, ["replay", "--example", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    moved = re.search(r"^  dates moved (\d+) days later, .*--keep-dates", result.output, re.M)
    assert moved is not None, result.output
    days = {path.stem for path in (ws / "memory").glob("*.md")}
    found = CliRunner().invoke(main, ["search", "--sessions", "staging", "-w", str(ws), "--json"])
    hits = json.loads(found.output)
    assert hits
    log = (ws / "sessions" / "tidewater-week.log.jsonl").read_text().splitlines()
    for hit in hits:
        message = json.loads(log[hit["start_line"] - 1])["message"]
        assert message["timestamp"].startswith(hit["date"]), "the message's time, shifted"
        assert hit["date"] in days, "a day the daily logs know"


def test_replay_with_keep_dates_says_nothing_of_moving(tmp_path: Path) -> None:
    args = ["replay", "--example", "--keep-dates", "--no-consolidate", "-w", str(tmp_path / "w")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "dates moved" not in result.output
    assert "Monday 2026-03-09" in result.output


# -- --json: every data command prints one JSON document and nothing else -------------------------

_JSON_RUNS = {
    "search": ["search", "otter"],
    "search --sessions": ["search", "--sessions", "otter"],
    "get": ["get", "memory/2026-11-30.md"],
    "why": ["why", "otter"],
    "save": ["save", "the heron waits"],
    "forget": ["forget", "otter", "--yes"],
    "forget --dry-run": ["forget", "otter", "--dry-run"],
    "edit": ["edit", "otter", "the beaver swims", "--yes"],
    "status": ["status"],
    "consolidate": ["consolidate"],
    "maintain": ["maintain", "--force"],
    "usage": ["usage"],
    "audit": ["audit", "--since", "2000-01-01"],
    "plugins": ["plugins"],
    "index rebuild": ["index", "rebuild"],
    "index status": ["index", "status"],
    "config show": ["config", "show"],
    "config validate": ["config", "validate"],
    "export": ["export", "{tmp}/ws.tar.gz"],
    "import": ["import", "{tmp}/ws.tar.gz"],  # after the export: every file is already there
}


def test_the_json_runs_cover_every_command_that_takes_json() -> None:
    def named(group: click.Group, prefix: str = "") -> set[str]:
        found: set[str] = set()
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                found |= named(command, f"{prefix}{name} ")
            elif any("--json" in param.opts for param in command.params):
                found.add(prefix + name)
        return found

    assert named(main) == {name for name in _JSON_RUNS if "--" not in name} | {"init"}


@pytest.mark.parametrize("name", sorted(_JSON_RUNS))
def test_json_output_is_one_valid_document(tmp_path: Path, name: str) -> None:
    ws = _ws(tmp_path)
    if name == "import":
        CliRunner().invoke(main, ["export", f"{tmp_path}/ws.tar.gz", "-w", ws])
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in _JSON_RUNS[name]]
    result = CliRunner().invoke(main, [*args, "-w", ws, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict | list)
    assert result.stdout.strip().startswith(("{", "["))


def test_init_json_is_one_valid_document(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", str(tmp_path / "agent"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["config"].endswith("harnessmem.toml")
