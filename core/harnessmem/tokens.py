"""Token counting for OpenAI-format chat messages: real (tiktoken, offline), cached, incremental.

``TokenCounter`` counts with tiktoken's BPE when it can and with a documented
estimate when it cannot. tiktoken is imported on the first count, never at
``import harnessmem``. Its BPE files come from the copies bundled in litellm's
package: when neither ``TIKTOKEN_CACHE_DIR`` nor ``DATA_GYM_CACHE_DIR`` is set, the
counter points ``TIKTOKEN_CACHE_DIR`` at ``<litellm>/litellm_core_utils/tokenizers``,
found without importing litellm. The counter never downloads: a known encoding whose
file is missing from the cache directory falls back to the estimate.

Message framing follows OpenAI's published accounting (the cookbook's
``num_tokens_from_messages``): every message costs ``MESSAGE_OVERHEAD`` (3) tokens
plus its role, content and, when present, ``NAME_OVERHEAD`` (1) plus its name. For
what the cookbook does not cover, this module adds, per tool call,
``TOOL_CALL_OVERHEAD`` (3) plus the function name and the arguments text; a tool
message's ``tool_call_id`` is counted as text; an image part counts ``IMAGE_TOKENS``
(765, OpenAI's price of one 1024x1024 high-detail image); any other non-text part
counts as its JSON. ``count_messages`` adds ``REPLY_PRIMING`` (3), the tokens that
prime the assistant's reply, so its figure is comparable to a provider's
``prompt_tokens``; ``count_prefix_sums`` leaves it out because it serves cut-off
arithmetic. Tool schemas sent next to the messages are not counted.

Counts are cached per message, keyed by the tuple of exactly the values the count
depends on (role, content text(s), name, tool_call_id, tool-call names and
arguments). So a new list holding the same dicts hits, a dict whose content was
replaced in place misses, and an equal copy hits. Building the key is a few
dictionary reads, and hashing it is cheap because Python caches a string's hash
on the string; recounting a conversation that grew by one message encodes only
that message.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "CacheInfo",
    "TokenCounter",
    "ensure_cache_dir",
    "estimate_tokens",
    "litellm_package_dir",
    "memory_tokens",
]

logger = logging.getLogger(__name__)

MESSAGE_OVERHEAD: Final = 3
"""Framing tokens of every message (``<|start|>{role}\\n ... <|end|>``), as OpenAI documents."""
NAME_OVERHEAD: Final = 1
"""Extra token when a message carries ``name``, as OpenAI documents."""
REPLY_PRIMING: Final = 3
"""Tokens priming the assistant's reply, added once by ``count_messages``."""
TOOL_CALL_OVERHEAD: Final = 3
"""Framing of one tool call besides its name and arguments (estimated; OpenAI does not say)."""
IMAGE_TOKENS: Final = 765
"""Fixed estimate for one image part: OpenAI's cost of a 1024x1024 high-detail image."""

Backend = Literal["tiktoken", "estimate"]

# Cache file names (sha1 of the download URL, as tiktoken names them) of the
# encodings whose files we can check for before loading; checking first is what
# keeps a missing file from turning into a network download.
_KNOWN_CACHE_FILES: Final[dict[str, tuple[str, ...]]] = {
    "o200k_base": ("fb374d419588a4632f3f557e76b4b70aebbca790",),
    "o200k_harmony": ("fb374d419588a4632f3f557e76b4b70aebbca790",),
    "cl100k_base": ("9b5ad71b2ce5302211f9c61530b329a4922fc6a4",),
    "p50k_base": ("ec7223a39ce59f226a68acc30dc1af2788490e15",),
    "p50k_edit": ("ec7223a39ce59f226a68acc30dc1af2788490e15",),
    "r50k_base": ("0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4",),
    "gpt2": (
        "6c7ea1a7e38e3a7f062df639a5b80947f075ffe6",
        "6d1cbeee0f20b3d9449abfede4726ed8212e3aee",
    ),
}
_IMAGE_PART_TYPES: Final = frozenset({"image_url", "image", "input_image"})
_DEFAULT_MAX_ENTRIES: Final = 50_000
_env_lock = threading.Lock()


