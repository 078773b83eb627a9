from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem.cli import main
from harnessmem.errors import ConfigError
from harnessmem.settings import HarnessSettings, parse_duration, settings_leaves

# The defaults DESIGN §5 fixes (from the seed); a change here is a change of contract.
DESIGN_DEFAULTS = {
    "compaction.trigger_messages": 50,
    "compaction.trigger_tokens": 80_000,
    "compaction.keep_messages": 20,
    "compaction.keep_tokens": 0,
    "compaction.flush_before_compact": True,
    "compaction.offload_before_compact": True,
    "compaction.truncate_args": None,
    "eviction.max_result_chars": 80_000,
    "eviction.preview_chars": 2_000,
    "eviction.path": "large_tool_results",
    "eviction.excluded_tools": [
        "read_file",
        "write_file",
        "edit_file",
        "grep_files",
        "glob_files",
        "list_files",
        "memory_search",
        "memory_get",
        "session_search",
    ],
    "consolidation.max_memory_tokens": 4_000,
    "maintenance.interval": 6 * 3600.0,
    "maintenance.min_gap": 30 * 60.0,
    "maintenance.daily_file_retention_days": 90,
    "maintenance.session_retention_days": 180,
    "index.backend": "sqlite",
    "workspace.timezone": "UTC",
    "model.name": None,
    "flush.mode": "sync",
    "context.max_tokens": 8_000,
    "consolidation.max_entry_loss": 0.25,
    "consolidation.history_keep": 10,
}


def test_defaults_are_the_designs() -> None:
    values = dict(settings_leaves(HarnessSettings.load()))
    for name, expected in DESIGN_DEFAULTS.items():
        assert values[name] == expected, name


def test_truncate_args_defaults_when_enabled() -> None:
    settings = HarnessSettings.load(compaction={"truncate_args": {}})
    truncate = settings.compaction.truncate_args
    assert truncate is not None
    assert (truncate.trigger_messages, truncate.trigger_tokens, truncate.max_arg_chars) == (
        25,
        40_000,
        2_000,
    )


def test_without_a_model_name_the_extractive_backend_serves() -> None:
    assert HarnessSettings.load().model.resolved_backend == "extractive"
    named = HarnessSettings.load(model={"name": "openai/gpt-4o-mini"})
    assert named.model.resolved_backend == "litellm"


def _all_fields(model: type, prefix: str = "") -> list[tuple[str, object]]:
    found = []
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        found.append((prefix + name, field))
        annotation = field.annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
                found.extend(_all_fields(candidate, prefix + name + "."))
    return found


def test_every_setting_has_a_description() -> None:
    missing = [name for name, field in _all_fields(HarnessSettings) if not field.description]
    assert not missing


def test_env_variable_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSMEM_COMPACTION__TRIGGER_MESSAGES", "31")
    settings = HarnessSettings.load()
    assert settings.compaction.trigger_messages == 31
    assert settings.sources()["compaction.trigger_messages"] == (
        "env HARNESSMEM_COMPACTION__TRIGGER_MESSAGES"
    )


def test_priority_arguments_over_env_over_file_over_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "h.toml"
    config.write_text(
        "[compaction]\ntrigger_messages = 10\nkeep_messages = 5\ntrigger_tokens = 1000\n"
    )
    monkeypatch.setenv("HARNESSMEM_COMPACTION__KEEP_MESSAGES", "6")
    monkeypatch.setenv("HARNESSMEM_COMPACTION__TRIGGER_TOKENS", "2000")
    overrides = {"compaction": {"trigger_tokens": 3000}}
    settings = HarnessSettings.load(config, **overrides)
    compaction = settings.compaction
    assert (compaction.trigger_messages, compaction.keep_messages) == (10, 6)
    assert compaction.trigger_tokens == 3000
    assert compaction.keep_tokens == 0
    sources = settings.sources(overrides)
    assert sources["compaction.trigger_messages"] == str(config)
    assert sources["compaction.keep_messages"].startswith("env ")
    assert sources["compaction.trigger_tokens"] == "argument"
    assert sources["compaction.keep_tokens"] == "default"


