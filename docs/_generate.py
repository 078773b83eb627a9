"""Regenerate the generated parts of docs/: ``python docs/_generate.py``.

docs/configuration.md holds a table per settings section between markers;
docs/getting-started.md holds the output of the commands it shows, produced by running
them (in a temporary folder, with the clock stopped at :data:`GETTING_STARTED_NOW`, so the
dates the replay moves to are the same on every run). tests/test_docs.py fails when either
file is out of step with the code.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harnessmem.settings import ENV_DELIMITER, ENV_PREFIX, HarnessSettings

CONFIG_DOC = Path(__file__).with_name("configuration.md")
BEGIN = "<!-- BEGIN GENERATED SETTINGS -->"
END = "<!-- END GENERATED SETTINGS -->"


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
        self, *args: str, cwd: str = "", env: Mapping[str, str] | None = None, shown: str = ""
    ) -> None:
        self.args = args
        self.cwd = cwd
        self.env = dict(env or {})
        self.shown = shown or "harnessmem " + " ".join(_quoted(a) for a in args)


def _quoted(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


#: Block name -> the commands whose output it shows, run in this order in one folder.
#: ``{s3}`` in an environment value is the endpoint of a local S3 server.
SCENES: dict[str, Sequence[Step]] = {
    "init": (Step("init", "my-agent"),),
    "replay": (Step("replay", "--example", cwd="my-agent"),),
    "search": (Step("search", "staging database", cwd="my-agent"),),
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
                    result = runner.invoke(main, list(step.args), env=env)
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


def generated_blocks(text: str) -> list[str]:
    """The names of the generated blocks of a page, in order."""
    return [match["name"] for match in _BLOCK.finditer(text)]


def comparable(text: str) -> str:
    """``text`` with what differs from run to run (wall time) masked."""
    for pattern in _VARYING:
        text = pattern.sub(r"\1<seconds> s", text)
    return text


def main() -> int:
    current = CONFIG_DOC.read_text()
    if BEGIN not in current or END not in current:
        print(f"{CONFIG_DOC} lacks the generated-settings markers", file=sys.stderr)
        return 1
    CONFIG_DOC.write_text(render(current))
    print(f"updated {CONFIG_DOC}")
    GETTING_STARTED.write_text(render_getting_started(GETTING_STARTED.read_text()))
    print(f"updated {GETTING_STARTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
