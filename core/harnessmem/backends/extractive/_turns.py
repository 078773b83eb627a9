"""The conversation as the extractive jobs see it: OpenAI-style messages read as turns,
each with its speaker, its text and the tool calls it made."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Message = Mapping[str, Any]


@dataclass
class Turn:
    """One message of the conversation, as the jobs see it."""

    role: str
    text: str
    name: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)

    @property
    def speaker(self) -> str:
        if self.name:
            return self.name
        return {"user": "User", "assistant": "Assistant", "tool": "Tool"}.get(self.role, self.role)


def turns_of(messages: Iterable[Message]) -> list[Turn]:
    """OpenAI-style messages as turns (system messages and compaction summaries dropped)."""
    found = []
    for message in messages:
        role = str(message.get("role") or "")
        if role in {"system", "developer"} or message.get("name") == "__compaction_summary__":
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if isinstance(content, list):
            text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, default=str)
            calls.append((str(function.get("name") or "?"), arguments))
        name = message.get("name")
        found.append(Turn(role, text.strip(), name if isinstance(name, str) else None, calls))
    return found
