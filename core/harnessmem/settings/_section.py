"""What every settings section shares: the base that refuses unknown keys, and durations
written as seconds or as ``"30m"``, ``"6h"``, ``"7d"``."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["Seconds", "Section", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}


def parse_duration(value: Any) -> Any:
    """Seconds from a number or a string such as ``"90s"``, ``"30m"``, ``"6h"``, ``"7d"``."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError("expected seconds or a duration such as '30m', '6h' or '7d'")
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return value


Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]


class Section(BaseModel):
    """The base of every section: unknown keys are errors, defaults are validated."""

    # defer_build: each section's validator is built when settings are first made, not
    # when harnessmem is imported (an application that imports it pays ~30 ms less).
    model_config = ConfigDict(extra="forbid", validate_default=True, defer_build=True)
