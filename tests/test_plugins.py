from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import hookimpl, hookspecs
from harnessmem.cli import main
from harnessmem.errors import BackendNotFound, PluginError
from harnessmem.plugins import (
    HookFacade,
    index_registry,
    installed_plugins,
    make_plugin_manager,
    model_registry,
)
from harnessmem.settings import PluginSettings

HOOK_MODULE = """
    from harnessmem import hookimpl

    seen = []

    @hookimpl
    def on_compaction(event):
        seen.append(("{name}", event))
"""

INDEX_MODULE = """
    from harnessmem.backends.base import BackendOptions, IndexBackend

    class TinyOptions(BackendOptions):
        path: str = "tiny.db"

    class TinyIndex(IndexBackend):
        name = "tiny"
        Options = TinyOptions
        def files(self): return {}
        def sync_file(self, path, content_hash, entries): return True
        def remove(self, path): return False
        def _search(self, request): return []
        def stats(self): raise NotImplementedError
"""


def _plugin_names(settings: PluginSettings) -> set[str]:
    pm = make_plugin_manager(settings)
    return {name for name, plugin in pm.list_name_plugin() if plugin is not None}


@pytest.fixture
def three_plugins(fake_distributions: Any) -> None:
    for name in ("alpha", "beta"):
        fake_distributions.add(
            f"harnessmem-{name}",
            {"harnessmem.plugins": {name: f"hm_{name}"}},
            {f"hm_{name}": HOOK_MODULE.format(name=name)},
        )
    fake_distributions.add(
        "harnessmem-tiny",
        {"harnessmem.index": {"tiny": "hm_tiny:TinyIndex"}},
        {"hm_tiny": INDEX_MODULE},
        version="2.3.4",
    )


@pytest.mark.usefixtures("three_plugins")
def test_entry_point_plugins_load_and_can_be_blocked() -> None:
    assert {"alpha", "beta"} <= _plugin_names(PluginSettings())
    disabled = _plugin_names(PluginSettings(disable=["alpha"]))
    assert "alpha" not in disabled
    assert "beta" in disabled
    only = _plugin_names(PluginSettings(only=["beta"]))
    assert "alpha" not in only
    assert "beta" in only
    # autoload=false keeps only the harnessmem distribution's own plugins
    assert not {"alpha", "beta"} & _plugin_names(PluginSettings(autoload=False))


@pytest.mark.usefixtures("three_plugins")
def test_each_manager_is_fresh() -> None:
    first = make_plugin_manager(PluginSettings())
    second = make_plugin_manager(PluginSettings())

    class Local:
        @hookimpl
        def on_maintenance(self, event: object) -> None:
            pass

    first.register(Local(), name="local")
    assert first.get_plugin("local") is not None
    assert second.get_plugin("local") is None


def test_hook_name_typo_fails_loudly() -> None:
    class Typo:
        @hookimpl
        def pre_reasonin(self, ctx: object) -> None:
            pass

    with pytest.raises(PluginError, match="pre_reasonin"):
        make_plugin_manager(PluginSettings(), [Typo()])


def test_hook_with_extra_argument_is_refused() -> None:
    class Extra:
        @hookimpl
        def post_call(self, ctx: object, bogus: object) -> None:
            pass

    with pytest.raises(PluginError, match="bogus"):
        make_plugin_manager(PluginSettings(), [Extra()])


def test_broken_plugin_names_entry_point_and_distribution(fake_distributions: Any) -> None:
    fake_distributions.add(
        "harnessmem-broken",
        {"harnessmem.plugins": {"broken": "hm_broken"}},
        {"hm_broken": "raise RuntimeError('boom at import')\n"},
    )
    with pytest.raises(PluginError) as info:
        make_plugin_manager(PluginSettings())
    text = str(info.value)
    assert "'broken'" in text
    assert "harnessmem-broken 0.1.0" in text
    assert "boom at import" in text
    assert "plugins.disable" in text
    # and the way out works
    make_plugin_manager(PluginSettings(disable=["broken"]))


@pytest.mark.usefixtures("three_plugins")
def test_backend_registry_is_lazy_and_validates() -> None:
    registry = index_registry()
    assert registry.available()["tiny"] == "harnessmem-tiny 2.3.4"
    import sys

    assert "hm_tiny" not in sys.modules
    cls = registry.load("tiny")
    assert cls.__name__ == "TinyIndex"
    backend = cls.create({"path": "x.db"})
    assert backend.options.path == "x.db"


@pytest.mark.usefixtures("three_plugins")
def test_backend_options_errors_name_the_dotted_path() -> None:
    cls = index_registry().load("tiny")
    with pytest.raises(PluginError.__mro__[2]) as info:  # ConfigError via HarnessMemError
        cls.create({"pth": "x.db"})
    assert "index.options.pth: unknown setting" in str(info.value)


