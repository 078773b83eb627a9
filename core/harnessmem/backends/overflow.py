"""Recognising "the prompt did not fit the model's context window" across providers.

Providers say it in their own words and litellm wraps some of them in its own classes.
An error counts as an overflow when the error or any error in its ``__cause__`` /
``__context__`` chain:

- is a :class:`harnessmem.errors.ContextOverflowError`;
- has a class (or base class) named like litellm's ``ContextWindowExceededError``
  (matched by name, so litellm is never imported for it);
- carries the code ``context_length_exceeded`` (OpenAI, Azure OpenAI);
- says so in its message, by one of :data:`OVERFLOW_PHRASES` (case-insensitive).

Rate-limit errors are never overflows, even when they mention tokens ("Request too large
for gpt-4o on tokens per min"): shortening the prompt is not what they need.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from harnessmem.errors import ContextOverflowError

__all__ = ["OVERFLOW_CLASS_NAMES", "OVERFLOW_PHRASES", "is_context_overflow", "overflow_limits"]

#: Exception class names that mean an overflow wherever they come from.
OVERFLOW_CLASS_NAMES: Final = frozenset(
    {"ContextWindowExceededError", "ContextLengthExceededError", "ContextOverflowError"}
)

#: ``(provider, phrase)``: each phrase, found in an error message, means an overflow.
OVERFLOW_PHRASES: Final[tuple[tuple[str, str], ...]] = (
    ("openai", "maximum context length"),
    ("openai", "context_length_exceeded"),
    ("openai", "reduce the length of the messages"),
    ("azure", "context_length_exceeded"),
    ("anthropic", "prompt is too long"),
    ("anthropic", "exceed context limit"),
    ("gemini", "exceeds the maximum number of tokens"),
    ("bedrock", "input is too long"),
    ("bedrock", "too many input tokens"),
    ("vllm", "maximum model length"),
    ("vllm", "max_model_len"),
    ("ollama", "context length"),
    ("llama.cpp", "exceeds the available context size"),
    ("mistral", "too large for model with"),
    ("cohere", "too many tokens"),
    ("xai", "maximum prompt length"),
    ("generic", "context window"),
    ("generic", "context_window_exceeded"),
)

_RATE_LIMIT: Final = re.compile(r"rate.?limit|tokens per min|\bTPM\b|requests per min", re.I)
_PHRASES: Final = tuple(phrase for _, phrase in OVERFLOW_PHRASES)
_NUMBER = r"(\d[\d,]*)"
# (pattern, group of the limit, group of the prompt size or 0 when the message has none)
_LIMITS: Final = (
    (
        re.compile(
            rf"maximum context length is {_NUMBER}.*?(?:resulted in|requested) {_NUMBER}",
            re.I | re.S,
        ),
        1,
        2,
    ),
    (re.compile(rf"prompt is too long:\s*{_NUMBER}\s*tokens\s*>\s*{_NUMBER}", re.I), 2, 1),
    (
        re.compile(
            rf"input token count \({_NUMBER}\) exceeds the maximum number of tokens "
            rf"allowed \({_NUMBER}\)",
            re.I,
        ),
        2,
        1,
    ),
    (re.compile(rf"maximum (?:context|model) length (?:is|of) {_NUMBER}", re.I), 1, 0),
    (re.compile(rf"max_model_len[=: ]+{_NUMBER}", re.I), 1, 0),
    (re.compile(rf"context (?:length|window|size)(?: is| of)? {_NUMBER}", re.I), 1, 0),
)


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_rate_limit(error: BaseException) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    if any("RateLimit" in name for name in names) or getattr(error, "status_code", None) == 429:
        return True
    return bool(_RATE_LIMIT.search(str(error)))


def is_context_overflow(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) says the prompt was too long."""
    for item in _chain(error):
        if isinstance(item, ContextOverflowError):
            return True
        if _is_rate_limit(item):
            continue
        if {cls.__name__ for cls in type(item).__mro__} & OVERFLOW_CLASS_NAMES:
            return True
        if getattr(item, "code", None) == "context_length_exceeded":
            return True
        text = str(item).lower()
        if any(phrase in text for phrase in _PHRASES):
            return True
    return False


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def overflow_limits(error: BaseException) -> tuple[int | None, int | None]:
    """``(context limit, prompt size)`` in the provider's tokens, when its message says them."""
    for item in _chain(error):
        text = str(item)
        for pattern, limit_group, size_group in _LIMITS:
            match = pattern.search(text)
            if match:
                size = _int(match.group(size_group)) if size_group else None
                return _int(match.group(limit_group)), size
    return None, None
