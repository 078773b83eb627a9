"""A message as the session log stores it: every string, under any key and at any depth,
through the ``offload`` transform chain (the secret redactor); the keys that give the
message its shape kept as they are."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Transform", "message_texts", "redact_message"]

#: ``transform(text, source)``: the ``transform_memory_text`` chain.
Transform = Callable[[str, str], str]

# Keys that give a message its shape rather than its words: kept as they are where the
# OpenAI and Anthropic shapes put them (the message, its content parts, tool calls and their
# functions), so that tool-call pairing and the log's readers see the same message.
_STRUCTURAL = frozenset({"role", "tool_call_id", "tool_use_id", "name", "id", "type"})
# Keys whose value holds more of that shape: content parts, tool calls, a function.
_SHAPED = frozenset({"content", "tool_calls", "function", "function_call"})


def redact_message(message: Mapping[str, Any], transform: Transform | None) -> dict[str, Any]:
    """A copy of ``message`` in which every string, under any key and at any depth, went
    through the ``offload`` transform chain; only the structural keys are kept as they are.

    A secret can sit in any field: ``reasoning_content``, a legacy ``function_call``, tool
    arguments given as a dict, a ``tool_result`` part's ``content``, an ``image_url``. The
    shape is kept: only string values change (a value that JSON would write as ``str()``
    is transformed as that text).
    """
    if transform is None:
        return dict(message)
    return _shaped(message, transform)


def _shaped(mapping: Mapping[str, Any], transform: Transform) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key in _STRUCTURAL:
            out[key] = value
        elif key == "arguments" and isinstance(value, str):
            out[key] = _arguments(value, transform)
        else:
            out[key] = _texts(value, transform, key in _SHAPED)
    return out


def _arguments(text: str, transform: Transform) -> str:
    """Tool-call arguments sent as JSON text: transformed as text, then each of its values as
    dict arguments are (in the text a value's quotes and line breaks are escaped, which hides
    "DB_PASSWORD=…" or 'curl -u "ci:…"' from rules that read the plain value)."""
    text = transform(text, "offload")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, dict | list):
        return text
    redacted = _texts(parsed, transform, False)
    return text if redacted == parsed else json.dumps(redacted, ensure_ascii=False)


def _texts(value: Any, transform: Transform, shaped: bool) -> Any:
    """``value`` with its strings transformed; ``shaped``: it holds parts or calls."""
    if isinstance(value, str):
        return transform(value, "offload")
    if isinstance(value, Mapping):
        if shaped:
            return _shaped(value, transform)
        return {key: _keyed(key, item, transform) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_texts(item, transform, shaped) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return transform(str(value), "offload")  # what json.dumps(default=str) would write


def _keyed(key: Any, value: Any, transform: Transform) -> Any:
    """A value of a data mapping (tool arguments given as a dict, an ``image_url``, ...).

    A string is transformed alone, then once more as the JSON pair ``{"key": "value"}``
    would be written in arguments text, so that a key such as ``password`` or ``api_key``
    gives the value the same context it has in arguments sent as a string.
    """
    if not isinstance(value, str):
        return _texts(value, transform, False)
    value = transform(value, "offload")
    name = str(key)
    pair = json.dumps({name: value}, ensure_ascii=False)
    if (redacted := transform(pair, "offload")) == pair:
        return value
    try:
        parsed = json.loads(redacted)
    except ValueError:
        return value  # the transform broke the pair: the value alone was transformed
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(parsed.get(name), str):
        return parsed[name]
    return value


def message_texts(message: Mapping[str, Any]) -> list[str]:
    """Every text of ``message`` the log redacts (its strings but the structural keys)."""
    texts: list[str] = []

    def keep(text: str, _source: str) -> str:
        texts.append(text)
        return text

    redact_message(message, keep)
    return texts
