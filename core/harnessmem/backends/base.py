"""Base classes for index and model backends.

A backend is a class registered under a name in the entry-point group
``harnessmem.index`` or ``harnessmem.model``. It owns a pydantic ``Options``
model that validates the ``options`` table of its config section, so errors
carry the dotted path (``index.options.url``).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessmem._validation import problem_lines
from harnessmem.errors import ConfigError

__all__ = [
    "BackendOptions",
    "Completion",
    "IndexBackend",
    "IndexEntry",
    "IndexStats",
    "ModelBackend",
    "SearchHit",
]


class BackendOptions(BaseModel):
    """Base of a backend's options model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Backend:
    #: Name the backend is registered under (the entry-point name).
    name: ClassVar[str] = ""
    #: The options model; subclasses replace it with their own.
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    @classmethod
    def parse_options(cls, raw: Mapping[str, Any] | BackendOptions | None, *, where: str) -> Any:
        """Validate ``raw`` with ``cls.Options``; errors name ``where`` (e.g. ``index.options``)."""
        if isinstance(raw, cls.Options):
            return raw
        try:
            return cls.Options.model_validate(dict(raw or {}))
        except ValidationError as exc:
            problems = problem_lines(exc, where)
            raise ConfigError(
                f"invalid options for {cls.__name__} ({where}): {problems[0]}",
                hint="; ".join(problems[1:]) or None,
                problems=problems,
            ) from None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result.

    ``path`` is relative to the workspace root; ``start_line`` and ``end_line``
    are 1-based and inclusive; a higher ``score`` is a better match.
    """

    path: str
    start_line: int
    end_line: int
    content: str
    score: float


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A chunk of a workspace file as the index stores it."""

    path: str
    start_line: int
    end_line: int
    content: str


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What an index holds."""

    files: int
    entries: int
    details: Mapping[str, Any] = field(default_factory=dict)


class IndexBackend(_Backend, ABC):
    """A full-text index over workspace files.

    The harness splits files into ``IndexEntry`` chunks and hands a backend
    whole files at a time, each with the hash of its content, so a backend can
    skip files it already holds at that hash.
    """

    #: Declared abilities; conformance tests skip, with the reason, what a backend lacks.
    capabilities: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def create(
        cls, options: Mapping[str, Any] | BackendOptions | None = None, **context: Any
    ) -> Self:
        """Validate ``options`` and build the backend; ``context`` carries the workspace facts."""
        return cls(cls.parse_options(options, where="index.options"), **context)

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        self.options = options
        self.context = context

    @abstractmethod
    def file_hashes(self) -> dict[str, str]:
        """Map every indexed path to the content hash it was indexed at."""

    @abstractmethod
    def sync_file(self, path: str, content_hash: str, entries: Sequence[IndexEntry]) -> bool:
        """Replace the entries of ``path``; return False when it was already at ``content_hash``."""

    @abstractmethod
    def remove(self, path: str) -> bool:
        """Forget ``path``; return whether it was indexed."""

    @abstractmethod
    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Best ``limit`` hits for a free-text ``query``; never raises on query syntax."""

    @abstractmethod
    def stats(self) -> IndexStats:
        """Counts of files and entries."""

    def close(self) -> None:
        """Release connections and files."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ModelBackend(_Backend, ABC):
    """A chat model used for summaries, fact extraction and consolidation.

    ``purpose`` is one of ``"summary"``, ``"flush"`` and ``"consolidation"``.
    """

    @classmethod
    def create(
        cls, options: Mapping[str, Any] | BackendOptions | None = None, **context: Any
    ) -> Self:
        """Validate ``options`` and build the backend; ``context`` carries model name and routes."""
        return cls(cls.parse_options(options, where="model.options"), **context)

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        self.options = options
        self.context = context

    @abstractmethod
    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Answer the OpenAI-format ``messages``; raise a ``ModelError`` subclass on failure."""

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> Completion:
        """Async twin of ``complete``; the default runs it in a worker thread."""
        return await asyncio.to_thread(
            self.complete, messages, purpose=purpose, max_tokens=max_tokens
        )

    def close(self) -> None:
        """Release clients and connections."""