@pytest.mark.usefixtures("three_plugins")
def test_unknown_backend_lists_installed_and_nearest() -> None:
    with pytest.raises(BackendNotFound) as info:
        index_registry().load("tin")
    message = info.value.message
    assert message.startswith("no index backend 'tin'; installed: ")
    assert "tiny (harnessmem-tiny 2.3.4)" in message
    assert message.endswith("did you mean 'tiny'?")
    assert "harnessmem.index" in str(info.value.hint)


def test_a_known_backend_that_is_not_installed_says_what_to_install(
    uninstalled: Callable[[str], None],
) -> None:
    uninstalled("harnessmem-postgres")
    with pytest.raises(BackendNotFound) as info:
        index_registry().load("postgres")
    message = info.value.message
    assert message.startswith("no index backend 'postgres': it comes with harnessmem-postgres")
    assert "which is not installed; installed: " in message
    assert "postgres (" not in message.split("installed: ")[-1], "it is not listed as installed"
    assert "did you mean" not in message
    assert (
        info.value.hint
        == "pip install harnessmem-postgres, or set index.backend to an installed name"
    )


def test_a_misspelt_known_backend_suggests_it_with_its_install_command(
    uninstalled: Callable[[str], None],
) -> None:
    uninstalled("harnessmem-postgres")
    with pytest.raises(BackendNotFound) as info:
        index_registry().load("postgress")
    assert info.value.message.endswith("did you mean 'postgres' (pip install harnessmem-postgres)?")


def test_an_installed_known_backend_loads_and_a_misspelling_says_did_you_mean() -> None:
    """With the plugin installed the table plays no part."""
    from harnessmem_postgres import PostgresIndex

    assert index_registry().load("postgres") is PostgresIndex
    with pytest.raises(BackendNotFound) as info:
        index_registry().load("postgress")
    assert info.value.message.endswith("did you mean 'postgres'?")


def test_the_known_backends_of_this_repository_declare_their_names() -> None:
    """Every table entry whose distribution lives in plugins/ declares that name in the
    entry-point group of its kind: the table cannot point at a plugin that lacks it."""
    import tomllib

    from harnessmem.plugins.known import KNOWN_BACKENDS

    checked = 0
    for kind, table in KNOWN_BACKENDS.items():
        for name, known in table.items():
            pyproject = (
                Path(__file__).parents[1] / "plugins" / known.distribution / "pyproject.toml"
            )
            if not pyproject.is_file():
                continue
            project = tomllib.loads(pyproject.read_text())["project"]
            assert project["name"] == known.distribution
            assert name in project["entry-points"][f"harnessmem.{kind}"], (kind, name)
            checked += 1
    assert checked >= 1, "harnessmem-postgres is in plugins/"


def test_unknown_model_backend_without_candidates() -> None:
    registry = model_registry()
    with pytest.raises(BackendNotFound, match="no model backend 'zzzz-nothing'"):
        registry.load("zzzz-nothing")


def test_backend_that_is_not_a_backend_class(fake_distributions: Any) -> None:
    fake_distributions.add(
        "harnessmem-wrong",
        {"harnessmem.model": {"wrong": "hm_wrong:Thing"}},
        {"hm_wrong": "class Thing:\n    pass\n"},
    )
    with pytest.raises(PluginError, match="not a subclass of ModelBackend"):
        model_registry().load("wrong")


@pytest.mark.usefixtures("three_plugins")
def test_cli_lists_plugins_and_backends_with_distribution_and_version() -> None:
    result = CliRunner().invoke(main, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    import json

    rows = {(row["kind"], row["name"]): row for row in json.loads(result.output)}
    assert rows[("plugin", "alpha")]["distribution"] == "harnessmem-alpha"
    assert rows[("plugin", "alpha")]["status"] == "loaded"
    assert rows[("index", "tiny")]["version"] == "2.3.4"
    table = CliRunner().invoke(main, ["plugins"])
    assert "harnessmem-tiny" in table.output


@pytest.mark.usefixtures("three_plugins")
def test_installed_plugins_reports_blocked_status() -> None:
    rows = {row.name: row for row in installed_plugins(PluginSettings(disable=["beta"]))}
    assert rows["beta"].status == "blocked (plugins.disable)"
    assert rows["alpha"].status == "loaded"


def test_tracing_goes_to_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    class Observer:
        @hookimpl
        def on_maintenance(self, event: object) -> None:
            pass

    pm = make_plugin_manager(PluginSettings(trace=True), [Observer()])
    with caplog.at_level(logging.DEBUG, logger="harnessmem.plugins"):
        HookFacade(pm).maintenance(event="tick")  # type: ignore[arg-type]
    assert any("on_maintenance" in record.getMessage() for record in caplog.records)


def test_transform_memory_text_is_a_chain_in_call_order() -> None:
    class Upper:
        @hookimpl
        def transform_memory_text(self, text: str) -> str:
            return text.upper()

    class Suffix:
        @hookimpl
        def transform_memory_text(self, text: str, source: str) -> str:
            return f"{text} [{source}]"

    class Keep:
        @hookimpl(tryfirst=True)
        def transform_memory_text(self, text: str) -> None:
            return None

    pm = make_plugin_manager(PluginSettings(), [Upper(), Suffix(), Keep()])
    # last registered runs first: Suffix, then Upper (Keep is tryfirst and keeps the text)
    assert HookFacade(pm).transform_memory_text("fact", "flush") == "FACT [FLUSH]"


def test_transform_memory_text_refuses_non_strings() -> None:
    class Bad:
        @hookimpl
        def transform_memory_text(self, text: str) -> int:
            return 3

    facade = HookFacade(make_plugin_manager(PluginSettings(), [Bad()]))
    with pytest.raises(PluginError, match="returned int"):
        facade.transform_memory_text("x", "save")


def test_the_hook_specs_are_the_expected_ones() -> None:
    names = [n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "harnessmem_spec")]
    expected = {
        "harnessmem_configure",
        "pre_reasoning",
        "post_acting",
        "post_call",
        "session_end",
        "overflow",
        "on_budget_exceeded",
        "on_compaction",
        "on_memory_flushed",
        "on_memory_consolidated",
        "on_context_over_budget",
        "on_tool_result_evicted",
        "on_maintenance",
        "transform_memory_text",
    }
    assert set(names) == expected  # their docstrings: tests/test_docs.py checks the template


