"""Search results without repeats: one hit per memory, the other places it is kept listed.

The same fact lives in several files: the daily-log bullet the flush wrote and the
MEMORY.md line consolidation made of it, or near-identical bullets written on several
days. :func:`collapse_repeats` keeps the best-ranked hit of each such group and lists the
others' locations in its ``also``; :func:`search_distinct` is the search every caller
goes through (``IndexSync.search``), asking the backend for more hits than wanted so that
the cut still holds ``limit`` different memories.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import Any

from harnessmem.backends.base import IndexBackend, SearchHit

__all__ = ["OVERFETCH", "collapse_repeats", "location", "same_text", "search_distinct"]

#: How many times ``limit`` hits :func:`search_distinct` asks the backend for.
OVERFETCH = 3
#: The share of a hit's words another hit must hold for the first to be its repeat.
COVERED = 0.85

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MARKER = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?", re.MULTILINE)
# The bullet a flush writes may carry who said it; consolidation may drop it.
_FILLER = frozenset({"the", "a", "an", "and", "of", "to", "is", "in", "on", "user", "user's"})


#: A code that names one thing, whole: a reservation (AQLBTL, OI5L9G), a user id
#: (omar_rossi_1241), a version (v0.9.0). Kept as one word, marked, beside its parts.
_CODE = re.compile(
    r"(?<![\w.-])(?:[A-Z][A-Z0-9]{4,}|[A-Za-z0-9]*\d[A-Za-z0-9]*|\w+_[\w.]+|v?\d+(?:\.\d+)+)(?![\w-])"
)
_CODE_MARK = "#"
_NONE: frozenset[str] = frozenset()
# Every form of _CODE holds a digit, an underscore or five capitals in a row.
# Plain ASCII, byte by byte: letters and digits (lower-cased) stay, the rest is a space,
# so that splitting gives what _WORD finds in the case-folded text.
_ASCII_WORDS = (
    bytes(c | 0x20 if chr(c).isalpha() else c if chr(c).isdigit() else 0x20 for c in range(128))
    + b" " * 128
)
# Plain ASCII: only the digits and the underscore stay (deleted: everything else) ...
_NOT_DIGIT_OR_UNDERSCORE = bytes(c for c in range(256) if c not in b"0123456789_")
# ... and capitals stay, the rest is a space (a run of five is one split word of five).
_CAPITALS = bytes(c if 0x41 <= c <= 0x5A else 0x20 for c in range(256))


def fact_words(text: str) -> frozenset[str]:
    """The words a hit's text is compared by: no list marker, case folded, filler out; each
    code (a reservation, an id, a version) also as one marked word."""
    return _compared(text)[0]


def _compared(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`fact_words` of ``text`` and the numbers and codes among them (:func:`_exact`).

    Most texts are ASCII without a digit, an underscore or five capitals in a row: no code
    can be found in them (each of ``_CODE``'s forms needs one of those), no word holds a
    digit, and NFKC leaves ASCII as it is; those skip the code search and the digit test,
    and their words and those tests come from byte tables (half the time of the regexes).
    """
    if not text.isascii():
        return _compared_text(unicodedata.normalize("NFKC", _MARKER.sub("", text)))
    if "\n" in text:
        text = _MARKER.sub("", text)
    elif (marker := _MARKER.match(text)) is not None:
        text = text[marker.end() :]  # without a line break only the start can hold one
    raw = text.encode("ascii")
    words = frozenset(raw.translate(_ASCII_WORDS).decode("ascii").split()) - _FILLER
    if (
        not raw.translate(None, _NOT_DIGIT_OR_UNDERSCORE)
        and max(map(len, raw.translate(_CAPITALS).split()), default=0) < 5
    ):
        return words, _NONE
    return _with_codes(words, text)


