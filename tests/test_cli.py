"""The command line: consistent options, errors as one line plus a hint with a documented exit
status, and the init, save, consolidate and status commands."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.settings import HarnessSettings, settings_leaves

EXIT = {"failed": 1, "usage": 2, "config": 3, "input": 4, "workspace": 5}


def invoke(*args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(main, list(args), **kwargs)


def assert_one_error(result: Result, code: int, *phrases: str) -> None:
    """Exit ``code``; stderr is ``error: ...`` then ``hint: ...``; no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: "), lines
    assert len(lines) == 2, lines
    assert lines[1].startswith("hint: "), lines
    for phrase in phrases:
        assert phrase in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found.update(_commands(command, f"{prefix}{name} "))
        else:
            found[prefix + name] = command
    return found


COMMANDS = _commands(main)
DATA_COMMANDS = {
    "search", "get", "why", "save", "forget", "edit", "status", "consolidate", "maintain", "usage",
    "audit",
    "plugins", "init",
    "index rebuild", "index status", "config show", "config validate", "export", "import",
}  # fmt: skip


def test_the_issue_s_commands_exist() -> None:
    assert set(COMMANDS) == {*DATA_COMMANDS, "replay", "chat", "inspect", "mcp"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_the_common_options(name: str) -> None:
    # Every command, init included (it opens the workspace with the settings), reads the
    # same settings sources: -c/--config, $HARNESSMEM_CONFIG, the environment.
    options = {opt for param in COMMANDS[name].params for opt in param.opts}
    assert {"-w", "--workspace", "-c", "--config", "--debug"} <= options
    if name in DATA_COMMANDS:
        assert "--json" in options
    assert COMMANDS[name].help, f"{name} has no help text"


def test_help_lists_the_commands_and_starts_lightly() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for name in ("init", "replay", "search", "status", "chat"):
        assert f"  {name} " in result.output
    code = (
        "import sys, harnessmem.cli;"
        "print([m for m in ('litellm', 'tiktoken', 'sqlalchemy', 'fsspec', 'rich', 'pydantic',"
        " 'mcp', 'starlette', 'uvicorn')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", "commands import what they need when they run"
    module = subprocess.run(
        [sys.executable, "-m", "harnessmem.cli", "--help"], capture_output=True, text=True
    )
    assert module.returncode == 0
    assert "replay" in module.stdout


# -- errors -------------------------------------------------------------------------------------


def test_a_missing_transcript(tmp_path: Path) -> None:
    result = invoke("replay", str(tmp_path / "nope.json"), "-w", str(tmp_path / "ws"))
    assert_one_error(result, EXIT["input"], "nope.json not found", "--example")


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"role": "user", "content": "hi"},')
    result = invoke("replay", str(path), "-w", str(tmp_path / "ws"))
    assert_one_error(result, EXIT["input"], "broken.json is not valid JSON", "line 1")


def test_a_transcript_that_is_not_a_conversation(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[{"role": "user"}]')
    result = invoke("replay", str(path), "-w", str(tmp_path / "ws"))
    assert_one_error(result, EXIT["input"], "message 0: user message has no content")


def test_an_unknown_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSMEM_INDEX__BACKEND", "sqlitte")
    result = invoke("status", "-w", str(tmp_path / "ws"))
    assert_one_error(result, EXIT["config"], "no index backend 'sqlitte'", "did you mean 'sqlite'")


def test_a_bad_setting(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text("[compaction]\ntrigger_messages = -1\n")
    result = invoke("search", "x", "-c", str(config))
    assert result.exit_code == EXIT["config"]
    assert result.stderr.startswith("error: invalid harnessmem settings (1 problem):")
    assert "compaction.trigger_messages" in result.stderr


@pytest.mark.parametrize(
    ("url", "phrase"),
    [("s3://", "names no bucket"), ("nosuch://bucket/ws", "no store for protocol 'nosuch'")],
)
def test_a_bad_url(tmp_path: Path, url: str, phrase: str) -> None:
    result = invoke("status", "-w", url)
    assert_one_error(result, EXIT["workspace"], f"open workspace {url!r} failed", phrase)


@pytest.mark.s3
def test_a_missing_bucket(
    s3_storage_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESSMEM_WORKSPACE__STORAGE_OPTIONS", json.dumps(s3_storage_options))
    result = invoke("search", "anything", "-w", "s3://no-such-bucket-here/agent")
    assert_one_error(
        result,
        EXIT["workspace"],
        "bucket 'no-such-bucket-here' does not exist",
        "create the bucket",
    )


@pytest.mark.s3
def test_an_unreachable_store(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    options = {
        "endpoint_url": "http://127.0.0.1:9",  # nothing listens on the discard port
        "key": "testing",
        "secret": "testing",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
    }
    monkeypatch.setenv("HARNESSMEM_WORKSPACE__STORAGE_OPTIONS", json.dumps(options))
    result = invoke("status", "-w", "s3://bucket/agent")
    assert_one_error(result, EXIT["workspace"], "is not reachable", "endpoint_url")


def test_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: MemoryHarness) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(MemoryHarness, "consolidate", broken)
    result = invoke("consolidate", "-w", str(tmp_path / "ws"))
    assert_one_error(result, EXIT["failed"], "unexpected RuntimeError: boom", "--debug")
    for args in (["--debug", "consolidate"], ["consolidate", "--debug"]):
        debug = invoke(*args, "-w", str(tmp_path / "ws"))
        assert isinstance(debug.exception, RuntimeError), "the traceback is Python's own"


def test_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: MemoryHarness) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryHarness, "consolidate", interrupted)
    result = invoke("consolidate", "-w", str(tmp_path / "ws"))
    assert result.exit_code == 130
    assert "interrupted" in result.stderr


def test_warnings_are_shown_as_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ws" / "memory").mkdir(parents=True)
    monkeypatch.setenv("HARNESSMEM_COMPACTION__KEEP_MESSAGES", "60")
    result = invoke("status", "-w", str(tmp_path / "ws"))
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: compaction.keep_messages (60)")


# -- init ---------------------------------------------------------------------------------------


def test_init_writes_a_workspace_and_a_commented_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke("init", "agent")
    assert result.exit_code == 0, result.output
    assert "created agent/harnessmem.toml" in result.output
    assert "cd agent && harnessmem status" in result.output
    assert (tmp_path / "agent" / "workspace" / "memory").is_dir()
    again = invoke("init", "agent")
    assert_one_error(again, EXIT["failed"], "already exists", "--force")
    assert invoke("init", "agent", "--force").exit_code == 0
    monkeypatch.chdir(tmp_path / "agent")
    settings = HarnessSettings.load()
    assert settings.config_file == Path("harnessmem.toml")
    assert settings.workspace.url == "./workspace"
    status = invoke("status")
    assert status.exit_code == 0, status.output
    assert f"workspace    {tmp_path / 'agent' / 'workspace'}" in status.output


def test_init_reads_the_settings_of_c(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('[workspace]\nurl = "memories"\n')
    result = invoke("init", "agent", "-c", str(base))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "agent" / "memories" / "memory").is_dir()
    assert '\nurl = "memories"\n' in (tmp_path / "agent" / "harnessmem.toml").read_text()
    base.write_text('[index]\nbackend = "sqlit"\n')
    result = invoke("init", "other", "-c", str(base))
    assert_one_error(result, EXIT["config"], "index.backend: no index backend 'sqlit'")
    assert not (tmp_path / "other").exists()


def _init_sources(
    how: str, options: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """Give init the S3 storage options the way ``how`` says; the extra arguments."""
    if how == "env":
        monkeypatch.setenv("HARNESSMEM_WORKSPACE__STORAGE_OPTIONS", json.dumps(options))
        return []
    base = tmp_path / "base.toml"
    base.write_text(
        "[workspace.storage_options]\n"
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    )
    if how == "HARNESSMEM_CONFIG":
        monkeypatch.setenv("HARNESSMEM_CONFIG", str(base))
        return []
    return ["-c", str(base)]


@pytest.mark.s3
@pytest.mark.parametrize("how", ["env", "HARNESSMEM_CONFIG", "-c"])
def test_init_makes_a_workspace_on_an_s3_compatible_store(
    how: str,
    s3_storage_options: dict[str, Any],
    s3_bucket: str,
    s3_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without the storage options, s3fs would go to AWS: send it to a closed loopback port
    # instead, so that the old behaviour fails without leaving the machine.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    extra = _init_sources(how, s3_storage_options, tmp_path, monkeypatch)
    url = f"s3://{s3_bucket}/agents/support"
    with s3_server.record() as requests:
        result = invoke("init", "agent", "-w", url, *extra)
    assert result.exit_code == 0, result.output
    assert f"created workspace {url}" in result.output
    puts = [(r.operation, r.key) for r in requests if r.method == "PUT"]
    assert puts == [("PutObject", "agents/support/memory/")], "one folder marker, nothing else"
    # The read commands see the new, empty workspace at once.
    with s3_server.record() as requests:
        status = invoke("status", "-w", url, *extra)
    assert status.exit_code == 0, status.output
    assert f"workspace    {url}  (0 files, 0 B)" in status.output
    assert [r.operation for r in requests[:2]] == ["HeadBucket", "ListObjectsV2"]
    assert [r.operation for r in requests].count("HeadBucket") == 1
    search = invoke("search", "staging", "-w", url, *extra)
    assert search.exit_code == 0, search.output
    assert "No memories match" in search.output
    written = (tmp_path / "agent" / "harnessmem.toml").read_text()
    assert f'\nurl = "{url}"\n' in written
    if how == "env":
        assert "\nstorage_options = " not in written, "options from the environment stay there"
    else:
        # The new config reaches the store by itself.
        monkeypatch.delenv("HARNESSMEM_CONFIG", raising=False)
        monkeypatch.chdir(tmp_path / "agent")
        again = invoke("status")
        assert again.exit_code == 0, again.output
        assert f"workspace    {url}" in again.output


def test_the_config_template_lists_every_setting_and_uncomments_cleanly(tmp_path: Path) -> None:
    """The harnessmem.toml that ``harnessmem init`` writes."""
    url = str(tmp_path / "agent")
    result = invoke("init", str(tmp_path / "here"), "-w", url)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "here" / "harnessmem.toml").read_text(encoding="utf-8")
    defaults = HarnessSettings.load(None, workspace={"url": url})
    assert HarnessSettings(**tomllib.loads(text)) == defaults, "only the URL is set"
    assert f'\nurl = "{url}"\n' in text
    for name, _ in settings_leaves(defaults)[1:]:
        key = name.rsplit(".", 1)[-1]
        assert f"# {key} = " in text or f"# {key}: unset" in text or f".{key}]" in text, name
    setting = re.compile(r"^# (\[[a-z_.]+\]|[a-z_]+ = )")
    uncommented = "\n".join(line[2:] if setting.match(line) else line for line in text.splitlines())
    everything = HarnessSettings(**tomllib.loads(uncommented))
    assert everything.compaction.trigger_messages == 50
    assert everything.maintenance.interval == 6 * 3600, 'durations read back ("6h")'
    assert everything.model.name == "openai/gpt-4o-mini", "unset settings show an example"
    # The header says what is set: the one active setting is the workspace's URL.
    active = [x for x in text.splitlines() if x.strip() and not x.startswith(("#", "["))]
    assert active == [f'url = "{url}"']
    header = " ".join(x.lstrip("# ") for x in text.splitlines()[:3])
    assert "workspace.url is set" in header
    assert "every other setting is listed with its default, commented out" in header


# -- save, consolidate, status --------------------------------------------------------------------


def test_save(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    result = invoke("save", "Maya prefers small pull requests", "-w", ws)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Saved 1 memory to MEMORY.md")
    again = invoke("save", "-w", ws, "--json", "--", "- Maya prefers small pull requests")
    assert json.loads(again.output)["duplicates"] == 1
    assert invoke("save", "  ", "-w", ws).exit_code == EXIT["usage"]


def test_forget_previews_asks_and_removes(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    invoke("save", "-w", ws, "--", "- Maya's cat is called Mirko\n- Maya lives in Porto")
    declined = invoke("forget", "Mirko", "-w", ws, input="n\n")
    assert declined.exit_code == 0, declined.output
    assert "would remove 1 fact matching 'Mirko'" in declined.output
    assert "MEMORY.md:" in declined.output
    assert "Mirko" in (tmp_path / "ws" / "MEMORY.md").read_text()
    done = invoke("forget", "Mirko", "-w", ws, input="y\n")
    assert done.exit_code == 0, done.output
    assert "removed 1 fact matching 'Mirko' in 1 file" in done.output
    assert "Mirko" not in (tmp_path / "ws" / "MEMORY.md").read_text()
    assert json.loads(invoke("search", "Mirko", "-w", ws, "--json").output) == []
    assert_one_error(invoke("forget", "Mirko", "-w", ws, "--yes"), EXIT["input"], "nothing")
    assert_one_error(invoke("forget", "Maya", "-w", ws, "--json"), EXIT["usage"], "--yes")


def test_forget_refuses_a_query_that_matches_too_much(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    invoke("save", "-w", ws, "--", "- Maya likes tea\n- Maya likes jazz\n- Maya likes Porto")
    result = invoke("forget", "Maya likes", "--limit", "2", "--yes", "-w", ws)
    assert_one_error(result, EXIT["input"], "3 facts match", "limit of 2")
    assert (tmp_path / "ws" / "MEMORY.md").read_text().count("Maya likes") == 3


def test_edit_replaces_a_fact(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    invoke("save", "-w", ws, "--", "- Maya lives in Porto")
    result = invoke("edit", "Porto", "Maya lives in Braga", "--yes", "-w", ws, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["replacement"] == "Maya lives in Braga"
    assert "- Maya lives in Braga" in (tmp_path / "ws" / "MEMORY.md").read_text()


def test_save_keeps_prose_and_reports_headings(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    text = "## Ops\nAna lives in Porto\n- The prod db is on port 6543\n- B1\nB2 after list"
    result = invoke("save", "-w", str(ws), "--json", "--", text)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["entries"] == [
        "Ana lives in Porto",
        "The prod db is on port 6543",
        "B1",
        "B2 after list",
    ]
    assert data["left_out"] == ["'## Ops' (a heading, not a fact)"]
    plain = invoke("save", "-w", str(ws), "# Title\n- Maya owns the pager")
    assert plain.output.startswith(
        "Saved 1 memory to MEMORY.md. Not saved: '# Title' (a heading, not a fact)."
    ), plain.output
    assert "B2 after list" in (ws / "MEMORY.md").read_text()


def test_consolidate(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-29.md").write_text(
        "## Memory Flush — 2026-11-29T10:00:00Z · session s\n- The staging database is on 5433\n"
    )
    result = invoke("consolidate", "-w", str(ws))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("consolidated 1 daily log into MEMORY.md: 0 -> ")
    assert "5433" in (ws / "MEMORY.md").read_text()
    again = invoke("consolidate", "-w", str(ws), "--json")
    assert json.loads(again.output)["status"] == "nothing_new"


def test_a_rejected_consolidation_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harnessmem.memory.consolidation import ConsolidationResult

    def rejected(self: MemoryHarness) -> ConsolidationResult:
        return ConsolidationResult("rejected", reason="the answer was empty")

    monkeypatch.setattr(MemoryHarness, "consolidate", rejected)
    result = invoke("consolidate", "-w", str(tmp_path / "ws"))
    assert result.exit_code == EXIT["failed"]
    assert "rewrite rejected, MEMORY.md unchanged: the answer was empty" in result.output


def test_status_shows_a_failing_summariser(tmp_path: Path) -> None:
    """Issue 16: the summariser's recent failures (errors and rejected answers) show."""
    from harnessmem.errors import ModelUnavailableError
    from harnessmem.testing import ScriptedModel

    answers = iter([ModelUnavailableError("the summariser is down"), "Just prose, no sections."])

    def reply(messages: list[dict[str, Any]], purpose: str) -> str | BaseException:
        return next(answers) if purpose == "summary" else "NO_REPLY"

    ws = tmp_path / "ws"
    with MemoryHarness.open(
        ws,
        model=ScriptedModel(reply),
        compaction={"trigger_messages": 6, "keep_messages": 2, "summary_backoff_max": 0},
        maintenance={"enabled": False},
        flush={"enabled": False},
    ) as harness:
        session = harness.session("s")
        sent: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
        for turn in range(8):
            sent = session.before_reasoning(
                [
                    *sent,
                    {"role": "user", "content": f"q{turn}"},
                    {"role": "assistant", "content": "a"},
                ]
            )
    result = invoke("status", "-w", str(ws))
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines() if line.strip())
    assert lines["upkeep"].startswith("summary 2 of 2 failed today (1 answers rejected)")
    assert "failing now: the summariser's answer was rejected: the summary lacks" in lines["upkeep"]
    data = json.loads(invoke("status", "-w", str(ws), "--json").output)
    assert data["upkeep"]["summary"]["failures"] == 2


def test_status(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    empty = invoke("status", "-w", str(ws))
    assert empty.exit_code == 0, empty.output
    assert "daily logs   none yet" in empty.output
    assert "MEMORY.md    not written yet" in empty.output
    assert "maintenance  never run here" in empty.output
    (ws / "memory" / "2026-11-28.md").write_text("- The staging database is on port 5433\n")
    (ws / "memory" / "2026-11-29.md").write_text("- Jonas is the release manager\n")
    assert invoke("maintain", "-w", str(ws)).exit_code == 0
    (ws / "memory" / "2026-11-29.md").write_text("- Jonas is the release manager\n- more\n")
    result = invoke("status", "-w", str(ws))
    assert result.exit_code == 0, result.output
    lines = dict(line.split(None, 1) for line in result.output.splitlines() if line.strip())
    assert lines["daily"].startswith("logs   2 (2026-11-28 to 2026-11-29")
    assert lines["MEMORY.md"].split(" tokens")[0].endswith("of 4,000")
    assert "1 daily log with 7 B not consolidated yet" in lines["watermark"]
    assert lines["maintenance"].startswith("last tick ")
    assert "archive done" in lines["maintenance"]
    assert lines["index"].startswith("sqlite at ")
    data = json.loads(invoke("status", "-w", str(ws), "--json").output)
    assert data["daily_logs"]["count"] == 2
    assert data["memory_md"]["budget"] == 4_000
    assert data["watermark"]["waiting_logs"] == 1
    assert data["model"] == {"backend": "extractive", "name": None, "offline": True}
    assert data["usage"]["calls"] >= 1
    assert "upkeep" not in lines  # nothing failed


# -- the commands we suggest run as the user ran harnessmem -------------------------------------


@pytest.mark.parametrize(
    ("typed", "on_path", "absolute", "shown"),
    [
        (".venv/bin/harnessmem", None, False, ".venv/bin/harnessmem"),
        (".venv/bin/harnessmem", None, True, "<absolute>"),
        # The same program is on PATH (the environment is active): its name is enough.
        (".venv/bin/harnessmem", ".venv/bin/harnessmem", False, "harnessmem"),
        ("/opt/other/harnessmem", "/usr/bin/harnessmem", False, "/opt/other/harnessmem"),
        ("harnessmem", "/usr/bin/harnessmem", False, "harnessmem"),
        # Not started as the script (python -m, a test runner): the plain name.
        ("/usr/lib/python3/pytest", None, False, "harnessmem"),
    ],
)
def test_suggested_commands_follow_how_harnessmem_was_run(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    typed: str,
    on_path: str | None,
    absolute: bool,
    shown: str,
) -> None:
    """The next steps ``harnessmem init`` prints: run after a ``cd`` (init of another
    folder), the command is absolute."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [typed])
    monkeypatch.setattr(shutil, "which", lambda name: on_path)
    expected = os.path.abspath(typed) if shown == "<absolute>" else shown
    folder, go = ("there", "cd there && ") if absolute else (".", "")
    result = invoke("init", folder)
    assert result.exit_code == 0, result.output
    assert f"\n  {go}{shlex.quote(expected)} status " in result.output, result.output


def test_the_repository_holds_no_symlink() -> None:
    """A committed symlink points into one machine (`.venv-main -> /work/main/.venv`)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: nothing to list")
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000")]
    assert links == [], f"symlinks in the repository: {links}"


@pytest.mark.parametrize("command", ["inspect", "mcp"])
def test_a_busy_port_is_one_clear_error(command: str, tmp_path: Path) -> None:
    import socket

    pytest.importorskip("starlette", reason="the inspector and mcp --http need their extras")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        CliRunner().invoke(main, ["init", str(tmp_path / "ws")])
        args = ["--port", str(port)] if command == "inspect" else ["--http", f"127.0.0.1:{port}"]
        result = CliRunner().invoke(main, [command, "-w", str(tmp_path / "ws"), *args])
    assert result.exit_code == 4, result.output
    assert f"error: port {port} on 127.0.0.1 is in use" in result.output
    assert "hint: pass a free one with" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["inspect", "mcp"])
def test_sigterm_stops_a_server_closing_its_workspace_with_one_line(
    command: str, tmp_path: Path, cli_server: Callable[..., tuple[Any, str]]
) -> None:
    """SIGTERM (what a service manager sends) used to kill the server where it stood:
    uvicorn raised the signal again after its shutdown, so the harness was never closed
    and nothing was said. It now returns through the harness's close, with one line."""
    import signal
    import urllib.error
    import urllib.request

    pytest.importorskip("uvicorn", reason="the servers need their extras")
    workspace = tmp_path / "ws"
    CliRunner().invoke(main, ["save", "Ana prefers aisle seats", "-w", str(workspace)])
    args = ["--port", "0"] if command == "inspect" else ["--http", "127.0.0.1:0"]
    server, url = cli_server(command, "-w", str(workspace), *args)
    assert ":0/" not in url, "the real port, not the one asked for"
    # An answer (an error status is one) means the server runs and handles signals.
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(url, timeout=30).close()
    server.send_signal(signal.SIGTERM)
    _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert err.strip().splitlines()[-1] == (
        f"harnessmem {command}: stopped (SIGTERM); the "
        + ("workspace is closed" if command == "inspect" else "workspaces are closed")
    )
