"""Meta-tests that keep docs/ honest: every hook and every setting is documented."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

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


def test_configuration_reference_is_generated_from_the_code() -> None:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    current = (DOCS / "configuration.md").read_text()
    assert module.render(current) == current, "run: python docs/_generate.py"
    assert "`compaction.trigger_messages` | `50` | `HARNESSMEM_COMPACTION__TRIGGER_MESSAGES`" in (
        current
    )


def test_readme_commands_are_marked_for_ci() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    for marker in ("setup", "main", "tests"):
        assert f"<!-- {marker} -->\n```bash\n" in readme, marker