def test_misspelt_key_names_dotted_path_and_suggests(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text("[compaction]\ntrigger_mesages = 30\n")
    with pytest.raises(ConfigError) as info:
        HarnessSettings.load(config)
    (line,) = info.value.problems
    assert line.startswith("compaction.trigger_mesages: unknown setting (got 30)")
    assert "did you mean 'compaction.trigger_messages'" in line
    assert str(config) in line


def test_bad_values_are_reported_all_at_once_with_value(tmp_path: Path) -> None:
    config = tmp_path / "h.yaml"
    config.write_text(
        "workspace:\n  timezone: Mars/Olympus\ncompaction:\n  keep_messages: -1\n"
        "maintenance:\n  interval: soon\n"
    )
    with pytest.raises(ConfigError) as info:
        HarnessSettings.load(config)
    problems = info.value.problems
    assert len(problems) == 3
    assert any(p.startswith("workspace.timezone:") and "'Mars/Olympus'" in p for p in problems)
    assert any(p.startswith("compaction.keep_messages:") and "(got -1)" in p for p in problems)
    assert any(p.startswith("maintenance.interval:") and "'soon'" in p for p in problems)


@pytest.mark.parametrize(
    "path",
    [".locks", ".locks/evicted", "a/.hidden", "memory", "memory/evicted", "sessions/", "MEMORY.md"],
)
def test_eviction_path_may_not_be_a_reserved_folder(path: str) -> None:
    """'.locks' used to be accepted, and then every eviction failed (PathNotAllowed)."""
    with pytest.raises(ConfigError) as caught:
        HarnessSettings(eviction={"path": path})
    (problem,) = caught.value.problems
    assert problem.startswith("eviction.path: ")
    assert "is reserved for harnessmem's own files" in problem
    assert "use a folder of its own, such as 'large_tool_results'" in problem


@pytest.mark.parametrize("path", ["..", "../x", "/", "", "s3://bucket/x", "a\\b", "a/../.."])
def test_eviction_path_must_be_a_folder_inside_the_workspace(path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        HarnessSettings(eviction={"path": path})
    (problem,) = caught.value.problems
    assert problem.startswith("eviction.path: must name a folder inside the workspace"), problem


@pytest.mark.parametrize("path", ["large_tool_results", "spill/", "/spill", "tools/out", "memo"])
def test_eviction_path_accepts_a_folder_of_its_own(path: str) -> None:
    assert HarnessSettings(eviction={"path": path}).eviction.path == path


def test_direct_construction_raises_config_error_too() -> None:
    with pytest.raises(ConfigError, match=r"flush\.mode"):
        HarnessSettings(flush={"mode": "sometimes"})


def test_misspelt_env_variable_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESSMEM_COMPACTION__TRIGGER_MESAGES", "3")
    with pytest.raises(ConfigError, match=r"compaction\.trigger_mesages"):
        HarnessSettings.load()


def test_config_file_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert HarnessSettings.load().compaction.keep_messages == 20
    Path("harnessmem.toml").write_text("[compaction]\nkeep_messages = 7\n")
    assert HarnessSettings.load().compaction.keep_messages == 7
    other = tmp_path / "other.yml"
    other.write_text("compaction:\n  keep_messages: 8\n")
    monkeypatch.setenv("HARNESSMEM_CONFIG", str(other))
    assert HarnessSettings.load().compaction.keep_messages == 8
    assert HarnessSettings.load(tmp_path / "harnessmem.toml").compaction.keep_messages == 7


def test_missing_or_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        HarnessSettings.load(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[compaction\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        HarnessSettings.load(broken)
    ini = tmp_path / "settings.ini"
    ini.write_text("x=1")
    with pytest.raises(ConfigError, match="unknown format"):
        HarnessSettings.load(ini)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("30m", 1800.0), ("6h", 21600.0), ("7d", 604800.0), ("250ms", 0.25), (12, 12)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_cli_validate_reports_one_line_per_problem_without_traceback(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text("[compaction]\ntrigger_mesages = 30\nkeep_messages = -2\n")
    result = CliRunner().invoke(main, ["config", "validate", str(config)])
    assert result.exit_code == 3, "3: settings that cannot be used"
    lines = result.output.strip().splitlines()
    assert len(lines) == 2
    assert any("compaction.trigger_mesages" in line for line in lines)
    assert "Traceback" not in result.output


def test_cli_validate_ok(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text("[compaction]\ntrigger_messages = 30\n")
    result = CliRunner().invoke(main, ["config", "validate", str(config)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(": ok")


def test_cli_show_reports_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text('[model]\nname = "openai/gpt-4o-mini"\noptions = {api_key = "sk-secret"}\n')
    monkeypatch.setenv("HARNESSMEM_COMPACTION__TRIGGER_MESSAGES", "31")
    result = CliRunner().invoke(
        main, ["config", "show", "--config", str(config), "-w", str(tmp_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    import json

    rows = {row["setting"]: row for row in json.loads(result.output)}
    assert rows["compaction.trigger_messages"]["value"] == 31
    assert rows["compaction.trigger_messages"]["source"].startswith("env ")
    assert rows["model.name"]["source"] == str(config)
    assert rows["workspace.url"] == {
        "setting": "workspace.url",
        "value": str(tmp_path),
        "source": "argument",
    }
    assert rows["compaction.keep_messages"]["source"] == "default"
    table = CliRunner().invoke(main, ["config", "show", "--config", str(config)])
    assert table.exit_code == 0
    assert "sk-secret" not in table.output


def test_cli_show_bad_config_is_one_error(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text("[compaction]\ntrigger_mesages = 30\n")
    result = CliRunner().invoke(main, ["config", "show", "--config", str(config)])
    assert result.exit_code == 3
    assert "compaction.trigger_mesages" in result.output
    assert "Traceback" not in result.output