def _compared_text(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`_compared` of ``text`` without its marker, normalised (any text)."""
    return _with_codes(frozenset(_WORD.findall(text.casefold())) - _FILLER, text)


def _with_codes(words: frozenset[str], text: str) -> tuple[frozenset[str], frozenset[str]]:
    words |= {_CODE_MARK + code.casefold() for code in _CODE.findall(text)}
    return words, _exact(words)


def same_text(repeat: frozenset[str], kept: frozenset[str]) -> bool:
    """Whether a hit with the words ``repeat`` says nothing that one with ``kept`` does not:
    its words are (nearly) all in ``kept``, and every number and code of it is (another
    reservation id is another reservation); short texts must match."""
    return _repeats(repeat, _exact(repeat), kept)


def _exact(words: frozenset[str]) -> frozenset[str]:
    """The numbers and codes among ``words`` (``isalpha`` first: most words are letters
    only, and it is one call where the digit test walks the word)."""
    return frozenset(
        w
        for w in words
        if w.startswith(_CODE_MARK) or (not w.isalpha() and any(c.isdigit() for c in w))
    )


def _repeats(repeat: frozenset[str], exact: frozenset[str], kept: frozenset[str]) -> bool:
    if not repeat:
        return not kept
    if len(repeat) < 4:
        return repeat == kept
    if len(repeat & kept) < COVERED * len(repeat):
        return False
    return exact <= kept


def location(hit: SearchHit) -> str:
    """``path:start-end`` of a hit."""
    return f"{hit.path}:{hit.start_line}-{hit.end_line}"


@functools.cache
def _spare(size: int) -> int:
    """How many of its ``size`` words (four or more) a repeat may lack in the hit it repeats:
    the most for which the rest is still :data:`COVERED` (the same float test as
    :func:`_repeats`)."""
    spare = 0
    while size - spare - 1 >= COVERED * size:
        spare += 1
    return spare


def collapse_repeats(hits: Sequence[SearchHit], limit: int | None = None) -> list[SearchHit]:
    """``hits`` (best first) with each repeat folded into the better hit it repeats.

    A later hit whose words the earlier one holds (:func:`same_text`) is left out and its
    location added to the earlier one's ``also``; order and scores are kept. At most
    ``limit`` hits come back (None: all).

    A hit is fully compared only with the kept hits that can hold it. Under four words a
    repeat has the same words (looked up). Otherwise it lacks at most ``_spare`` of its
    words in the hit it repeats, so that hit holds one of any ``_spare + 1`` of them: the
    rarest among the hits are taken, and a kept hit holding none of them is passed over.
    """
    compared = [_compared(hit.content) for hit in hits]
    held = Counter(chain.from_iterable(words for words, _ in compared))
    kept: list[tuple[SearchHit, frozenset[str], list[str]]] = []
    first_with: dict[frozenset[str], tuple[SearchHit, frozenset[str], list[str]]] = {}
    for hit, (words, exact) in zip(hits, compared, strict=True):
        if len(words) < 4:
            home = first_with.get(words)
        else:
            probe = frozenset(sorted(words, key=held.__getitem__)[: _spare(len(words)) + 1])
            home = next(
                (
                    entry
                    for entry in kept
                    if not probe.isdisjoint(entry[1]) and _repeats(words, exact, entry[1])
                ),
                None,
            )
        if home is not None:
            home[2].append(location(hit))
            home[2].extend(hit.also)
            continue
        entry = (hit, words, list(hit.also))
        first_with.setdefault(words, entry)
        kept.append(entry)
    out = [
        dataclasses.replace(hit, also=tuple(dict.fromkeys(also))) if also else hit
        for hit, _, also in kept
    ]
    return out if limit is None else out[:limit]


def search_distinct(
    backend: IndexBackend, query: str, limit: int, **options: Any
) -> list[SearchHit]:
    """``backend.search`` with repeats collapsed: up to ``limit`` different memories.

    ``options`` go to the backend's ``search`` (``source``, ``mode``, ``path_prefix``,
    ``timeout``).
    """
    hits = backend.search(query, limit * OVERFETCH, **options)
    return collapse_repeats(hits, limit)
