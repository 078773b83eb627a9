"""Issue 25, point 2: what the settings name (backends, their options, hook plugins and their
options) is checked against what is installed, by ``config validate`` and when a harness is
built, with the setting, its source and a did-you-mean; before anything is created."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from harnessmem import ConfigError, HarnessSettings, MemoryHarness, hookimpl
from harnessmem.cli import main
from harnessmem.errors import BackendNotFound
from harnessmem.testing import ScriptedModel

#: A config that harnessmem used to accept, and what validate now says about it.
BAD_CONFIGS = {
    "index backend": (
        '[index]\nbackend = "sqlit"\n',
        "index.backend: no index backend 'sqlit'",
        "did you mean 'sqlite'?",
    ),
    "index option": (
        "[index.options]\nbusy_timeot = 3\n",
        "index.options.busy_timeot: unknown setting (got 3)",
        "did you mean 'index.options.busy_timeout'?",
    ),
    "model backend": (
        '[model]\nbackend = "extractiv"\n',
        "model.backend: no model backend 'extractiv'",
        "did you mean 'extractive'?",
    ),
    "purpose backend": (
        '[model.summary]\nbackend = "litelm"\n',
        "model.summary.backend: no model backend 'litelm'",
        "did you mean 'litellm'?",
    ),
    "model option": (
        "[model.options]\nsummary_sentence = 2\n",
        "model.options.summary_sentence: unknown setting (got 2)",
        "did you mean 'model.options.summary_sentences'?",
    ),
    "plugin option": (
        '[plugins.settings.redaction]\nreplacment = "#"\n',
        "plugins.settings.redaction.replacment: unknown setting (got '#')",
        "did you mean 'plugins.settings.redaction.replacement'?",
    ),
    "disabled plugin": (
        '[plugins]\ndisable = ["redacton"]\n',
        "plugins.disable: no hook plugin 'redacton' is installed",
        "did you mean 'redaction'?",
    ),
    "only plugin": (
        '[plugins]\nonly = ["compaction", "flsh"]\n',
        "plugins.only: no hook plugin 'flsh' is installed",
        "did you mean 'flush'?",
    ),
    "options of no plugin": (
        "[plugins.settings.redactor]\npatterns = []\n",
        "plugins.settings.redactor: options for no installed hook plugin",
        "did you mean 'plugins.settings.redaction'?",
    ),
}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "harnessmem.toml"


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_validate_loads_what_the_file_names(config: Path, case: str) -> None:
    text, problem, suggestion = BAD_CONFIGS[case]
    config.write_text(text)
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    line, hint = lines
    assert line.startswith(f"{config}: {problem}"), line
    assert f"[from {config}]; {suggestion}" in line, "the source, then the suggestion"
    assert hint.startswith("hint: ")
    assert "Traceback" not in result.output


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_harness_refuses_the_same_settings_and_creates_nothing(
    config: Path, tmp_path: Path, case: str
) -> None:
    text, problem, suggestion = BAD_CONFIGS[case]
    config.write_text(text)
    with pytest.raises((ConfigError, BackendNotFound)) as info:
        MemoryHarness.open(tmp_path / "ws", config=config)
    message = info.value.message
    assert problem in message
    assert suggestion in message
    if "plugins.settings.redaction" not in problem:  # a plugin checks its options itself
        assert not (tmp_path / "ws").exists(), "checked before the workspace is made"


def test_a_value_of_the_wrong_kind_hides_no_other_problem(config: Path) -> None:
    """A file with three mistakes of two kinds (values the schema refuses, a backend that
    is not installed) lists all three in one run (it used to stop at the schema's)."""
    config.write_text(
        '[compaction]\ntrigger_messages = "lots"\n[index]\nbackend = "sqlitee"\nmax_results = -3\n'
    )
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 3
    problems = [line for line in result.stderr.splitlines() if not line.startswith("hint: ")]
    assert sorted(line.split(": ")[1] for line in problems) == [
        "compaction.trigger_messages",
        "index.backend",
        "index.max_results",
    ]
    assert all(f"[from {config}]" in line for line in problems), problems
    assert "hint: set index.backend to an installed name" in result.stderr


def test_validate_reports_every_problem_with_each_hint(config: Path) -> None:
    config.write_text(
        '[index]\nbackend = "sqlit"\n[model.options]\nfoo = 1\n[plugins]\ndisable = ["wordfiltr"]\n'
    )
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 3
    problems = [line for line in result.stderr.splitlines() if not line.startswith("hint: ")]
    assert [line.split(": ")[1] for line in problems] == [
        "index.backend",
        "model.options.foo",
        "plugins.disable",
    ]
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 3
    assert "the options of ExtractiveBackend are: summary_sentences" in hints[1]
    installed = (
        "the installed hook plugins are: compaction, context, eviction, flush, recall, redaction"
    )
    assert installed in hints[2]
    data = json.loads(invoke("config", "validate", str(config), "--json").output)
    assert data["ok"] is False
    assert len(data["problems"]) == 3


def test_a_problem_set_in_the_environment_names_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESSMEM_INDEX__OPTIONS", '{"busy_timeot": 3}')
    result = invoke("config", "validate")
    assert result.exit_code == 3
    assert "[from env HARNESSMEM_INDEX__OPTIONS]; did you mean" in result.stderr


def test_a_good_file_with_options_and_plugins_is_ok(config: Path) -> None:
    config.write_text(
        "[index.options]\nbusy_timeout = 3\n[model.options]\nsummary_sentences = 2\n"
        '[plugins]\ndisable = ["eviction"]\n[plugins.settings.redaction]\nreplacement = "#"\n'
    )
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 0, result.output
    assert result.output == f"{config}: ok\n"


def test_a_bad_index_option_fails_a_write_before_it_lands(config: Path, tmp_path: Path) -> None:
    # It used to save the fact, then warn that reindexing failed.
    config.write_text("[index.options]\nbusy_timeot = 3\n")
    result = invoke("save", "Staging is on port 5433", "-c", str(config), "-w", "ws")
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines() == [
        f"error: index.options.busy_timeot: unknown setting (got 3) [from {config}]; "
        "did you mean 'index.options.busy_timeout'?",
        "hint: the options of SQLiteIndex are: max_terms, neighbor_weight, candidates, "
        "busy_timeout, wal, check_on_open",
    ]
    assert not (tmp_path / "ws").exists()


class Audit:
    name = "audit"

    @hookimpl
    def on_maintenance(self, event: Any) -> None:
        pass


def test_plugins_passed_in_code_are_known_names(tmp_path: Path) -> None:
    settings = HarnessSettings.load(
        None,
        workspace={"url": str(tmp_path / "ws")},
        plugins={"disable": ["redaction"], "settings": {"audit": {"level": 2}}},
    )
    with MemoryHarness(settings, plugins=[Audit()]) as harness:
        assert harness.kernel.hooks.pm.get_plugin("audit") is not None
        assert harness.kernel.hooks.pm.get_plugin("redaction") is None
    with pytest.raises(ConfigError, match=r"plugins\.settings\.audit: options for no installed"):
        MemoryHarness(settings)


def test_backends_given_as_instances_are_not_looked_up(tmp_path: Path) -> None:
    # model.backend names nothing installed, but the instance serves every purpose.
    settings = HarnessSettings.load(
        None, workspace={"url": str(tmp_path / "ws")}, model={"backend": "nothing-here"}
    )
    model = ScriptedModel(["ok"])
    with MemoryHarness(settings, model=model) as harness:
        assert harness.kernel.model_for("flush").backend is model
    with pytest.raises(BackendNotFound, match=r"model\.backend: no model backend 'nothing-here'"):
        MemoryHarness(settings)


def test_a_known_backend_that_is_not_installed_says_what_to_install(
    config: Path, tmp_path: Path, uninstalled: Callable[[str], None]
) -> None:
    """validate and a harness both answer ``index.backend = "postgres"`` without the plugin
    with the command that installs it."""
    uninstalled("harnessmem-postgres")
    config.write_text('[index]\nbackend = "postgres"\n')
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 3, result.output
    line, hint = result.stderr.splitlines()
    assert line.startswith(
        f"{config}: index.backend: no index backend 'postgres': it comes with harnessmem-postgres"
    ), line
    assert f"[from {config}]" in line
    assert (
        hint == "hint: pip install harnessmem-postgres, or set index.backend to an installed name"
    )
    with pytest.raises(BackendNotFound) as info:
        MemoryHarness.open(tmp_path / "ws", config=config)
    assert "it comes with harnessmem-postgres" in info.value.message
    assert str(info.value.hint).startswith("pip install harnessmem-postgres")
    assert not (tmp_path / "ws").exists()


def test_an_s3_workspace_without_s3fs_says_to_install_the_extra(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_text('[workspace]\nurl = "s3://bucket/ws"\n')
    assert invoke("config", "validate", str(config)).exit_code == 0, "s3fs is installed here"
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if it were not installed
    result = invoke("config", "validate", str(config))
    assert result.exit_code == 3, result.output
    line, hint = result.stderr.splitlines()
    assert line.startswith(f"{config}: workspace.url: s3:// workspaces need s3fs"), line
    assert hint == "hint: pip install 'harnessmem[s3]', or point workspace.url at another store"
    with pytest.raises(BackendNotFound, match="s3:// workspaces need s3fs") as info:
        MemoryHarness.open("simplecache::s3://bucket/ws")
    assert str(info.value.hint).startswith("pip install 'harnessmem[s3]'")