# ---------------------------------------------------------------- estimator

# One token per CJK character: Han (with extensions A-F and compatibility
# ideographs), kana, Hangul syllables and jamo, CJK punctuation, fullwidth forms.
# tiktoken's o200k_base averages about one token per such character.
_CJK = (
    "\u1100-\u11ff\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    "\U00020000-\U0002ebef"
)
_ESTIMATE_PIECES = re.compile(
    rf"(?P<cjk>[{_CJK}])|(?P<word>[^\W\d_{_CJK}]+)|(?P<digits>\d{{1,3}})"
    rf"|(?P<space>\s+)|(?P<punct>[^\w\s{_CJK}]+|_+)"
)


def estimate_tokens(text: str) -> int:
    """Estimate the o200k/cl100k token count of ``text`` without a tokenizer.

    Rules (fitted on the tau-bench and SWE-agent transcripts, where they land
    between 0.8x and 1.5x of tiktoken and about 1.13x in total, erring high as a
    budget should; plain ``chars / 4`` ranged 0.48x to 1.64x there):

    - each CJK character (Han, Hiragana, Katakana, Hangul, fullwidth) is one token;
    - a run of letters is ``ceil(len / 6)`` tokens (its leading space is free);
    - each group of up to three digits is one token;
    - a run of punctuation is ``ceil(len / 2)`` tokens;
    - a run of two or more whitespace characters is one token.

    Letters of other scripts (Cyrillic, Arabic, ...) tokenize worse than Latin
    and are under-counted by this rule.
    """
    total = 0
    for match in _ESTIMATE_PIECES.finditer(text):
        kind = match.lastgroup
        size = match.end() - match.start()
        if kind in ("cjk", "digits"):
            total += 1
        elif kind == "word":
            total += -(-size // 6)
        elif kind == "punct":
            total += -(-size // 2)
        elif size > 1:  # whitespace: a single space merges into the next token
            total += 1
    return total


# ---------------------------------------------------------------- tiktoken loading


def _litellm_tokenizers_dir() -> Path | None:
    """Where litellm bundles tiktoken's BPE files, located without importing litellm."""
    package = litellm_package_dir()
    candidate = package / "litellm_core_utils" / "tokenizers" if package else None
    return candidate if candidate is not None and candidate.is_dir() else None


def ensure_cache_dir() -> str | None:
    """Point tiktoken at litellm's bundled files unless the user chose a cache dir.

    Returns the directory tiktoken will read, or None when tiktoken would use
    its own temporary-directory default (and download). The litellm backend calls it
    before importing litellm, so that any tiktoken use in the process stays offline.
    """
    with _env_lock:
        for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
            if variable in os.environ:
                return os.environ[variable]
        bundled = _litellm_tokenizers_dir()
        if bundled is None:
            return None
        os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
        return str(bundled)


def _load_tiktoken_encoding(name: str) -> Any:
    """Load tiktoken's encoding ``name`` from local files only; raise if that is impossible."""
    cache_dir = ensure_cache_dir()
    expected = _KNOWN_CACHE_FILES.get(name)
    if expected is not None:
        missing = [f for f in expected if not cache_dir or not (Path(cache_dir) / f).is_file()]
        if missing:
            raise FileNotFoundError(
                f"BPE file {missing[0]} for {name!r} is not in the tiktoken cache dir "
                f"{cache_dir!r}; set TIKTOKEN_CACHE_DIR to a directory that holds it"
            )
    # Deferred: importing tiktoken costs time and memory `import harnessmem` must not pay.
    import tiktoken

    return tiktoken.get_encoding(name)


# ---------------------------------------------------------------- message keys

# A message key holds exactly what its count depends on, so equal keys mean
# equal counts. Layout: (role, content, name, tool_call_id, calls) where content
# is a str, None, or a tuple of part keys, and calls is a tuple of (name, arguments).
_MessageKey = tuple[Any, ...]
_IMAGE_MARK: Final = ("image",)


def _as_text(value: Any) -> str | None:
    """A field's text: strings as they are, None as None, anything else as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _part_key(part: Any) -> Any:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        text = part.get("text")
        if isinstance(text, str):
            return text
        if part.get("type") in _IMAGE_PART_TYPES:
            return _IMAGE_MARK
    return ("json", _as_text(part))


def _calls_key(message: Mapping[str, Any]) -> tuple[tuple[str | None, str | None], ...]:
    calls: list[tuple[str | None, str | None]] = []
    raw_calls = message.get("tool_calls") or ()
    legacy = message.get("function_call")
    if legacy:
        # The deprecated single-call field is framed like one tool call.
        raw_calls = [*raw_calls, {"function": legacy}]
    for call in raw_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            calls.append((_as_text(function.get("name")), _as_text(function.get("arguments"))))
        else:
            calls.append((None, _as_text(call)))
    return tuple(calls)


def _message_key(message: Mapping[str, Any]) -> _MessageKey:
    # Runs for every message on every count, so the common shapes (str or None
    # fields) skip the helper calls; this is most of a warm recount's cost.
    get = message.get
    role, content, name, call_id = get("role"), get("content"), get("name"), get("tool_call_id")
    if content is not None and type(content) is not str:
        if isinstance(content, list | tuple):
            content = tuple(_part_key(part) for part in content)
        else:
            content = _as_text(content)
    if role is not None and type(role) is not str:
        role = _as_text(role)
    if name is not None and type(name) is not str:
        name = _as_text(name)
    if call_id is not None and type(call_id) is not str:
        call_id = _as_text(call_id)
    calls = _calls_key(message) if get("tool_calls") or get("function_call") else ()
    return (role, content, name, call_id, calls)


def _texts_of_key(key: _MessageKey) -> tuple[list[str], int]:
    """The texts to encode for a message key, and the tokens that need no encoding."""
    role, content, name, tool_call_id, calls = key
    texts: list[str] = []
    fixed = MESSAGE_OVERHEAD
    if role:
        texts.append(role)
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, tuple):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif part == _IMAGE_MARK:
                fixed += IMAGE_TOKENS
            else:
                texts.append(part[1] or "")
    if name:
        texts.append(name)
        fixed += NAME_OVERHEAD
    if tool_call_id:
        texts.append(tool_call_id)
    for function_name, arguments in calls:
        fixed += TOOL_CALL_OVERHEAD
        if function_name:
            texts.append(function_name)
        if arguments:
            texts.append(arguments)
    return texts, fixed


# ---------------------------------------------------------------- counter


@dataclass(frozen=True)
class CacheInfo:
    """Statistics of a ``TokenCounter``'s per-message cache (a miss is one message encoded)."""

    hits: int
    misses: int
    size: int
    maxsize: int


class TokenCounter:
    """Counts tokens of texts and OpenAI chat messages, with a per-message LRU cache.

    ``encoding`` is a tiktoken encoding name (``o200k_base`` for GPT-4o and later,
    ``cl100k_base`` for GPT-4/3.5). The tokenizer loads on first use; if it cannot
    load (tiktoken missing, BPE file absent, any error) the counter logs one
    warning (once per counter, on the logger ``harnessmem.tokens``) and uses
    ``estimate_tokens`` from then on; ``backend`` then reads ``"estimate"``. Safe to share between
    threads. The cache holds up to ``max_entries`` message keys, which keep
    references to the message texts they were built from.
    """

    def __init__(
        self, encoding: str = "o200k_base", *, max_entries: int = _DEFAULT_MAX_ENTRIES
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.encoding_name = encoding
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._encode_len: Callable[[str], int] | None = None
        self._backend: Backend | None = None
        self._cache: OrderedDict[_MessageKey, int] = OrderedDict()
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        backend = self._backend or "not loaded"
        return f"TokenCounter(encoding={self.encoding_name!r}, backend={backend!r})"

    @property
    def backend(self) -> Backend:
        """``"tiktoken"`` or ``"estimate"``; reading it loads the tokenizer if needed."""
        self._encoder()
        assert self._backend is not None
        return self._backend

    def _encoder(self) -> Callable[[str], int]:
        encode_len = self._encode_len
        if encode_len is not None:
            return encode_len
        with self._lock:
            if self._encode_len is None:
                try:
                    encoding = _load_tiktoken_encoding(self.encoding_name)
                except Exception as exc:  # any failure means "no tokenizer"; the estimate serves
                    logger.warning(
                        "tiktoken encoding %r unavailable (%s: %s); token counts are "
                        "estimates from now on.\nInstall tiktoken and make its BPE file "
                        "available offline (TIKTOKEN_CACHE_DIR) for exact counts.",
                        self.encoding_name,
                        type(exc).__name__,
                        exc,
                    )
                    self._encode_len, self._backend = estimate_tokens, "estimate"
                else:
                    # encode_ordinary: text that merely contains "<|endoftext|>" must
                    # count as text, not raise as a disallowed special token.
                    def tiktoken_len(text: str, _encode: Any = encoding.encode_ordinary) -> int:
                        return len(_encode(text))

                    self._encode_len, self._backend = tiktoken_len, "tiktoken"
            return self._encode_len

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` alone, without message framing. Not cached."""
        if not text:
            return 0
        return self._encoder()(text)

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one message, framing included (see the module docstring)."""
        return self._counts([message])[0]

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of a prompt made of ``messages``: their counts plus ``REPLY_PRIMING``."""
        return sum(self._counts(messages)) + REPLY_PRIMING

    def count_prefix_sums(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Running totals: element ``c`` is the token count of ``messages[:c]``.

        The list has ``len(messages) + 1`` elements, starting at 0, and leaves out
        ``REPLY_PRIMING``. The suffix ``messages[c:]`` costs ``sums[-1] - sums[c]``,
        which is what a cut-off chosen from the back by a token budget needs.
        """
        sums = [0]
        total = 0
        for tokens in self._counts(messages):
            total += tokens
            sums.append(total)
        return sums

    def cache_info(self) -> CacheInfo:
        """Hit and miss counts of the per-message cache, and its size and bound."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._cache), self._max_entries)

    def clear_cache(self) -> None:
        """Forget every cached message count (the statistics too)."""
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = 0

    def _counts(self, messages: Iterable[Mapping[str, Any]]) -> list[int]:
        keys = [_message_key(message) for message in messages]
        counts: list[int | None] = [None] * len(keys)
        missing: dict[_MessageKey, list[int]] = {}
        cache = self._cache
        # One lock round for all lookups; tokenizing happens outside the lock so
        # that other threads' cache hits are not held up by a long encode.
        with self._lock:
            for index, key in enumerate(keys):
                cached = cache.get(key)
                if cached is None:
                    missing.setdefault(key, []).append(index)
                else:
                    cache.move_to_end(key)
                    counts[index] = cached
            self._hits += len(keys) - len(missing)
            self._misses += len(missing)
        if missing:
            encode_len = self._encoder()
            fresh: dict[_MessageKey, int] = {}
            for key, indexes in missing.items():
                texts, tokens = _texts_of_key(key)
                tokens += sum(encode_len(text) for text in texts if text)
                fresh[key] = tokens
                for index in indexes:
                    counts[index] = tokens
            with self._lock:
                cache.update(fresh)
                while len(cache) > self._max_entries:
                    cache.popitem(last=False)
        return [count if count is not None else 0 for count in counts]


def litellm_package_dir() -> Path | None:
    """The folder of the installed litellm package (found without importing it: that takes
    seconds), or None when it is not installed. It holds files harnessmem reads on their
    own: tiktoken's BPE files and the model price list."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if Path(location).is_dir():
            return Path(location)
    return None


_MEMORY_COUNTER: TokenCounter | None = None


def memory_tokens(text: str) -> int:
    """The tokens of a MEMORY.md text, counted (not estimated): the one figure that
    ``harnessmem status``, the inspector and the consolidation budget all show and judge."""
    global _MEMORY_COUNTER
    if _MEMORY_COUNTER is None:
        _MEMORY_COUNTER = TokenCounter()
    return _MEMORY_COUNTER.count_text(text)
