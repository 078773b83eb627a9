"""What an index stores: the entries a file is cut into (one by one, or column by column
as the chunker returns them), a file's update for ``sync_files``, the record of an indexed
file, and the counts of ``stats``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple, overload

__all__ = ["EntryColumns", "FileUpdate", "IndexEntry", "IndexStats", "IndexedFile"]


class IndexEntry(NamedTuple):
    """A chunk of a workspace file as the index stores it (see :mod:`harnessmem.index`).

    ``context`` (headings above the entry) is searched with a lower weight than
    ``content``; ``date`` is shown with hits; entries with the same ``section``
    (the ordinal of the heading block they sit in) are neighbours, which a backend
    may use in ranking. A named tuple, not a dataclass: files are cut into these by
    the hundred thousand, and a tuple is built in half the time.
    """

    path: str
    start_line: int
    end_line: int
    content: str
    context: str = ""
    date: str | None = None
    section: int = 0


# Builds a named tuple without the keyword-argument layer of its __new__ (half the cost).
_tuple_new = tuple.__new__


class EntryColumns(Sequence[IndexEntry]):
    """The entries of one file, held column by column, as
    :func:`harnessmem.index.chunking.chunk_markdown` returns them.

    A sequence of :class:`IndexEntry` to every reader (an entry is built when it is
    read); a backend that knows this class takes the columns as they are. A daily log
    of a hundred bullets then costs six list extensions rather than a hundred tuples,
    and a rebuild does not transpose them back into columns to store them.
    """

    __slots__ = ("contents", "contexts", "dates", "ends", "path", "sections", "starts")

    def __init__(self, path: str) -> None:
        self.path = path
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.contents: list[str] = []
        self.contexts: list[str] = []
        self.dates: list[str | None] = []
        self.sections: list[int] = []

    def __len__(self) -> int:
        return len(self.contents)

    def __iter__(self) -> Iterator[IndexEntry]:
        fields = zip(
            repeat(self.path),
            self.starts,
            self.ends,
            self.contents,
            self.contexts,
            self.dates,
            self.sections,
        )
        return map(_tuple_new, repeat(IndexEntry), fields)

    @overload
    def __getitem__(self, index: int) -> IndexEntry: ...
    @overload
    def __getitem__(self, index: slice) -> list[IndexEntry]: ...
    def __getitem__(self, index: int | slice) -> IndexEntry | list[IndexEntry]:
        if isinstance(index, slice):
            return list(self)[index]
        return IndexEntry(
            self.path,
            self.starts[index],
            self.ends[index],
            self.contents[index],
            self.contexts[index],
            self.dates[index],
            self.sections[index],
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EntryColumns | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"EntryColumns({list(self)!r})"


@dataclass(frozen=True, slots=True)
class FileUpdate:
    """One file's new state for :meth:`IndexBackend.sync_files`."""

    path: str
    content_hash: str
    entries: Sequence[IndexEntry]
    source: str = "memory"
    change_token: str | None = None


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """What a backend holds for one file: its content hash and the change token seen."""

    path: str
    source: str
    content_hash: str
    change_token: str | None
    entries: int


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What an index holds."""

    files: int
    entries: int
    details: Mapping[str, Any] = field(default_factory=dict)
