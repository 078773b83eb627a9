"""The OpenAI wire format the fake server speaks: reading a request body, what OpenAI
rejects in a chat request, the assistant message and its stream pieces, and the hashed
embeddings it answers with."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "assistant_message",
    "finish_reason",
    "hashed_embedding",
    "include_usage",
    "parse_body",
    "pieces",
    "request_problem",
]

#: The size of an embedding when the request asks for none.
EMBEDDING_DIMENSIONS = 64
_WORDS = re.compile(r"\w+")


def hashed_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector for ``text``: its lower-cased words hashed into buckets.

    Texts that share words have a positive cosine; a text without words gets the first
    unit vector. Meant for tests, not for retrieval quality.
    """
    vector = [0.0] * dimensions
    for word in _WORDS.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dimensions
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if not norm:
        vector[0] = norm = 1.0
    return [v / norm for v in vector]


def parse_body(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """The JSON object in ``raw`` (``{}`` when empty) and why it could not be read, if so."""
    if not raw:
        return {}, None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        return {}, f"We could not parse the JSON body of your request: {exc}"
    if not isinstance(body, dict):
        return {}, "The JSON body of your request must be an object."
    return body, None


def request_problem(body: Mapping[str, Any]) -> str | None:
    """What OpenAI would reject in a chat request: no model, or no list of messages."""
    if not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' is a required property and must be a non-empty array"
    if not all(isinstance(m, dict) for m in messages):
        return "every item of 'messages' must be an object"
    return None


def assistant_message(reply: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply, "refusal": None}
    message = {"role": "assistant", "content": None, "refusal": None}
    message.update(reply)
    return message


def finish_reason(message: Mapping[str, Any]) -> str:
    return "tool_calls" if message.get("tool_calls") else "stop"


def include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def pieces(text: str) -> list[str]:
    """Split ``text`` into word-sized deltas that join back to it exactly."""
    return re.findall(r"\s*\S+|\s+$", text)
