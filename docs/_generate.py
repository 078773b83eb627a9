"""Regenerate the generated parts of docs/: ``python docs/_generate.py``.

docs/configuration.md holds a table per settings section between markers;
docs/hooks.md a section per hook, rendered from the docstrings of
``harnessmem.hookspecs`` (which follow the template its module docstring states;
:func:`hook_docs` parses them and says where one strays); docs/getting-started.md
the output of the commands it shows, produced by running them (in a temporary
folder, with the clock stopped at :data:`GETTING_STARTED_NOW`, so the dates the
replay moves to are the same on every run). tests/test_docs.py fails when any of
them is out of step with the code.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harnessmem.settings import ENV_DELIMITER, ENV_PREFIX, HarnessSettings

CONFIG_DOC = Path(__file__).with_name("configuration.md")
HOOKS_DOC = Path(__file__).with_name("hooks.md")
BEGIN = "<!-- BEGIN GENERATED SETTINGS -->"
END = "<!-- END GENERATED SETTINGS -->"
#: docs/hooks.md: ``<!-- BEGIN GENERATED HOOKS a b c -->`` ... ``<!-- END GENERATED HOOKS -->``
#: holds the sections of hooks a, b and c, in that order.
HOOKS_REGION = re.compile(
    r"(<!-- BEGIN GENERATED HOOKS ([\w ]+?) -->\n).*?(<!-- END GENERATED HOOKS -->)", re.DOTALL
)

#: The sections of a hook docstring, in order; "Event" only for observers, "Deprecated"
#: optional (see harnessmem.hookspecs).
SECTIONS = ("When", "Arguments", "Result", "Awaitable", "Since", "Deprecated")
_ITEM_SECTIONS = ("Arguments",)
_HEADER = re.compile(r"^([A-Z][a-z]+):$")
_ITEM = re.compile(r"^(\w+): (.+)$")


def _section_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _default(field: Any) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(table)"
    return f"`{json.dumps(value)}`"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        dotted = f"{prefix}{name}"
        nested = _section_model(field.annotation)
        env = ENV_PREFIX + dotted.upper().replace(".", ENV_DELIMITER)
        description = (field.description or "").replace("|", "\\|")
        if nested is not None:
            rows.append(f"| `{dotted}` | (table) | `{env}` | {description} |")
            rows.extend(_rows(nested, dotted + "."))
        else:
            rows.append(f"| `{dotted}` | {_default(field)} | `{env}` | {description} |")
    return rows


def settings_reference() -> str:
    parts = []
    for section, field in HarnessSettings.model_fields.items():
        model = _section_model(field.annotation)
        assert model is not None
        parts.append(f"### `[{section}]`\n\n{(model.__doc__ or '').strip()}\n")
        parts.append("| setting | default | environment variable | meaning |")
        parts.append("| --- | --- | --- | --- |")
        parts.extend(_rows(model, section + "."))
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def render(current: str) -> str:
    head, _, rest = current.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{settings_reference()}{END}{tail}"


# ---------------------------------------------------------------------- getting started

GETTING_STARTED = Path(__file__).with_name("getting-started.md")
#: The moment the getting-started commands run at (a Monday morning, UTC).
GETTING_STARTED_NOW = datetime(2026, 11, 30, 9, 15, 2, tzinfo=UTC)
#: What the temporary folder is shown as.
HOME = "/home/you"
_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED OUTPUT: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
    r"(<!-- END GENERATED OUTPUT -->)",
    re.DOTALL,
)
#: Parts of an output that differ from run to run (wall time), for :func:`comparable`.
_VARYING = (re.compile(r"(Done in )\d+(?:\.\d+)? s"),)


class Step:
    """One command of the page: its arguments, the folder it runs in, extra environment."""

    def __init__(
        self,
        *args: str,
        cwd: str = "",
        env: Mapping[str, str] | None = None,
        shown: str = "",
        program: str = "harnessmem",
    ) -> None:
        self.args = args
        self.cwd = cwd
        self.env = dict(env or {})
        #: How the user ran it (``sys.argv[0]``): the commands it suggests follow it.
        self.program = program
        self.shown = shown or f"{program} " + " ".join(_quoted(a) for a in args)


def _quoted(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


#: Block name -> the commands whose output it shows, run in this order in one folder.
#: ``{s3}`` in an environment value is the endpoint of a local S3 server.
SCENES: dict[str, Sequence[Step]] = {
    "init": (Step("init", "my-agent"),),
    "replay": (Step("replay", "--example", cwd="my-agent"),),
    "search": (Step("search", "staging database", cwd="my-agent"),),
    "why": (Step("why", "staging database port", cwd="my-agent"),),
    "status": (Step("status", cwd="my-agent"),),
    "missing-bucket": (
        Step(
            "status",
            "-w",
            "s3://no-such-bucket/agent",
            cwd="my-agent",
            env={
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "HARNESSMEM_WORKSPACE__STORAGE_OPTIONS": '{"endpoint_url": "{s3}"}',
            },
        ),
    ),
    "typo": (Step("search", "staging", "-w", "my-agent/workpsace"),),
    # The README's main job, as someone who followed its set-up runs it from the clone.
    "readme": (
        Step("replay", "--example", "-w", "demo/workspace", program=".venv/bin/harnessmem"),
        Step("search", "staging database", "-w", "demo/workspace", program=".venv/bin/harnessmem"),
    ),
}


@contextmanager
def _s3_endpoint() -> Iterator[str]:
    import logging

    from harnessmem.testing.s3_server import S3TestServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log in the output
    server = S3TestServer().start()
    try:
        yield server.endpoint_url
    finally:
        server.stop()


def _touch_all(root: Path, moment: float) -> None:
    """File times as the stopped clock says (the file system keeps its own clock)."""
    for path in root.rglob("*"):
        os.utime(path, (moment, moment), follow_symlinks=False)


def _invoke(runner: Any, main: Any, step: Step, env: Mapping[str, str]) -> Any:
    """Run ``step`` as its user would: ``sys.argv[0]`` is the program they typed."""
    saved = sys.argv[0]
    sys.argv[0] = step.program
    try:
        return runner.invoke(main, list(step.args), env=dict(env))
    finally:
        sys.argv[0] = saved


def getting_started_outputs() -> dict[str, str]:
    """Run :data:`SCENES` in a temporary folder; block name -> its console text."""
    import time_machine
    from click.testing import CliRunner

    from harnessmem.cli import main

    outputs: dict[str, str] = {}
    here = os.getcwd()
    with (
        tempfile.TemporaryDirectory() as tmp,
        _s3_endpoint() as s3,
        time_machine.travel(GETTING_STARTED_NOW, tick=False),
    ):
        root = Path(tmp).resolve()
        # the defaults a new user has: no HARNESSMEM_* variable of this shell (or of a test)
        clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("HARNESSMEM_")}
        runner = CliRunner(env={**clean, "COLUMNS": "100"})
        try:
            for name, steps in SCENES.items():
                lines = []
                for step in steps:
                    os.chdir(root / step.cwd)
                    env = {key: value.replace("{s3}", s3) for key, value in step.env.items()}
                    result = _invoke(runner, main, step, env)
                    _touch_all(root, GETTING_STARTED_NOW.timestamp())
                    lines.append("$ " + step.shown)
                    lines.append(result.output.replace(str(root), HOME).rstrip("\n"))
                outputs[name] = "\n".join(lines)
        finally:
            os.chdir(here)
    return outputs


def render_getting_started(current: str, outputs: Mapping[str, str] | None = None) -> str:
    """``current`` with every generated block replaced by the commands' output."""
    found = outputs if outputs is not None else getting_started_outputs()

    def block(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in found:
            raise KeyError(f"{GETTING_STARTED.name} has a block {name!r} that no scene makes")
        return f"{match[1]}```console\n{found[name]}\n```\n{match[4]}"

    return _BLOCK.sub(block, current)


README = Path(__file__).resolve().parents[1] / "README.md"
#: Lines of the replay's timeline the README shows before cutting to its summary.
README_TIMELINE_LINES = 10


def abridged(output: str) -> str:
    """The README's sample: the replay's first timeline lines, then from its summary on."""
    lines = output.splitlines()
    done = next(n for n, line in enumerate(lines) if line.startswith("Done in "))
    return "\n".join([*lines[: README_TIMELINE_LINES + 1], "  ...", *lines[done:]])


def render_readme(current: str, outputs: Mapping[str, str] | None = None) -> str:
    """``current`` (the README) with its sample block made by running the main job."""
    found = outputs if outputs is not None else getting_started_outputs()

    def block(match: re.Match[str]) -> str:
        return f"{match[1]}```console\n{abridged(found[match['name']])}\n```\n{match[4]}"

    return _BLOCK.sub(block, current)


def generated_blocks(text: str) -> list[str]:
    """The names of the generated blocks of a page, in order."""
    return [match["name"] for match in _BLOCK.finditer(text)]


def comparable(text: str) -> str:
    """``text`` with what differs from run to run (wall time) masked."""
    for pattern in _VARYING:
        text = pattern.sub(r"\1<seconds> s", text)
    return text


# -- hooks ------------------------------------------------------------------------------------


class HookDocError(ValueError):
    """A hook docstring that does not follow the template; the message says where."""


@dataclass(frozen=True)
class HookDoc:
    """A hook spec's docstring, parsed: the prose, and each section's text or items."""

    name: str
    signature: str
    summary: str
    prose: tuple[str, ...]
    sections: dict[str, str]
    items: dict[str, dict[str, str]]
    event: type | None


def hook_specs() -> dict[str, Any]:
    """The hook specs of ``harnessmem.hookspecs`` by name, in the order they are defined."""
    from harnessmem import hookspecs

    return {
        name: func
        for name, func in vars(hookspecs).items()
        if callable(func) and hasattr(func, "harnessmem_spec")
    }


def _signature(func: Any) -> str:
    return f"def {func.__name__}{inspect.signature(func)}".replace("'", "")


def _event_class(func: Any) -> type | None:
    """The event dataclass of an observer (its one parameter ``event``), else None."""
    from harnessmem import events

    parameters = inspect.signature(func).parameters
    if list(parameters) != ["event"]:
        return None
    found = getattr(events, str(parameters["event"].annotation), None)
    return found if isinstance(found, type) else None


def event_fields(event: type) -> dict[str, tuple[str, str]]:
    """``name: (type, meaning)`` of an event's fields, then of its properties: a field's
    meaning is the ``#:`` comment above it in harnessmem/events.py, a property's the first
    paragraph of its docstring. :class:`HookDocError` names a field without one."""
    source = inspect.getsource(event)
    tree = ast.parse(textwrap.dedent(source)).body[0]
    lines = textwrap.dedent(source).splitlines()
    assert isinstance(tree, ast.ClassDef)
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment: list[str] = []
            at = node.lineno - 2
            while at >= 0 and lines[at].strip().startswith("#:"):
                comment.insert(0, lines[at].strip()[2:].strip())
                at -= 1
            if not comment:
                raise HookDocError(
                    f"{event.__name__}.{node.target.id} has no '#:' comment in harnessmem.events"
                )
            found[node.target.id] = (ast.unparse(node.annotation), " ".join(comment))
        elif isinstance(node, ast.FunctionDef) and any(
            ast.unparse(d) == "property" for d in node.decorator_list
        ):
            doc = inspect.cleandoc(ast.get_docstring(node) or "").split("\n\n")[0]
            if not doc:
                raise HookDocError(f"{event.__name__}.{node.name} has no docstring")
            found[node.name] = (ast.unparse(node.returns), doc.replace("\n", " "))
    return found


def _join(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def _items(name: str, section: str, lines: list[str]) -> dict[str, str]:
    """``name: text`` items; a continuation line is indented deeper than its item."""
    items: dict[str, list[str]] = {}
    for line in lines:
        if not line.strip():
            continue
        if not line.startswith(" "):
            match = _ITEM.match(line)
            if match is None:
                raise HookDocError(f"{name}: {section}: {line!r} is not 'name: meaning'")
            items[match.group(1)] = [match.group(2)]
        elif items:
            items[list(items)[-1]].append(line)
        else:
            raise HookDocError(f"{name}: {section}: starts with an indented line")
    return {key: _join(text) for key, text in items.items()}


def parse_hook_doc(name: str, func: Any) -> HookDoc:
    """Parse one spec's docstring; :class:`HookDocError` says how it strays from the
    template (a section missing, out of order or unknown; an item that is not one)."""
    doc = inspect.cleandoc(func.__doc__ or "")
    lines = doc.splitlines()
    headers = {i: m.group(1) for i, line in enumerate(lines) if (m := _HEADER.match(line))}
    starts = list(headers)
    if not lines or not starts:
        raise HookDocError(f"{name}: the docstring has no sections")
    prose = "\n".join(lines[: starts[0]]).strip().split("\n\n")
    found: dict[str, list[str]] = {}
    for at, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        header = headers[at]
        if header not in SECTIONS:
            raise HookDocError(f"{name}: unknown section {header!r}; known: {SECTIONS}")
        body = lines[at + 1 : end]
        if not any(line.strip() for line in body):
            raise HookDocError(f"{name}: the {header} section is empty")
        if any(line and not line.startswith("    ") for line in body):
            raise HookDocError(f"{name}: {header}: the body must be indented by four spaces")
        found[header] = [line[4:] for line in body]
    event = _event_class(func)
    required = [s for s in SECTIONS if s != "Deprecated"]
    missing = [s for s in required if s not in found]
    if missing:
        raise HookDocError(f"{name}: missing sections {missing}")
    if list(found) != [s for s in SECTIONS if s in found]:
        raise HookDocError(f"{name}: sections {list(found)} are not in the order {SECTIONS}")
    items = {s: _items(name, s, found[s]) for s in _ITEM_SECTIONS if s in found}
    sections = {s: _join(text) for s, text in found.items() if s not in _ITEM_SECTIONS}
    return HookDoc(
        name,
        _signature(func),
        prose[0].replace("\n", " "),
        tuple(p.replace("\n", " ") for p in prose[1:] if p.strip()),
        sections,
        items,
        event,
    )


def hook_docs() -> dict[str, HookDoc]:
    return {name: parse_hook_doc(name, func) for name, func in hook_specs().items()}


def _markdown(text: str) -> str:
    """reST inline markup of the docstrings as Markdown."""
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?(\w+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return re.sub(r"\bdocs/([\w-]+\.md)\b", r"[\1](\1)", text)


def hook_section(doc: HookDoc) -> str:
    """The docs/hooks.md section of one hook."""
    parts = [f"### `{doc.name}`", "", "```python", doc.signature, "```", ""]
    parts += [_markdown(doc.summary), ""]
    parts += [*(item for p in doc.prose for item in (_markdown(p), ""))]
    parts += [f"**When.** {_markdown(doc.sections['When'])}", "", "**Arguments.**", ""]
    parts += [f"- `{k}`: {_markdown(v)}" for k, v in doc.items["Arguments"].items()]
    parts.append("")
    if doc.event is not None:
        parts += [f"**Event** (`harnessmem.{doc.event.__name__}`, frozen):", ""]
        parts += ["| field | type | meaning |", "| --- | --- | --- |"]
        for key, (kind, meaning) in event_fields(doc.event).items():
            kind = kind.replace("|", "\\|")
            text = _markdown(meaning).replace("|", "\\|")
            parts.append(f"| `{key}` | `{kind}` | {text} |")
        parts.append("")
    parts += [f"**Result.** {_markdown(doc.sections['Result'])}", ""]
    parts += [f"**Awaitable.** {_markdown(doc.sections['Awaitable'])}", ""]
    parts += [f"**Since** {doc.sections['Since']}.", ""]
    if "Deprecated" in doc.sections:
        parts += [f"**Deprecated.** {_markdown(doc.sections['Deprecated'])}", ""]
    return "\n".join(parts)


def render_hooks(current: str) -> str:
    """docs/hooks.md with every generated region rendered from the hook docstrings."""
    docs = hook_docs()

    def region(match: re.Match[str]) -> str:
        names = match.group(2).split()
        unknown = [n for n in names if n not in docs]
        if unknown:
            raise HookDocError(f"docs/hooks.md names hooks that do not exist: {unknown}")
        body = "\n".join(hook_section(docs[n]) for n in names)
        return f"{match.group(1)}\n{body}{match.group(3)}"

    return HOOKS_REGION.sub(region, current)


def main() -> int:
    current = CONFIG_DOC.read_text()
    if BEGIN not in current or END not in current:
        print(f"{CONFIG_DOC} lacks the generated-settings markers", file=sys.stderr)
        return 1
    CONFIG_DOC.write_text(render(current))
    print(f"updated {CONFIG_DOC}")
    hooks = HOOKS_DOC.read_text()
    if not HOOKS_REGION.search(hooks):
        print(f"{HOOKS_DOC} lacks the generated-hooks markers", file=sys.stderr)
        return 1
    HOOKS_DOC.write_text(render_hooks(hooks))
    print(f"updated {HOOKS_DOC}")
    outputs = getting_started_outputs()
    GETTING_STARTED.write_text(render_getting_started(GETTING_STARTED.read_text(), outputs))
    print(f"updated {GETTING_STARTED}")
    README.write_text(render_readme(README.read_text(), outputs))
    print(f"updated {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
