"""Text as PostgreSQL sees it: the indexed form of entries and tsquery text of query terms.

Both sides are cut by the same rules as harnessmem's query builder
(:mod:`harnessmem.backends.fulltext`), so that a query word and the word in a document
always meet:

- :func:`document_text` is what ``to_tsvector`` receives for an entry: NFKC, diacritics
  of Latin, Greek and Cyrillic letters removed (``café`` is indexed as ``cafe``), every
  character that is not a letter or digit turned into a space (``gpt-4o`` becomes the two
  adjacent words ``gpt 4o``, the phrase the query builder makes of it), and runs of CJK
  written as overlapping bigrams plus the run's last character. PostgreSQL's parser keeps
  a run of Han, kana or Hangul as one word, so without the bigrams ``寿司`` would not
  match ``我喜欢寿司``; the bigrams are ordinary words to every text search configuration.
- :func:`term_tsquery` and :func:`tsquery_text` write query terms as tsquery text in
  which every token is a quoted lexeme. Tokens hold only letters and digits (the query
  builder guarantees it; anything else is dropped here as well), so no text a user types
  can become tsquery syntax: ``to_tsquery`` never meets a syntax error.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from harnessmem.backends import SearchMode
from harnessmem.backends.fulltext import QueryTerm, segment_cjk

__all__ = ["clean", "document_text", "fold", "term_tsquery", "tsquery_text"]

# Combining diacritical marks (U+0300-U+036F): the accents of Latin, Greek and Cyrillic
# letters once decomposed. Marks of other scripts (the kana voicing marks, Indic vowel
# signs) change the letter and are kept, as SQLite's ``remove_diacritics`` keeps them.
_ACCENTS = re.compile("[\u0300-\u036f]+")
_WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r"[^\W_]+\Z")


def fold(text: str) -> str:
    """``text`` in NFKC with Latin, Greek and Cyrillic diacritics removed."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", _ACCENTS.sub("", decomposed))


def document_text(text: str) -> str:
    """What ``to_tsvector`` receives for ``text`` (see the module docstring)."""
    return segment_cjk(" ".join(_WORD.findall(fold(text))))


def clean(text: str) -> str:
    """``text`` as PostgreSQL can store it: no NUL, no unpaired surrogate."""
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _lexeme(token: str, *, prefix: bool = False) -> str:
    # Tokens are letters and digits (checked by the callers); the escaping is a guard.
    body = token.replace("\\", "\\\\").replace("'", "''")
    return f"'{body}'" + (":*" if prefix else "")


def _tokens(term: QueryTerm) -> list[str]:
    return [t for t in (fold(token) for token in term.tokens) if _TOKEN.match(t)]


def term_tsquery(term: QueryTerm) -> str | None:
    """One term as tsquery text: a lexeme, a phrase of lexemes or a prefix; None if empty."""
    tokens = _tokens(term)
    if not tokens:
        return None
    if term.prefix and len(tokens) == 1:
        return _lexeme(tokens[0], prefix=True)
    return " <-> ".join(_lexeme(token) for token in tokens)


def tsquery_text(terms: Sequence[QueryTerm], mode: SearchMode = "any") -> str | None:
    """All ``terms`` as one tsquery text for ``mode``; None when nothing is left to match.

    ``any`` ORs the terms, ``all`` ANDs them, ``phrase`` makes one phrase of every token.
    Stop words inside are the configuration's business: ``to_tsquery`` drops them (in a
    phrase it widens the distance, as the indexed positions do).
    """
    if mode == "phrase":
        tokens = [token for term in terms for token in _tokens(term)]
        return " <-> ".join(_lexeme(token) for token in tokens) if tokens else None
    if mode not in ("any", "all"):
        raise ValueError(f"unknown search mode {mode!r}; expected 'any', 'all' or 'phrase'")
    parts = _parts(terms)
    if not parts:
        return None
    return (" | " if mode == "any" else " & ").join(f"( {part} )" for part in parts)


def _parts(terms: Iterable[QueryTerm]) -> list[str]:
    return [part for part in map(term_tsquery, terms) if part is not None]