def test_overflow_is_first_result() -> None:
    calls = []

    class Declines:
        @hookimpl
        def overflow(self, ctx: Any, error: BaseException) -> None:
            calls.append("declines")

    class Helps:
        @hookimpl
        def overflow(self, ctx: Any, error: BaseException) -> list[dict[str, Any]]:
            calls.append("helps")
            return [{"role": "user", "content": "short"}]

    class NeverReached:
        @hookimpl(trylast=True)
        def overflow(self, ctx: Any, error: BaseException) -> None:
            calls.append("never")

    facade = HookFacade(
        make_plugin_manager(PluginSettings(), [NeverReached(), Helps(), Declines()])
    )
    assert facade.overflow(object(), ValueError()) == [  # type: ignore[arg-type]
        {"role": "user", "content": "short"}
    ]
    assert calls == ["declines", "helps"]


def test_the_pre_release_overflow_name_is_refused_with_its_new_name() -> None:
    """``on_context_overflow`` was the hook's name before 0.1; it names no hook now."""

    class Old:
        @hookimpl
        def on_context_overflow(self, ctx: Any, error: BaseException) -> None:
            return None

    with pytest.raises(PluginError, match="on_context_overflow"):
        make_plugin_manager(PluginSettings(), [Old()])


def test_async_implementation_in_sync_call_inside_a_loop_is_refused() -> None:
    class AsyncPlugin:
        @hookimpl
        async def post_call(self, ctx: Any) -> None:
            return None

    facade = HookFacade(make_plugin_manager(PluginSettings(), [AsyncPlugin()]))

    async def inside_loop() -> None:
        with pytest.raises(PluginError, match="async session method"):
            facade.post_call(object())  # type: ignore[arg-type]

    asyncio.run(inside_loop())


def test_entry_points_are_scanned_again_only_when_a_path_folder_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import os
    import sys
    import time
    from importlib import metadata

    from harnessmem.plugins import discovery

    scans: list[str] = []
    real = metadata.entry_points

    def counting(**kwargs: Any) -> Any:
        scans.append(kwargs.get("group", "every group"))
        return real(**kwargs)

    monkeypatch.setattr(metadata, "entry_points", counting)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    discovery.refresh_entry_points()
    hour_ago = time.time() - 3_600
    os.utime(tmp_path, (hour_ago, hour_ago))
    discovery.entry_points(discovery.INDEX_GROUP)
    discovery.entry_points(discovery.INDEX_GROUP)
    assert len(scans) == 1  # settled folders: the second lookup is served from the cache
    discovery.entry_points(discovery.MODEL_GROUP)
    assert len(scans) == 1  # one scan found every group's
    os.utime(tmp_path, (hour_ago + 60, hour_ago + 60))  # e.g. a distribution was installed
    discovery.entry_points(discovery.INDEX_GROUP)
    assert len(scans) == 2
    os.utime(tmp_path)  # modified just now: it may change again within the same tick
    discovery.entry_points(discovery.INDEX_GROUP)
    discovery.entry_points(discovery.INDEX_GROUP)
    assert len(scans) == 4


def test_every_hook_has_a_test_that_implements_it() -> None:
    """Each hook spec is implemented (``@hookimpl def <name>``) by some test plugin, so no hook
    ships without a test of it being called."""
    import ast

    top = Path(__file__).parents[1]
    # The test doubles shipped in harnessmem.testing (EventLog) count: the tests use them.
    roots = [Path(__file__).parent, top / "core/harnessmem/testing", *top.glob("plugins/*/tests")]
    implemented: set[str] = set()
    for path in (p for root in roots for p in root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                "hookimpl" in ast.unparse(d) for d in node.decorator_list
            ):
                implemented.add(node.name)
    specs = {n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "harnessmem_spec")}
    assert specs - implemented == set()
