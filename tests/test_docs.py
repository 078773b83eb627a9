"""Meta-tests that keep docs/ honest: every hook and every setting is documented."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

from harnessmem import hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _hooks() -> dict[str, object]:
    return {
        name: func
        for name, func in vars(hookspecs).items()
        if callable(func) and hasattr(func, "harnessmem_spec")
    }


def test_every_hook_is_documented_with_its_exact_signature() -> None:
    text = (DOCS / "hooks.md").read_text()
    for name, func in _hooks().items():
        signature = str(inspect.signature(func)).replace("'", "")  # type: ignore[arg-type]
        assert f"### `{name}`" in text, f"docs/hooks.md lacks a section for {name}"
        assert f"def {name}{signature}" in text, f"docs/hooks.md has a stale signature of {name}"


def test_hooks_doc_names_no_hook_that_does_not_exist() -> None:
    text = (DOCS / "hooks.md").read_text()
    documented = set(re.findall(r"^### `(\w+)`", text, flags=re.MULTILINE))
    assert documented == set(_hooks())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_reference_is_generated_from_the_code() -> None:
    module = _generator()
    current = (DOCS / "configuration.md").read_text()
    assert module.render(current) == current, "run: python docs/_generate.py"
    assert "`compaction.trigger_messages` | `50` | `HARNESSMEM_COMPACTION__TRIGGER_MESSAGES`" in (
        current
    )


def _cli_statuses() -> dict[str, int]:
    """Every exit status the CLI's code can end with: ``EXIT_*`` names and literal numbers
    given to ``sys.exit``, ``click.exceptions.Exit`` or a ``code=`` argument."""
    import ast

    from harnessmem.cli import _common

    found: dict[str, int] = {}
    for path in sorted(Path(_common.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.startswith("EXIT_"):
                found[node.id] = getattr(_common, node.id)
            elif isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                given = [*node.args[:1]] if name in ("exit", "Exit") else []
                given += [kw.value for kw in node.keywords if kw.arg == "code"]
                for value in given:
                    if isinstance(value, ast.Constant) and isinstance(value.value, int):
                        found[f"{path.name}:{value.lineno}"] = value.value
    return found


def _documented_statuses(text: str, row: str) -> set[int]:
    return {int(match) for match in re.findall(row, text, flags=re.MULTILINE)}


def test_every_exit_status_the_cli_uses_is_documented() -> None:
    import harnessmem.cli

    used = _cli_statuses()
    assert {"EXIT_OK", "EXIT_MODEL", "EXIT_INTERRUPTED"} <= set(used), "the scan sees the code"
    page = (DOCS / "getting-started.md").read_text()
    table = page[page.index("The exit status says what kind of failure it was") :]
    in_docs = _documented_statuses(table, r"^\| (\d+) \|")
    in_help = _documented_statuses(harnessmem.cli.__doc__ or "", r"^(\d+) {2,}\S")
    for where, status in used.items():
        assert status in in_docs, f"{where} = {status} is missing from the docs' exit statuses"
        assert status in in_help, f"{where} = {status} is missing from harnessmem.cli's table"
    assert in_docs == in_help == set(used.values()) | {2}, "2 is click's, for usage errors"


def test_readme_commands_are_marked_for_ci() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    for marker in ("setup", "main", "tests"):
        assert f"<!-- {marker} -->\n```bash\n" in readme, marker


def test_getting_started_shows_what_the_commands_print_today() -> None:
    """The page's console blocks are the output of running its commands, not typed."""
    generator = _generator()
    current = (DOCS / "getting-started.md").read_text()
    names = generator.generated_blocks(current)
    assert {"init", "replay", "search", "status", "missing-bucket", "typo"} <= set(names)
    fresh = generator.render_getting_started(current)
    assert generator.comparable(fresh) == generator.comparable(current), (
        "docs/getting-started.md is out of step with the commands: run python docs/_generate.py"
    )
    # the output is the commands' own: the replay's timeline and the search hit are there
    assert "consolidated MEMORY.md" in fresh
    assert "Our staging database is PostgreSQL 16" in fresh
    assert "/tmp" not in fresh


def test_a_stale_getting_started_block_is_caught() -> None:
    generator = _generator()
    current = (DOCS / "getting-started.md").read_text()
    outputs = dict.fromkeys(generator.SCENES, "$ harnessmem status\nsomething else")
    stale = generator.render_getting_started(current, outputs)
    assert generator.comparable(stale) != generator.comparable(current)
    assert generator.comparable("Done in 1.8 s: 3") == generator.comparable("Done in 0.6 s: 3")
