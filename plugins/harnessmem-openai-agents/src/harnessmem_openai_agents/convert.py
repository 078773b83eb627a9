"""Between the Agents SDK's input items (Responses API) and OpenAI chat messages.

harnessmem works on chat messages; the SDK keeps its history as Responses-API items. The
two converters cover messages and function tools: reasoning items, hosted tools and
handoff items have no chat form and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["to_chat", "to_items"]

Message = dict[str, Any]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def to_chat(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Agents SDK input items -> OpenAI chat messages (parallel calls stay in one message)."""
    chat: list[Message] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            chat.append({"role": item["role"], "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = chat[-1] if chat else None
            # A call after the assistant's text or after another call belongs to that message.
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                chat.append(last)
            last.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            output = item.get("output")
            chat.append(
                {
                    "role": "tool",
                    "tool_call_id": item["call_id"],
                    "content": output if isinstance(output, str) else _text(output),
                }
            )
    return chat


def to_items(chat: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages -> Agents SDK input items."""
    items: list[dict[str, Any]] = []
    for message in chat:
        if message["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": _text(message.get("content")),
                }
            )
            continue
        content = _text(message.get("content"))
        if content:
            items.append({"role": message["role"], "content": content})
        for call in message.get("tool_calls") or []:
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
    return items
