"""Regenerate the generated parts of docs/: ``python docs/_generate.py``.

docs/configuration.md holds a table per settings section between markers;
tests/test_docs.py fails when the file is out of step with the code.
"""

from __future__ import annotations

import json
import sys
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


def main() -> int:
    current = CONFIG_DOC.read_text()
    if BEGIN not in current or END not in current:
        print(f"{CONFIG_DOC} lacks the generated-settings markers", file=sys.stderr)
        return 1
    CONFIG_DOC.write_text(render(current))
    print(f"updated {CONFIG_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
