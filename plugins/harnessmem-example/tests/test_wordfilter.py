from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem import ConfigError, MemoryHarness
from harnessmem.cli import main
from harnessmem.plugins import installed_plugins
from harnessmem.settings import PluginSettings
from harnessmem_example import WordFilter


def _harness(tmp_path: Path, **options: object) -> MemoryHarness:
    return MemoryHarness.open(
        tmp_path / "ws", plugins={"settings": {"wordfilter": options}}, config=None
    )


def test_is_installed_through_its_entry_point() -> None:
    rows = {row.name: row for row in installed_plugins(PluginSettings())}
    assert rows["wordfilter"].distribution == "harnessmem-example"
    assert rows["wordfilter"].kind == "plugin"


def test_filters_configured_words_whole_words_only(tmp_path: Path) -> None:
    with _harness(tmp_path, words=["Nightingale", "acme-internal"]) as harness:
        transform = harness.kernel.hooks.transform_memory_text
        assert transform("Project nightingale ships", "flush") == "Project [filtered] ships"
        assert transform("see acme-internal/wiki", "save") == "see [filtered]/wiki"
        assert transform("Nightingales sing", "flush") == "Nightingales sing"


def test_does_nothing_without_words(tmp_path: Path) -> None:
    with _harness(tmp_path) as harness:
        assert harness.kernel.hooks.transform_memory_text("anything", "flush") == "anything"


def test_bad_options_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"plugins\.settings\.wordfilter\.wrds") as info:
        _harness(tmp_path, wrds=["x"])
    assert "did you mean 'plugins.settings.wordfilter.words'?" in info.value.message
    assert info.value.hint == (
        "the options of plugin 'wordfilter' are: words, replacement, case_sensitive"
    )


def test_config_validate_checks_the_options(tmp_path: Path) -> None:
    config = tmp_path / "harnessmem.toml"
    config.write_text('[plugins.settings.wordfilter]\nword = ["Nightingale"]\n')
    result = CliRunner().invoke(main, ["config", "validate", str(config)])
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[0] == (
        f"{config}: plugins.settings.wordfilter.word: unknown setting (got ['Nightingale']) "
        f"[from {config}]; did you mean 'plugins.settings.wordfilter.words'?"
    )
    config.write_text('[plugins.settings.wordfilter]\nwords = ["Nightingale"]\n')
    assert CliRunner().invoke(main, ["config", "validate", str(config)]).exit_code == 0


def test_can_be_disabled(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        plugins={"disable": ["wordfilter"], "settings": {"wordfilter": {"words": ["x"]}}},
    ) as harness:
        assert not any(isinstance(p, WordFilter) for p in harness.kernel.hooks.pm.get_plugins())
        assert harness.kernel.hooks.transform_memory_text("x", "flush") == "x"
